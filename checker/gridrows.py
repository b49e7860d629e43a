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
from dataclasses import dataclass
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


@dataclass
class Shape:
    """What decides which of a partition's offsets get a row: its replicas
    (``brokers``: those with a record), the highest offset of any log or of the
    final read (``top``), every epoch in the logs, where the replicas hold
    different records (``marked``: all of them, or at least those fold can reach:
    marked_needed), where a replica holds a lost value (``lost_here``), where a
    lost value was acknowledged (``lost_at``: lost_offsets) and the ghosts."""

    brokers: list[str]
    top: int
    epochs: set[Any]
    marked: set[int]
    lost_here: set[int]
    lost_at: set[int]
    ghosts: list[int]


def shape(logs: Logs, final: dict[int, Any], acked: dict[int, list[Any]],
          lost: Iterable[Any]) -> Shape:
    """A partition's Shape from all of its records (partition_rows' arguments)."""
    lost = set(lost)
    brokers = sorted(b for b, log in logs.items() if log)
    maps = [logs[b] for b in brokers]
    top = max([max(m, default=-1) for m in maps] + [max(final, default=-1)])
    epochs: set[Any] = set()
    marked: set[int] = set()
    lost_here: set[int] = set()
    by_offset: dict[int, set[tuple[Any, Any]]] = {}
    for m in maps:
        for off, r in m.items():
            if 0 <= off <= top:
                by_offset.setdefault(off, set()).add(r)
    for off, present in by_offset.items():
        epochs.update(e for e, _ in present if e is not None)
        if len(present) > 1:
            marked.add(off)
        if lost and any(v in lost for _, v in present):
            lost_here.add(off)
    return Shape(brokers, top, epochs, marked, lost_here,
                 lost_offsets(acked, lost) if lost else set(),
                 sorted(o for o in acked if o > top)[:MAX_GHOSTS])


def marked_needed(lost_here: int) -> int:
    """How many of a partition's marked offsets, lowest first, fold can look at
    (besides those among the last EDGE offsets): a marked offset that adds no row
    has its offset + CONTEXT already kept -- an anomaly's context (at most
    2 * CONTEXT + 1 rows around each of at most MAX_ANOMALY_ROWS + ``lost_here`` +
    MAX_GHOSTS anomalies), the head, the tail or past the end -- and the others
    add one row each until MAX_ROWS."""
    return (MAX_ROWS + (2 * CONTEXT + 1) * (MAX_ANOMALY_ROWS + lost_here + MAX_GHOSTS)
            + 2 * EDGE + 4 * CONTEXT)


@dataclass
class Plan:
    """Which rows a partition's grid shows: ``items`` in order, an offset row (an
    int: an offset, or top + 1 + k for the k-th ghost) or a fold {"gap": n}."""

    items: list[Any]
    hidden: int
    unshown: int

    def offsets(self, s: Shape) -> set[int]:
        """The offsets whose records the rows read."""
        return {i if i <= s.top else s.ghosts[i - s.top - 1] for i in self.items
                if isinstance(i, int)}


def plan(s: Shape, must: Iterable[int]) -> Plan:
    """The rows of a partition of Shape ``s``; ``must``: the offsets the anomalies name."""
    in_range = {o for o in set(must) | s.lost_at if 0 <= o <= s.top}
    shown_must = set(sorted(in_range)[:MAX_ANOMALY_ROWS])
    levels = dict.fromkeys(s.marked, MARKED)
    levels.update(dict.fromkeys(shown_must | s.lost_here, ANOMALY))
    levels.update(dict.fromkeys(range(s.top + 1, s.top + 1 + len(s.ghosts)), ANOMALY))
    items, hidden = fold(s.top + 1 + len(s.ghosts), levels)
    return Plan(items, hidden, len(in_range - shown_must))


def grid(s: Shape, p: Plan, logs: Logs, final: dict[int, Any], acked: dict[int, list[Any]]
         ) -> dict[str, Any]:
    """The grid of one partition, as JSON: ``rows`` (in order: a kept offset
    {"o", "c": broker -> [epoch, value] of the replicas holding it, "f": the
    final read's value or absent, "a": the values acknowledged there}, a ghost
    {"o", "g": 1, "a"} or a fold {"gap": n}), ``hidden`` (rows folded), ``epochs``
    (every epoch in the logs), ``lost_offsets`` (lost_offsets), ``unshown`` (anomaly
    offsets beyond MAX_ANOMALY_ROWS) and ``brokers`` (those with a record here).
    ``logs``, ``final`` and ``acked`` need hold only the Plan's offsets."""
    maps = [logs.get(b, {}) for b in s.brokers]

    def make(i: int) -> dict[str, Any]:
        if i > s.top:
            off = s.ghosts[i - s.top - 1]
            return {"o": off, "g": 1, "a": acked[off]}
        row: dict[str, Any] = {"o": i, "c": {b: list(m[i]) for b, m in zip(s.brokers, maps,
                                                                             strict=True)
                                             if i in m}}
        if final.get(i) is not None:
            row["f"] = final[i]
        row["a"] = acked.get(i, [])
        return row

    return {"rows": [make(i) if isinstance(i, int) else i for i in p.items],
            "hidden": p.hidden, "epochs": sorted(s.epochs), "lost_offsets": sorted(s.lost_at),
            "unshown": p.unshown, "brokers": s.brokers}


def partition_rows(logs: Logs, final: dict[int, Any], acked: dict[int, list[Any]],
                   lost: Iterable[Any], must: Iterable[int]) -> dict[str, Any]:
    """The grid of one partition from all of its records (grid's JSON).

    ``final``: offset -> value of the final read; ``acked``: offset -> values
    acknowledged there (add_ack); ``lost``: the lost writes' values; ``must``:
    the offsets the anomalies name (the divergent ones among them)."""
    s = shape(logs, final, acked, lost)
    return grid(s, plan(s, must), logs, final, acked)


def fold(n: int, levels: dict[int, int]) -> tuple[list[Any], int]:
    """The rows shown of ``n`` (positions, and {"gap": n} folds for the rest) and how
    many are hidden; ``levels``: the positions that are not PLAIN. All of them up to
    MAX_ROWS, else every ANOMALY row (an anomaly's offset, a lost value, a ghost)
    with CONTEXT rows around it, then -- up to MAX_ROWS more -- the first rows
    (CONTEXT of them when there is an anomaly to show, else EDGE), the last EDGE,
    and CONTEXT rows around each MARKED one, lowest first."""
    if n <= MAX_ROWS:
        return list(range(n)), 0
    keep: set[int] = set()
    for i, level in levels.items():
        if level == ANOMALY:
            keep.update(range(max(i - CONTEXT, 0), min(i + CONTEXT + 1, n)))
    head = CONTEXT if keep else EDGE
    extra = [*range(head), *range(n - EDGE, n),
             *sorted(i for i, lv in levels.items() if lv == MARKED)]
    added = 0  # rows kept beyond the anomalies' (a row not yet kept is not one of them)
    for i in extra:  # in this order: the head, the tail, the marked rows
        if added >= MAX_ROWS:
            break
        near = range(max(i - CONTEXT, 0), min(i + CONTEXT + 1, n)) \
            if levels.get(i) == MARKED else (i,)
        for x in near:
            if x not in keep:
                keep.add(x)
                added += 1
    out: list[Any] = []
    last = -1
    for i in sorted(keep):
        if i > last + 1:
            out.append({"gap": i - last - 1})
        out.append(i)
        last = i
    if last < n - 1:
        out.append({"gap": n - 1 - last})
    return out, n - len(keep)
