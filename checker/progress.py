"""Each replica's HW and LEO over a run, as the report's replica progress charts draw
them: one definition, used by the check (checker.reportevents, written to
check/report-inputs.json) and by the report for runs checked before
(reports.charts.progress_states).

The observations: the events that report a LEO (started, became-leader/-follower,
a truncation's "to"), every HW move (hw-advance), every acknowledged send's offset
on the broker that acknowledged it, and a sim run's fetch rounds (trace.jsonl:
the exact LEO and HW after each round that moved them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

# A replica's state after one observation: (seconds, HW, LEO).
State = tuple[float, int, int]
# One column of a progress chart: (seconds, (HW low, high, last), (LEO low, high, last)).
Column = tuple[float, tuple[int, int, int], tuple[int, int, int]]
PROGRESS_COLUMNS = 300

# Watch kinds, and their order among observations of the same time: the
# events' first (an hw-advance after the others), then the acks, then the trace.
SET, TRUNCATE, HW, ACK = "set", "truncate", "hw", "ack"
EVENT, HW_EVENT, ACKED, TRACED = 0, 1, 2, 3
# (time ns, order, sequence within its source, node, kind, a, b): sorted by the
# first three, which is the report's order (its sort is stable over the events
# in (time, line) order, then the history's lines, then the trace's rows).
Obs = tuple[int, int, int, str, str, Any, Any]

# (time ns, LEO, HW), per partition key and replica
Progress = dict[str, dict[str, list[tuple[int, int, int]]]]


def fold(obs: Iterable[Obs]) -> dict[str, list[State]]:
    """node → its (t, HW, LEO) after each observation that changed them, in time
    order. LEO rises with an ack and with an HW move (a replica's HW is a minimum
    over LEOs that include its own, so it holds the records below it); a
    truncation lowers the HW with the LEO."""
    out: dict[str, list[State]] = {}
    now: dict[str, tuple[int | None, int | None]] = {}  # node → (HW, LEO)
    for t, _, _, node, kind, a, b in sorted(obs, key=lambda o: (o[0], o[1], o[2])):
        hw, leo = now.get(node, (None, None))
        if kind == SET:
            leo, hw = a, b
        elif kind == TRUNCATE:
            leo, hw = a, None if hw is None else min(hw, a)
        elif kind == HW:
            hw, leo = a, a if leo is None else max(leo, a)
        else:  # an ack: the broker that acknowledged the offset holds it
            leo = a if leo is None else max(leo, a)
        if (hw, leo) != now.get(node):
            now[node] = (hw, leo)
            if hw is not None and leo is not None:
                out.setdefault(node, []).append((t / 1e9, hw, leo))
    return out


def columns(states: list[State], t1: float, n: int = PROGRESS_COLUMNS) -> list[Column]:
    """A replica's states as drawn: each state its own column when there are at
    most 2n of them, else n columns of equal time, each with the lowest, the
    highest and the last HW and LEO in it (the value carried into a column counts
    as in it). Both lines share the columns, and a replica whose HW never exceeds
    its LEO has HW ≤ LEO in every low, high and last."""
    if len(states) <= 2 * n:
        return [(t, (h, h, h), (e, e, e)) for t, h, e in states]
    width = t1 / n
    out: list[Column] = []
    carry: tuple[int, int] | None = None
    col: list[tuple[int, int]] = []
    col_i = -1
    for t, h, e in [*states, (math.inf, 0, 0)]:
        i = int(t / width) if t != math.inf else -2
        if i != col_i and col:
            hs, es = [x[0] for x in col], [x[1] for x in col]
            out.append((col_i * width, (min(hs), max(hs), hs[-1]), (min(es), max(es), es[-1])))
            carry = col[-1]
            col = []
        col_i = i
        col += ([carry] if carry is not None and not col else []) + [(h, e)]
    return out


def event_obs(i: int, e: dict[str, Any]) -> Iterator[tuple[str, Obs]]:
    """(partition key, observation) of one event (line index ``i``) for every
    partition it says something about."""
    t, node = e.get("time"), str(e.get("node"))
    if not (isinstance(t, int | float) and not isinstance(t, bool)):
        return
    t = int(t)
    typ = e.get("type")
    if typ == "started":
        seen = set()  # a partition listed twice: its first entry
        for p in e.get("partitions") or []:
            if isinstance(p, dict) and "topic" in p and "partition" in p:
                part = f"{p['topic']}/{p['partition']}"
                leo, hw = _int(p.get("leo")), _int(p.get("hw"))
                if part not in seen and leo is not None and hw is not None:
                    yield part, (t, EVENT, i, node, SET, leo, hw)
                seen.add(part)
        return
    if node == "controller":
        return
    part_of_event = f"{e.get('topic')}/{e.get('partition')}"
    if typ in ("became-leader", "became-follower"):
        leo, hw = e.get("leo"), e.get("hw")
        if isinstance(leo, int) and isinstance(hw, int):
            yield part_of_event, (t, EVENT, i, node, SET, leo, hw)
    elif typ == "truncate" and isinstance(e.get("to"), int):
        yield part_of_event, (t, EVENT, i, node, TRUNCATE, e.get("to"), None)
    elif typ == "hw-advance" and isinstance(e.get("new"), int):
        yield part_of_event, (t, HW_EVENT, i, node, HW, e.get("new"), None)


def ack_obs(seq: int, t: int, node: str, offset: int) -> Obs:
    """An acknowledged send at ``offset`` (``seq``: its place in the history)."""
    return (t, ACKED, seq, node, ACK, offset + 1, None)


def traced_obs(progress: Progress, part: str) -> list[Obs]:
    """A partition's fetch-round moves (trace_moves) as observations."""
    return [(t, TRACED, k, node, SET, leo, hw)
            for node, rows in progress.get(part, {}).items()
            for k, (t, leo, hw) in enumerate(rows)]


def json_rows(lines: Iterable[bytes]) -> Iterator[Any]:
    """The JSON value of each line; an unreadable line (a torn last one) is left out."""
    for line in lines:
        try:
            yield json.loads(line)
        except ValueError:
            continue


def trace_moves(rows: Iterable[Any]) -> Progress:
    """Each replica's LEO and HW after every fetch round that moved them, from a sim
    run's trace.jsonl rows (json_rows). Only the moves are kept: a long run's trace
    has hundreds of thousands of rows."""
    out: Progress = {}
    last: dict[tuple[str, str], tuple[int, int]] = {}
    for row in rows:
        try:
            t, part = int(row["time"]), f"{row.get('topic')}/{row.get('partition')}"
            replicas = row.get("replicas") or {}
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        for node, r in replicas.items():
            leo, hw = (r.get("leo"), r.get("hw")) if isinstance(r, dict) else (None, None)
            if not (isinstance(leo, int) and isinstance(hw, int)):
                continue  # down: its LEO is unknown until it reports one
            if last.get((part, node)) != (leo, hw):
                last[(part, node)] = (leo, hw)
                out.setdefault(part, {}).setdefault(node, []).append((t, leo, hw))
    return out


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
