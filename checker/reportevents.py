"""The report's inputs from a run's events.jsonl and trace.jsonl, computed by the
check so that rendering a report reads neither (check/report-inputs.json, keys
"events", "progress" and "trace"; docs/run-directory.md):

- events: the events the report shows (reports.story.facts indexes them as
  ev-<line index>), each as [line index, event]. A run with more than
  MAX_EVENTS events -- nearly all of a chaos run's are HW moves -- leaves out the
  ROUTINE ones, which its timeline table would leave out too, except the first of
  each broker and type, the last one (the run's last time), and each replica's
  first HW move after each of its broker's starts (whether its HW moved since its
  start is all the story asks of them);
  "left_out" counts those left out.
- progress: each replica's HW and LEO columns (checker.progress) for the
  partitions the report charts (an election or a truncation: the first
  MAX_PROGRESS).
- trace: a sim run's trace table (checker.tracetable) for the workload's
  partition: its first MAX_TRACE_ROWS rows and how many there are.

Both files are streamed in the driver, once each: only what the report keeps is
held. The history's part -- the acknowledged sends of the charted partitions,
the trace partition's produce answers and the nemesis ops -- comes from the
check's parsed history. A run over BIG_HISTORY_BYTES has its acks folded into
the progress columns inside Spark (as checker.reportgrid does its grid), and its
trace table's ops counted and chosen there: only what the report keeps reaches
the driver.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker import clientops, progress, tracetable
from checker.reportgrid import BIG_RUN_BYTES
from contract import EVENTS, NEMESIS_PROCESS, TRACE

MAX_EVENTS = 2000  # reports.render's timeline: more events than this leave ROUTINE ones out
ROUTINE = ("hw-advance", "hw-checkpoint")  # reports.render.ROUTINE
MAX_PROGRESS = 4  # reports.charts.MAX_PROGRESS
MAX_TRACE_ROWS = 300  # reports.render.MAX_TRACE_ROWS
# A run with more history than this has its trace table's ops selected in Spark
# (counted, then the first ones) and its progress acks folded there; smaller
# runs' are collected whole. One bound with the grid's (checker.reportgrid).
BIG_HISTORY_BYTES = BIG_RUN_BYTES


@dataclass
class RunFiles:
    """What the check knows of one run besides its parsed history."""

    path: Path
    meta: dict[str, Any]
    end: float  # the charts' last time (checker.clientops' "end")
    history_bytes: int = 0


def numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(index among the non-blank lines, line) of a JSON-lines file: the index
    contract.rundir.read_jsonl's list gives the line."""
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed below
    except OSError:
        return
    with f:
        i = 0
        for line in f:
            if line.strip():
                yield i, line
                i += 1


def _time_ns(t: Any) -> int:
    """reports.story.facts.time_ns: a time to sort by, 0 when there is none."""
    return int(t) if isinstance(t, int | float) and not isinstance(t, bool) else 0


class _Prefix:
    """The steps of one source of the trace table up to the time of its n-th row
    (the bound only falls as steps come: those after it are dropped)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.heap: list[int] = []  # the n earliest row times, negated
        self.kept: list[tuple[int, int, Any]] = []  # (order, time, step)
        self.rows = 0

    @property
    def bound(self) -> float:
        return -self.heap[0] if len(self.heap) >= self.n else math.inf

    def add(self, order: int, t: int, step: Any, row: bool) -> None:
        if row:
            self.rows += 1
            if len(self.heap) < self.n:
                heapq.heappush(self.heap, -t)
            elif t < -self.heap[0]:
                heapq.heapreplace(self.heap, -t)
        if t <= self.bound:
            self.kept.append((order, t, step))
            if len(self.kept) > 4 * self.n:
                b = self.bound
                self.kept = [k for k in self.kept if k[1] <= b]

    def upto(self, t_cut: float) -> list[Any]:
        return [s for _, t, s in sorted(self.kept, key=lambda k: k[0]) if t <= t_cut]


@dataclass
class _Trace:
    moves: progress.Progress = field(default_factory=dict)
    part: tuple[Any, Any] | None = None  # the table's (topic, partition)
    rounds: _Prefix | None = None
    epoch_rounds: set[tuple[int, Any]] = field(default_factory=set)


def _scan_trace(path: Path, topic: Any, partition: Any) -> _Trace | None:
    """trace.jsonl once: the replicas' moves, and the table's rounds (the
    workload's partition, else the first round's when it has none)."""
    if not (path / TRACE).is_file():
        return None
    first: tuple[Any, Any] | None = None
    by_part: dict[tuple[Any, Any], _Prefix] = {}
    epochs: dict[tuple[Any, Any], set[tuple[int, Any]]] = {}

    def parsed() -> Iterator[Any]:
        nonlocal first
        for i, line in numbered_lines(path / TRACE):
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a torn last line
            if isinstance(r, dict):
                key = (r.get("topic"), r.get("partition"))
                first = key if first is None else first
                if key in ((topic, partition), first):
                    t = r["time"] if isinstance(r.get("time"), int) else 0
                    by_part.setdefault(key, _Prefix(MAX_TRACE_ROWS)).add(i, t, r, True)
                    if r.get("request") == "offsets-for-leader-epoch":
                        epochs.setdefault(key, set()).add((t, r.get("follower")))
            yield r

    out = _Trace(progress.trace_moves(parsed()))
    key = (topic, partition) if (topic, partition) in by_part else first
    out.part = key if key is not None else (topic, partition)
    out.rounds = by_part.get(out.part, _Prefix(MAX_TRACE_ROWS))
    out.epoch_rounds = epochs.get(out.part, set())
    return out


@dataclass
class _Events:
    kept: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    routine: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    count: int = 0
    routine_count: int = 0
    first_routine: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    last_routine: tuple[int, int] | None = None  # the run's last time may be its
    hw: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)
    starts: dict[str, list[int]] = field(default_factory=dict)
    charted: set[str] = field(default_factory=set)
    obs: dict[str, list[progress.Obs]] = field(default_factory=dict)
    table: _Prefix | None = None
    shown: int = 0  # the trace table's rows of events


def _scan_events(path: Path, trace: _Trace | None) -> _Events:
    out = _Events()
    if trace is not None:
        out.table = _Prefix(MAX_TRACE_ROWS)
    for i, line in numbered_lines(path / EVENTS):
        try:
            e = json.loads(line)
        except ValueError:
            continue  # a torn last line (the check set aside runs with others)
        if not isinstance(e, dict):
            continue
        out.count += 1
        typ, node, t = str(e.get("type")), str(e.get("node")), _time_ns(e.get("time"))
        part = f"{e['topic']}/{e['partition']}" if "topic" in e and "partition" in e else None
        if typ in ROUTINE:
            out.routine_count += 1
            first = out.first_routine.get((node, typ))
            if first is None or (t, i) < first:
                out.first_routine[(node, typ)] = (t, i)
            if out.last_routine is None or t > out.last_routine[0]:
                out.last_routine = (t, i)
            if typ == "hw-advance" and part is not None:
                out.hw.setdefault((part, node), []).append((t, i))
            if out.count <= MAX_EVENTS:  # all are shown while there are few
                out.routine.append((i, e))
        else:
            out.kept.append((i, e))
        if typ == "started":
            out.starts.setdefault(node, []).append(t)
        elif typ in ("leader-elected", "truncate") and part is not None:
            out.charted.add(part)
        for p, o in progress.event_obs(i, e):
            out.obs.setdefault(p, []).append(o)
        if trace is not None and out.table is not None and trace.part is not None:
            tp, pp = trace.part
            if tracetable.steps_of(e, tp, pp):
                shown = tracetable.shows(e, tp, pp, trace.epoch_rounds)
                out.shown += shown
                out.table.add(i, e["time"] if isinstance(e.get("time"), int) else 0, e, shown)
    return out


def _kept_events(path: Path, ev: _Events) -> dict[str, Any]:
    """The "events" input: every event when there are at most MAX_EVENTS, else all
    but the ROUTINE ones the report needs not (the module docstring)."""
    if ev.count <= MAX_EVENTS:
        return {"kept": sorted(ev.kept + ev.routine), "left_out": 0}
    wanted = {i for _, i in ev.first_routine.values()}
    if ev.last_routine is not None:
        wanted.add(ev.last_routine[1])
    for (_, node), moves in ev.hw.items():
        moves.sort()
        for s in ev.starts.get(node, []):
            after = next((m for m in moves if m[0] >= s), None)  # the first at or after it
            if after is not None:
                wanted.add(after[1])
        if moves:
            wanted.add(moves[0][1])
    extra = []
    for i, line in numbered_lines(path / EVENTS):
        if i in wanted:
            extra.append((i, json.loads(line)))
    return {"kept": sorted(ev.kept + extra), "left_out": ev.routine_count - len(extra)}


def _local_obs(ev: _Events, trace: _Trace | None, part: str) -> list[progress.Obs]:
    """A partition's observations the driver holds: its events' and its trace's."""
    return list(ev.obs.get(part, [])) + progress.traced_obs(trace.moves if trace else {}, part)


def _columns(obs: list[progress.Obs], t1: float) -> dict[str, list[progress.Column]]:
    return {node: progress.columns(st, t1) for node, st in progress.fold(obs).items()}


def _progress(ev: _Events, trace: _Trace | None, acks: list[Any], end: float,
              done: dict[str, Any] | None = None) -> dict[str, Any]:
    """The "progress" input: per charted partition, each replica's columns
    (``done``: those computed in Spark already, by partition)."""
    t1 = clientops.edge(end)
    parts: dict[str, Any] = {}
    for part in sorted(ev.charted)[:MAX_PROGRESS]:
        if done is not None and part in done:
            parts[part] = done[part]
            continue
        obs = _local_obs(ev, trace, part)
        obs += [progress.ack_obs(a["index"], a.time, a.node, a.offset) for a in acks
                if f"{a.topic}/{a.partition}" == part]
        parts[part] = _columns(obs, t1)
    return {"parts": parts, "traced": bool(trace and trace.moves)}


_PROGRESS = "run string, part string, cols string"


def _acks(history: DataFrame, charted: list[tuple[str, str]]) -> DataFrame:
    """The acknowledged sends of ``charted`` (run URI, partition key) pairs."""
    ok = ((F.col("f") == "send") & (F.col("type") == "ok") & F.col("offset").isNotNull()
          & F.col("time").isNotNull() & F.col("node").isNotNull())
    key = F.concat_ws("/", "run", "topic", F.col("partition").cast("string"))
    return history.filter(ok & key.isin([f"{u}/{p}" for u, p in charted])).select(
        "run", "index", "time", "node", "offset", "topic", "partition")


def _progress_in_spark(history: DataFrame, charted: list[tuple[str, str]],
                       local: dict[tuple[str, str], list[progress.Obs]],
                       t1: dict[str, float]) -> dict[str, dict[str, Any]]:
    """run -> partition -> its columns, folded in Spark one (run, partition) per
    group (checker.reportgrid's way), so that a big run's acks -- millions in a
    long chaos run -- stay in the executors and only the columns come back.
    ``local``: each pair's observations the driver holds, shipped with the
    function. A pair with no acks has no group: the caller folds it."""

    def one(key: tuple[Any, ...], pdf: pd.DataFrame) -> pd.DataFrame:
        u, topic, partition = key
        part = f"{topic}/{partition}"
        obs = list(local.get((u, part), []))
        obs += [progress.ack_obs(int(i), int(t), n, int(o)) for i, t, n, o in zip(
            pdf["index"].tolist(), pdf["time"].tolist(), pdf["node"].tolist(),
            pdf["offset"].tolist(), strict=True)]
        cols = json.dumps(_columns(obs, t1[u]), separators=(",", ":"))
        return pd.DataFrame({"run": [u], "part": [part], "cols": [cols]})

    out: dict[str, dict[str, Any]] = {}
    for r in _acks(history, charted).groupBy("run", "topic", "partition").applyInPandas(
            one, _PROGRESS).collect():
        out.setdefault(r.run, {})[r.part] = json.loads(r.cols)
    return out


_OP_COLS = ("index", "time", "process", "type", "f", "topic", "partition", "value", "nodes",
            "offset", "acks", "error", "node")


def _table_ops(history: DataFrame) -> DataFrame:
    """The history lines the trace table shows, of every run: completions of
    sends and nemesis ops (reports.trace.rows' choice; the partition is the caller's)."""
    t, f = F.col("type"), F.col("f")
    not_invoke = ~F.coalesce(t == "invoke", F.lit(False))
    nemesis = (F.col("process") == NEMESIS_PROCESS) & ~F.coalesce(f == "final-read", F.lit(False))
    return history.filter(not_invoke & (nemesis | (f == "send"))).select("run", *_OP_COLS)


def _op(r: Any) -> dict[str, Any]:
    """A history line as reports.trace.rows reads it."""
    o = {k: r[k] for k in _OP_COLS if k not in ("nodes", "index")}
    if r["process"] == NEMESIS_PROCESS:
        raw = r["nodes"]
        try:
            o["value"] = json.loads(raw) if raw is not None else None
        except ValueError:
            o["value"] = raw
    return o


def _part_key() -> Any:
    """A history line's (run, topic, partition) as one string (null if any is null)."""
    return F.concat(F.col("run"), F.lit("\0"), F.col("topic"), F.lit("\0"),
                    F.col("partition").cast("string"))


def _part_value(run: str, topic: Any, partition: Any) -> str:
    """_part_key's value for a run's partition."""
    return f"{run}\0{topic}\0{partition}"


def _run_part(run: str, topic: Any, partition: Any) -> Any:
    return (F.col("run") == run) & (F.col("topic") == topic) & (F.col("partition") == partition)


def _scan(rd: Any) -> tuple[_Trace | None, _Events]:
    wl = rd.meta.get("workload") or {}
    tr = _scan_trace(rd.path, wl.get("topic"), wl.get("partition"))
    return tr, _scan_events(rd.path, tr)


def scan_files(runs: dict[str, Any]) -> Future[dict[str, tuple[_Trace | None, _Events]]]:
    """Each run's (checker.rundir.RunDir by key) events.jsonl and trace.jsonl,
    read in a thread of their own: they need nothing from the Spark job, whose
    driver thread mostly waits on the JVM meanwhile."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="isrlab-report-events")
    scans = pool.submit(lambda: {k: _scan(rd) for k, rd in runs.items()})
    pool.shutdown(wait=False)
    return scans


def event_inputs(history: DataFrame, runs: dict[str, RunFiles],
                 scans: dict[str, tuple[_Trace | None, _Events]]) -> dict[str, dict[str, Any]]:
    """run (URI) -> {"events", "progress", "trace"} (the module docstring), from
    ``scans`` (scan_files' result, by run URI)."""
    out = {u: {"events": _kept_events(rf.path, scans[u][1])} for u, rf in runs.items()}
    charted = [(u, p) for u in runs for p in sorted(scans[u][1].charted)[:MAX_PROGRESS]]
    # a big run's acks are folded in Spark (the driver's memory does not grow with
    # the history); a small one's are collected, costing no Python worker
    big = {u for u in runs if runs[u].history_bytes > BIG_HISTORY_BYTES}
    acks: dict[str, list[Any]] = {u: [] for u in runs}
    if small_charted := [c for c in charted if c[0] not in big]:
        for r in _acks(history, small_charted).collect():
            acks[r.run].append(r)
    done: dict[str, dict[str, Any]] = {}
    if big_charted := [c for c in charted if c[0] in big]:
        local = {(u, p): _local_obs(scans[u][1], scans[u][0], p) for u, p in big_charted}
        done = _progress_in_spark(history, big_charted, local,
                                  {u: clientops.edge(runs[u].end) for u in big})
    for u in runs:
        tr, ev = scans[u]
        out[u]["progress"] = _progress(ev, tr, acks[u], runs[u].end,
                                       done.get(u, {}) if u in big else None)
    traced = {u: tr for u in runs if (tr := scans[u][0]) is not None}
    small = [u for u in traced if runs[u].history_bytes <= BIG_HISTORY_BYTES]
    ops: dict[str, _Prefix] = {u: _Prefix(MAX_TRACE_ROWS) for u in traced}
    # One IN list per batch, not an OR per run: a plan's depth must not grow with the
    # number of runs (an OR chain of 1,000 runs overflowed the JVM's stack).
    rows = _table_ops(history).filter(
        _part_key().isin([_part_value(u, *traced[u].part) for u in small])
        | ((F.col("process") == NEMESIS_PROCESS) & F.col("run").isin(small))
    ).collect() if small else []
    counts: dict[str, int] = {}
    for u in traced:
        if u in small:
            continue
        sel = _table_ops(history).filter((F.col("run") == u) & (
            _run_part(u, *traced[u].part) | (F.col("process") == NEMESIS_PROCESS)))
        counts[u] = sel.count()
        first = sel.orderBy(F.coalesce("time", F.lit(0)), "index").limit(MAX_TRACE_ROWS).collect()
        # every op up to the time of the last of the first ones (ties at it included)
        rows += first if len(first) < MAX_TRACE_ROWS else sel.filter(
            F.coalesce("time", F.lit(0)) <= _time_ns(first[-1].time)).collect()
    for r in rows:
        tp, pp = traced[r.run].part
        if r.process == NEMESIS_PROCESS or (r.topic == tp and r.partition == pp):
            ops[r.run].add(r["index"], _time_ns(r.time), _op(r), True)
    for u, n in counts.items():
        ops[u].rows = n
    for u, tr in traced.items():
        out[u]["trace"] = _table(runs[u], tr, scans[u][1], ops[u])
    return out


def _table(rf: RunFiles, tr: _Trace, ev: _Events, ops: _Prefix) -> dict[str, Any]:
    """The "trace" input: reports.trace.rows over the steps up to the time by
    which one source alone has MAX_TRACE_ROWS rows (every row before the table's
    last one is such a step, and so is the state it shows)."""
    assert tr.rounds is not None and ev.table is not None and tr.part is not None
    t_cut = min(tr.rounds.bound, ev.table.bound, ops.bound)
    topic, partition = tr.part
    brokers = (rf.meta.get("cluster") or {}).get("brokers") or []
    labels = {v: lab for lab, vs in (rf.meta.get("labels") or {}).items()
              if isinstance(vs, list) for v in vs}
    rows = tracetable.rows(tr.rounds.upto(t_cut), ev.table.upto(t_cut), ops.upto(t_cut),
                           topic, partition, brokers, labels)
    return {"rows": rows[:MAX_TRACE_ROWS], "total": tr.rounds.rows + ev.shown + ops.rows,
            "part": f"{topic}/{partition}"}


def add_event_inputs(history: DataFrame, run_keys: dict[str, str], runs: dict[str, Any],
                     scans: Future[dict[str, tuple[_Trace | None, _Events]]],
                     inputs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``inputs`` (checker.reportinputs': run URI -> {"client_ops": ...}) with each
    run's event_inputs added. ``run_keys``: run URI -> its key in ``runs``
    (checker.rundir.RunDir by key); ``scans``: scan_files' of them."""
    by_key = scans.result()
    uris = [u for u in inputs if run_keys.get(u) in runs]
    files = {u: RunFiles(runs[run_keys[u]].path, runs[run_keys[u]].meta,
                         inputs[u]["client_ops"]["end"], runs[run_keys[u]].history_bytes)
             for u in uris}
    for u, more in event_inputs(history, files, {u: by_key[run_keys[u]] for u in uris}).items():
        inputs[u].update(more)
    return inputs
