"""The trace table of a simulated run: one row per replica fetch round that changed
something (trace.jsonl, harness.sim.trace) *or* protocol event of the partition
(events.jsonl: elections, role changes, truncations with their rule, HW moves,
OffsetsForLeaderEpoch requests and answers, restarts) *or* produce answer and
nemesis op (history.jsonl), in time order, with every replica's LEO/HW after it.

`isrlab trace` prints it (`text`) and the report embeds it: both take their rows
from `rows` alone, and explain its notation with `LEGEND`.
"""

from __future__ import annotations

from typing import Any

from checker import tracetable
from reports.units import fmt_time

# What the table's notation means (printed under it, and above it in the report).
LEGEND = (
    "LEO/HW: a replica's log end offset (the offset its next record gets) / its high "
    "watermark (records below it are committed), after the row's step; "
    "* marks the partition's leader; down: the broker is not running; "
    "blank: not known yet.",
    "leader's view: the LEO the leader last learnt of each follower from its fetches "
    "(? not fetched yet); the leader's HW is the lowest of these and its own LEO, over "
    "the ISR.",
    "A follower's HW reaches the leader's one fetch round after the data "
    "(docs/catalogue.md#hw-lags-one-fetch). Only fetch rounds that changed something "
    "are listed; an idle long poll is left out.",
)

rows = tracetable.rows


def text(table: list[dict[str, Any]], brokers: list[str]) -> str:
    """The rows as aligned columns, the legend under them."""
    head = ["time", "round", "node", "what", *[f"{b} LEO/HW" for b in brokers],
            "leader's view (LEO)"]
    lines = [head] + [[fmt_time(r["time"]), "" if r["round"] is None else str(r["round"]),
                       r["node"], r["what"], *[r["replicas"][b] for b in brokers], r["view"]]
                      for r in table]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    body = "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)
    return body + "\n\n" + "\n".join(LEGEND)


