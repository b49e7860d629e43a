"""The client operations as the report's charts draw them, reduced to what they
draw: per time bin for a long run, every operation for a short one.

The checker computes this in Spark from the history it has parsed
(checker/reportinputs.py) and writes it into check/report-inputs.json; `of_history`
computes the same from history.jsonl in Python, for a run checked before the
checker wrote it (tests/test_report_inputs.py requires both to be equal). The
bins depend on the chart's right edge, `t1`: the last completion or event of the
run, plus 2%.

An operation is an invoke and its completion: a send's by its value (a producer
has several in flight), anything else's the process's next line; the nemesis is
no client. Its latency is in milliseconds, at least 1 µs (the
latency chart is logarithmic).
"""

from __future__ import annotations

from typing import Any

from contract import NEMESIS_PROCESS

MAX_TIMELINE_OPS = 1000  # more: each client lane in LANE_BINS bins
LANE_BINS = 400
MAX_POINTS = 1000  # more: the latency chart's envelope and a sample of the failures
LATENCY_BINS = 300
THROUGHPUT_BINS = 60
WORST = ("fail", "info", "ok")  # a lane bin's colour: its worst outcome
TYPES = ("ok", "fail", "info")  # the throughput chart's series, in this order
MARGIN = 1.02  # the chart's right edge past the last time


def edge(end: float) -> float:
    """The charts' right edge (seconds) for a run whose last time is `end`."""
    return end * MARGIN


def rank(typ: Any) -> int:
    """An outcome's place in WORST (an unknown outcome counts as info)."""
    return WORST.index(typ) if typ in WORST else 1


def latency_ms(start: float, end: float) -> float:
    return max((end - start) * 1e3, 1e-3)


def throughput_width(t1: float) -> float:
    return max(t1 / THROUGHPUT_BINS, 0.05)


def sample_positions(count: int, n: int) -> list[int]:
    """Which of `count` items an even sample of at most n keeps (the first and the
    last), by position."""
    if count <= n:
        return list(range(count))
    return [round(i * (count - 1) / (n - 1)) for i in range(n)]


def ops_of(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Completed client ops with start/end seconds, in completion order.

    A producer keeps several sends in flight per process, so a send pairs by its
    value (topic, partition, value) as checker.sends pairs it: a plain value's
    invoke and its one completion (SendOps.plain_pairs). The rest -- polls, and
    the sends of a value that is not plain -- pair the Jepsen way among
    themselves: a completion with its process's previous line, if an invoke."""
    lines: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for o in history:
        if o.get("f") == "send":
            lines.setdefault(_value_key(o), []).append(o)
    plain = {k: _plain_pair(ls) for k, ls in lines.items()}
    pending: dict[Any, dict[str, Any]] = {}
    out = []
    for o in history:
        p = o.get("process")
        if o.get("f") == "send":
            pair = plain[_value_key(o)]
            if pair is not None:
                if pair and o is pair["line"]:
                    _add(out, pair["process"], pair["start"], pair["end"], pair["type"], pair)
                continue
        elif p == NEMESIS_PROCESS:
            continue
        if o.get("type") == "invoke":
            pending[p] = o
        else:
            inv = pending.pop(p, None)
            if inv is not None:
                _add(out, str(p), inv.get("time"), o.get("time"), o.get("type"), o)
    return out


_DONE = ("ok", "fail", "info")


def _value_key(o: dict[str, Any]) -> tuple[Any, ...]:
    v = o.get("value")  # a string, as Spark's history schema reads it
    return (o.get("topic"), o.get("partition"), None if v is None else str(v))


def _long(p: Any) -> int | None:
    """A process as Spark casts it to a long (None: not a number)."""
    if isinstance(p, int) and not isinstance(p, bool):
        return p
    if isinstance(p, str) and p.strip().lstrip("+-").isdigit():
        return int(p)
    return None


def _plain_pair(ls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A send value's lines as checker.sends judges them: None when the value is
    odd (not one invoke, first, then at most one completion, by one process); {}
    when plain but not completed; else its pair and its last line."""
    invokes = [o for o in ls if o.get("type") == "invoke"]
    dones = [o for o in ls if o.get("type") in _DONE]
    procs = {_long(o.get("process")) for o in ls}
    first = min(ls, key=_index)
    if len(invokes) != 1 or len(dones) > 1 or first is not invokes[0] or None in procs \
            or len(procs) > 1:
        return None
    if not dones:
        return {}
    rest = [o for o in ls if o.get("type") != "invoke"]
    times = [o.get("time") for o in rest if _number(o.get("time"))]
    return {"line": max(ls, key=_index), "process": min(str(o.get("process")) for o in ls),
            "type": dones[0].get("type"), "start": invokes[0].get("time"),
            "end": max(times, default=None), "f": "send", "value": dones[0].get("value"),
            "offset": max((o["offset"] for o in rest if o.get("offset") is not None),
                          default=None),
            "index": max((o["index"] for o in ls if _number(o.get("index"))), default=None)}


def _index(o: dict[str, Any]) -> float:
    i = o.get("index")
    return i if _number(i) else float("inf")


def _add(out: list[dict[str, Any]], process: str, start: Any, end: Any, typ: Any,
         o: dict[str, Any]) -> None:
    if _number(start) and _number(end):
        out.append({"process": process, "f": o.get("f"), "type": typ, "start": start / 1e9,
                    "end": end / 1e9, "value": o.get("value"), "offset": o.get("offset"),
                    "index": o.get("index")})


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)  # JSON's true is no time


def reduce(ops: list[dict[str, Any]], end: float) -> dict[str, Any]:
    """The charts' inputs from the ops (in completion order) of a run whose last
    completion or event is at `end` seconds."""
    t1 = edge(end)
    out: dict[str, Any] = {"end": end, "count": len(ops),
                           "not_ok": sum(1 for o in ops if o["type"] != "ok"),
                           "processes": sorted({o["process"] for o in ops})}
    lats = [latency_ms(o["start"], o["end"]) for o in ops]
    out["latency_min"] = min(lats, default=None)
    out["latency_max"] = max(lats, default=None)
    out["listed"] = ops if len(ops) <= max(MAX_TIMELINE_OPS, MAX_POINTS) else []
    out["lanes"] = lanes(ops, t1)
    # latency: the ok ops' lowest, median and highest per bin of completion time
    width = t1 / LATENCY_BINS
    per: dict[int, list[float]] = {}
    for o in ops:
        if o["type"] == "ok":
            per.setdefault(int(o["end"] / width), []).append(latency_ms(o["start"], o["end"]))
    env = []
    for b in sorted(per):
        ls = sorted(per[b])
        env.append([b, ls[0], ls[len(ls) // 2], ls[-1]])
    out["latency"] = env
    others = [o for o in ops if o["type"] != "ok"]
    out["failed"] = [{k: others[i][k] for k in ("f", "type", "start", "end")}
                     for i in sample_positions(len(others), MAX_POINTS // 2)]
    # throughput: completions per bin and outcome
    width = throughput_width(t1)
    nbins = int(t1 / width) + 1
    counts = {typ: [0] * nbins for typ in TYPES}
    for o in ops:
        if o["type"] in counts:
            counts[o["type"]][min(int(o["end"] / width), nbins - 1)] += 1
    out["throughput"] = {typ: c for typ, c in counts.items() if any(c)}
    return out


def lanes(ops: list[dict[str, Any]], t1: float, n: int = LANE_BINS) -> dict[str, list[Any]]:
    """Per process (in the order of their first completion), per bin in flight:
    [bin, the index in WORST of the worst outcome in flight, [[type, completions
    in the bin], ...] in the order of their first completion]."""
    width = t1 / n
    worst: dict[str, dict[int, int]] = {}
    done: dict[str, dict[int, dict[str, int]]] = {}
    for o in ops:
        b0 = min(int(o["start"] / width), n - 1)
        b1 = min(int(o["end"] / width), n - 1)
        bins = worst.setdefault(o["process"], {})
        for b in range(b0, b1 + 1):
            bins[b] = min(bins.get(b, len(WORST)), rank(o["type"]))
        ends = done.setdefault(o["process"], {}).setdefault(b1, {})
        ends[o["type"]] = ends.get(o["type"], 0) + 1
    return {p: [[b, r, list(map(list, done[p].get(b, {}).items()))]
                for b, r in sorted(bins.items())] for p, bins in worst.items()}
