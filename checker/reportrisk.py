"""A valid run's records at risk, for the story of what kept them
(reports.story.kept), computed by the check so that the report reads the runs of
offsets and a few sends, not every acknowledged send of a long run.

A record is at risk where a follower holds it above its HW as it follows a new
leader: each became-follower event's [hw, leo), the offsets there acknowledged
before the event. The check finds them in Spark over the parsed history (a join
with the events' ranges by offset bucket, then runs of consecutive offsets) and
writes them as report-inputs.json story "risk": event id -> [a, b) runs. The
story asks the history only for the sends at the offsets where a run of kept
records can start or end -- the runs' ends, the first values a line names, and
every offset an event names (a LEO, an HW, a truncation's range, an
OffsetsForLeaderEpoch end offset, a recognised resend's offset).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checker.reportevents import numbered_lines
from checker.spark import local_rows
from contract import EVENTS, STORY_VALUES

_BUCKET_BITS = 12  # the join's offset buckets: a window meets the sends of its few
# Events whose offsets a kept run may start or end at (reports.story.kept's cuts).
_MARKED = (b'"became-', b'"truncate"', b'"epoch-response"', b'"producer-duplicate"')
_MARKS = ("leo", "hw", "to", "from", "end_offset", "offset")


@dataclass
class RunRisk:
    """One run's at-risk windows and the offsets its events name, by partition."""

    windows: list[tuple[str, str, int, int, int, int]] = field(default_factory=list)
    # (event id, topic, partition, time ns, hw, leo) of each became-follower with hw < leo
    marks: dict[str, set[int]] = field(default_factory=dict)


def scan(run_dir: Path) -> RunRisk:
    """The became-follower windows and the marked offsets of a run's events.jsonl."""
    out = RunRisk()
    for i, line in numbered_lines(Path(run_dir) / EVENTS):
        if not any(m in line for m in _MARKED):
            continue
        try:
            e = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if not isinstance(e, dict) or "topic" not in e or "partition" not in e:
            continue
        part = f"{e['topic']}/{e['partition']}"
        out.marks.setdefault(part, set()).update(
            v for k in _MARKS if isinstance(v := e.get(k), int) and not isinstance(v, bool))
        hw, leo, t = e.get("hw"), e.get("leo"), e.get("time")
        if e.get("type") == "became-follower" and all(
                isinstance(x, int) and not isinstance(x, bool) for x in (hw, leo, t)) \
                and hw < leo and isinstance(e["partition"], int):
            out.windows.append((f"ev-{i}", str(e["topic"]), e["partition"], t, hw, leo))
    return out


def risk_runs(history: DataFrame, risks: dict[str, RunRisk]
              ) -> dict[str, dict[str, list[list[int]]]]:
    """run -> event id -> the [a, b) runs of offsets in its window acknowledged
    before it (reports.story.facts.RunFacts.at_risk): one join of the acknowledged
    sends with the windows, by (partition, offset bucket), and a window function."""
    out: dict[str, dict[str, list[list[int]]]] = {u: {} for u in risks}
    rows = [(u, ev, topic, p, t, hw, leo, k)
            for u, r in risks.items() for ev, topic, p, t, hw, leo in r.windows
            for k in range(hw >> _BUCKET_BITS, ((leo - 1) >> _BUCKET_BITS) + 1)]
    if not rows:
        return out
    spark = history.sparkSession
    windows = local_rows(spark, rows, "run string, ev string, topic string, partition int, "
                                      "t long, hw long, leo long, k long")
    sends = history.filter((F.col("f") == "send") & (F.col("type") == "ok")
                           & F.col("offset").isNotNull() & F.col("time").isNotNull()
                           & F.col("index").isNotNull() & F.col("run").isin(sorted(risks)))
    hit = (sends.select("run", "topic", "partition", "offset", "time",
                        F.shiftright("offset", _BUCKET_BITS).alias("k"))
           .join(F.broadcast(windows), ["run", "topic", "partition", "k"])
           .filter((F.col("offset") >= F.col("hw")) & (F.col("offset") < F.col("leo"))
                   & (F.col("time") < F.col("t")))
           .select("run", "ev", "offset").distinct())
    # consecutive offsets share offset - rank: one group per run of them
    rank = F.row_number().over(Window.partitionBy("run", "ev").orderBy("offset"))
    for r in (hit.withColumn("g", F.col("offset") - rank).groupBy("run", "ev", "g")
              .agg(F.min("offset").alias("a"), (F.max("offset") + 1).alias("b"))
              .select("run", "ev", "a", "b").collect()):
        out[r.run].setdefault(r.ev, []).append([r.a, r.b])
    for by_ev in out.values():
        for runs in by_ev.values():
            runs.sort()
    return out


def wanted_offsets(risk: RunRisk, runs: dict[str, list[list[int]]]) -> dict[str, set[int]]:
    """partition -> the offsets whose acknowledged sends the story of what kept the
    records reads: where a kept run can start (every run's ends, every offset the
    events name) and the first STORY_VALUES of each window, which its line names."""
    part_of = {ev: f"{topic}/{p}" for ev, topic, p, *_ in risk.windows}
    out = {part: set(marks) for part, marks in risk.marks.items()}
    for ev, rs in runs.items():
        offs = out.setdefault(part_of[ev], set())
        left = STORY_VALUES
        for a, b in rs:
            offs.update((a, b))
            offs.update(range(a, min(b, a + left)))
            left -= min(b - a, left)
    return out


def risk_inputs(history: DataFrame, run_dirs: dict[str, Path]
                ) -> tuple[dict[str, dict[str, list[list[int]]]], dict[str, dict[str, set[int]]]]:
    """run -> its story's "risk" (event id -> runs), and run -> partition -> the
    offsets whose sends the story reads (``run_dirs``: the valid runs' directories)."""
    risks = {u: scan(d) for u, d in run_dirs.items()}
    runs = risk_runs(history, risks)
    return runs, {u: wanted_offsets(risks[u], runs[u]) for u in risks}

