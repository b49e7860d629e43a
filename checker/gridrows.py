"""What the report's replica grid shows of one partition (reports.grid): which offset
rows it shows, with each replica's record, the final read's value and the values
acknowledged there, and how many rows it folds away.

One definition, run where the inputs are: by the check (checker.historyinputs:
in the driver for a small run, per partition inside Spark for a big one) and by
the report for a run checked before the check wrote it. Its input is every
record of every replica's log of the partition, the final read and the
acknowledged sends -- for a long run millions of rows; its output a few hundred.

Rows are kept as reports.grid describes: every anomaly offset (the lowest
MAX_ANOMALY_ROWS), lost value and ghost (acknowledged above every log's top) with
CONTEXT rows around it, then up to MAX_ROWS more -- the first rows, the last
EDGE and CONTEXT rows around each offset where the replicas differ.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_ROWS = 400  # rows besides the anomalies' own offsets and their context
MAX_ANOMALY_ROWS = 1000  # an anomaly's offsets shown per partition (the lowest)
MAX_GHOSTS = 200  # ghost rows per partition (the lowest offsets)
CONTEXT = 3
EDGE = 20
# The rows a fold keeps, by what they are.
PLAIN, MARKED, ANOMALY = 0, 1, 2

# broker -> offset -> (epoch, value): a partition's replica logs
Logs = dict[str, dict[int, tuple[Any, Any]]]


def lost_offsets(acked: dict[int, list[Any]], lost: set[Any]) -> set[int]:
    """Where each lost value was acknowledged: the offset to show even when the
    replicas now hold another record there (it was overwritten, not removed)."""
    return {off for off, vals in acked.items() if any(v in lost for v in vals)}


def add_ack(acked: dict[int, list[Any]], offset: int, value: Any) -> None:
    """An acknowledged send, in history order: each value once per offset."""
    vals = acked.setdefault(offset, [])
    if value not in vals:
        vals.append(value)


def anomaly_offsets(witness: Any) -> set[int]:
    """Every offset a witness names: the ints under an "offset" or "acked_offset"
    key and in an "offsets" list (of ints or of objects with an offset), at any depth; what
    "leo" and "hw" say about a replica's state is not an anomaly's offset."""
    out: set[int] = set()
    if isinstance(witness, dict):
        for k, v in witness.items():
            if k in ("offset", "acked_offset") and isinstance(v, int) and not isinstance(v, bool):
                out.add(v)
            elif k == "offsets" and isinstance(v, list):
                out.update(x for x in v if isinstance(x, int) and not isinstance(x, bool))
                out.update(*(anomaly_offsets(x) for x in v if isinstance(x, dict)))
            else:
                out |= anomaly_offsets(v)
    elif isinstance(witness, list):
        for x in witness:
            out |= anomaly_offsets(x)
    return out


def partition_rows(logs: Logs, final: dict[int, Any], acked: dict[int, list[Any]],
                   lost: Iterable[Any], must: Iterable[int]) -> dict[str, Any]:
    """The grid of one partition, as JSON: ``rows`` (in order: a kept offset
    {"o", "c": broker -> [epoch, value] of the replicas holding it, "f": the
    final read's value or absent, "a": the values acknowledged there}, a ghost
    {"o", "g": 1, "a"} or a fold {"gap": n}), ``hidden`` (rows folded), ``epochs``
    (every epoch in the logs), ``lost_offsets`` (lost_offsets), ``unshown`` (anomaly
    offsets beyond MAX_ANOMALY_ROWS) and ``brokers`` (those with a record here).

    ``final``: offset -> value of the final read; ``acked``: offset -> values
    acknowledged there (add_ack); ``lost``: the lost writes' values; ``must``:
    the offsets the anomalies name (the divergent ones among them)."""
    lost = set(lost)
    lost_at = lost_offsets(acked, lost) if lost else set()
    must = set(must) | lost_at
    brokers = sorted(b for b, log in logs.items() if log)
    maps = [logs[b] for b in brokers]
    top = max([max(m, default=-1) for m in maps] + [max(final, default=-1)])
    ghosts = sorted(o for o in acked if o > top)[:MAX_GHOSTS]
    in_range = {o for o in must if 0 <= o <= top}
    shown_must = set(sorted(in_range)[:MAX_ANOMALY_ROWS])
    # One cheap pass decides which offsets are worth a row (a chaos run has hundreds
    # of thousands).
    epochs: set[Any] = set()
    interesting = []
    for off in range(top + 1):
        present = set()
        lost_here = False
        for log in maps:
            r = log.get(off)
            if r is not None:
                present.add(r)
                lost_here = lost_here or r[1] in lost
        epochs.update(e for e, _ in present if e is not None)
        interesting.append(ANOMALY if off in shown_must or lost_here else
                           MARKED if len(present) > 1 else PLAIN)
    interesting += [ANOMALY] * len(ghosts)

    def make(i: int) -> dict[str, Any]:
        if i > top:
            off = ghosts[i - top - 1]
            return {"o": off, "g": 1, "a": acked[off]}
        row: dict[str, Any] = {"o": i, "c": {b: list(m[i]) for b, m in zip(brokers, maps,
                                                                             strict=True)
                                             if i in m}}
        if final.get(i) is not None:
            row["f"] = final[i]
        row["a"] = acked.get(i, [])
        return row

    rows, hidden = fold(interesting, make)
    return {"rows": rows, "hidden": hidden, "epochs": sorted(epochs),
            "lost_offsets": sorted(lost_at), "unshown": len(in_range - shown_must),
            "brokers": brokers}


def fold(interesting: list[int], make: Any) -> tuple[list[Any], int]:
    """The rows shown (made by `make(i)`) and how many are hidden: all of them up to
    MAX_ROWS, else every ANOMALY row (an anomaly's offset, a lost value, a ghost)
    with CONTEXT rows around it, then -- up to MAX_ROWS more -- the first rows
    (CONTEXT of them when there is an anomaly to show, else EDGE), the last EDGE,
    and CONTEXT rows around each MARKED one; folds ({"gap": n}) stand for the rest."""
    n = len(interesting)
    if n <= MAX_ROWS:
        return [make(i) for i in range(n)], 0
    must: set[int] = set()
    for i, level in enumerate(interesting):
        if level == ANOMALY:
            must.update(range(max(i - CONTEXT, 0), min(i + CONTEXT + 1, n)))
    head = CONTEXT if must else EDGE
    extra = [*range(head), *range(n - EDGE, n),
             *(i for i, lv in enumerate(interesting) if lv == MARKED)]
    keep = set(must)
    for i in extra:  # in this order: the head, the tail, the marked rows
        if len(keep - must) >= MAX_ROWS:
            break
        if interesting[i] == MARKED:
            keep.update(range(max(i - CONTEXT, 0), min(i + CONTEXT + 1, n)))
        else:
            keep.add(i)
    out: list[Any] = []
    hidden = 0
    gap = 0
    for i in range(n):
        if i in keep:
            if gap:
                out.append({"gap": gap})
                gap = 0
            out.append(make(i))
        else:
            gap += 1
            hidden += 1
    if gap:
        out.append({"gap": gap})
    return out, hidden
