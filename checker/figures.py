"""Informational figures per run (never violations by themselves)."""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checker.latency import Histogram, bucket
from checker.scope import Scope
from checker.sends import RunSends, SendOps
from contract import FINAL_PROCESS, NEMESIS_PROCESS


def unseen_acked(scope: Scope) -> DataFrame:
    """run → acked values no consumer poll (other than the final read) returned:
    counted record by record within the scope, plus the scope's count for the
    rest (checker.scope)."""
    key = ["run", "topic", "partition", "value"]
    acked = scope.sends.filter(F.col("type") == "ok").select(*key)
    seen = scope.reads.select(*key)
    exact = acked.join(seen, key, "left_anti").groupBy("run").agg(F.count("*").alias("n"))
    if scope.unseen_outside is None:
        return exact.withColumnRenamed("n", "unseen_acked")
    return exact.join(scope.unseen_outside, "run", "full").select(
        "run",
        (F.coalesce("n", F.lit(0)) + F.coalesce("unseen_outside", F.lit(0))).alias(
            "unseen_acked"
        ),
    )


_NODE_PUNCT = re.compile(r'[\[\]" ]')


def _fault_label(f: str, nodes: str | None) -> str:
    """How a fault window is named: the nemesis op and its nodes (a JSON list)."""
    if f in ("partition", "heal") or nodes is None:
        return f
    return f"{f} {_NODE_PUNCT.sub('', nodes)}"


def faults(sparse: DataFrame) -> dict[str, list[tuple[int, int, str]]]:
    """run -> its completed nemesis ops as (time, index, label), in order: the
    fault windows, as Jepsen's perf plots shade them."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    rows = sparse.filter(
        (F.col("process") == NEMESIS_PROCESS) & (F.col("type") != "invoke")
    ).select("run", "time", "index", "f", "nodes").collect()
    for r in rows:
        out.setdefault(r.run, []).append((r.time, r["index"], _fault_label(r.f, r.nodes)))
    for v in out.values():
        v.sort(key=lambda x: (x[0], x[1]))
    return out


def other_figures(sparse: DataFrame) -> dict[str, dict[str, Any]]:
    """run -> counts, lines, first and last time (``t``) and poll latency
    (``latency``: a checker.latency.Histogram) of every line but the sends
    (checker.sparse holds all of them). Each process has one op in flight
    (Jepsen's model), so a poll's completion follows its invoke among that
    process's polls."""
    f, t, p = F.col("f"), F.col("type"), F.col("process")
    # Only the columns figured: sparse rows may carry a poll's records, which the
    # window would otherwise sort along.
    rows = sparse.filter(f != "send").select("run", "process", "f", "type", "index", "time")
    w = Window.partitionBy("run", "process", "f").orderBy("index")
    ns = F.when((f == "poll") & (t != "invoke") & (F.lag("type").over(w) == "invoke"),
                F.col("time") - F.lag("time").over(w))
    out: dict[str, dict[str, Any]] = {}
    for r in rows.select("*", ns.alias("ns")).groupBy("run", bucket(F.col("ns")).alias("b")).agg(
        F.count("*").alias("lines"),
        F.count_if((f == "poll") & (t == "ok") & (p != FINAL_PROCESS)).alias("polls_ok"),
        F.count_if((p == NEMESIS_PROCESS) & (t != "invoke")).alias("nemesis_ops"),
        F.count_if((p == FINAL_PROCESS) & (t == "ok")).alias("final_reads"),
        F.min("time").alias("t0"),
        F.max("time").alias("t1"),
        F.count("ns").alias("timed"),
        F.max("ns").alias("ns_max"),
    ).collect():
        fig = out.setdefault(r.run, _no_others())
        for k in _OTHER_COUNTS:
            fig[k] += r[k]
        fig["t"] += [r.t0, r.t1]
        if r.timed:
            fig["latency"].add(r.b, r.timed, r.ns_max)
    return out


_OTHER_COUNTS = ("lines", "polls_ok", "nemesis_ops", "final_reads")


def _no_others() -> dict[str, Any]:
    return {**dict.fromkeys(_OTHER_COUNTS, 0), "t": [], "latency": Histogram()}


def op_figures(sends: SendOps, sparse: DataFrame) -> dict[str, dict[str, Any]]:
    """run -> op counts, duration and latency quantiles (ms) of sends and polls."""
    out: dict[str, dict[str, Any]] = {}
    others = other_figures(sparse)
    for run in sends.runs.keys() | others.keys():
        s = sends.runs.get(run, RunSends())
        o = others.get(run) or _no_others()
        t = [x for x in (s.t0, s.t1, *o.pop("t")) if x is not None]
        out[run] = {
            "ops": s.lines + o.pop("lines"),
            "sends": s.sends,
            "sends_ok": s.sends_ok,
            "sends_fail": s.sends_fail,
            "sends_info": s.sends_info,
            **{k: o[k] for k in _OTHER_COUNTS[1:]},
            **s.latency.figures("send"),
            **o["latency"].figures("poll"),
            "duration_ns": max(t) - min(t) if t else None,
        }
    return out


def availability(windows: list[tuple[int, int, str]], counts: dict[int, list[int]]
                 ) -> list[dict[str, Any]]:
    """Availability per fault window: window 0 is "no fault yet" (listed when sends
    completed in it), window n starts at the n-th completed nemesis op; each with
    the sends that completed in it and how many were ok."""
    ns = sorted(set(range(1, len(windows) + 1)) | set(counts))
    out = []
    for i, n in enumerate(ns):
        start = windows[n - 1][0] if n >= 1 else None
        end = windows[ns[i + 1] - 1][0] if i + 1 < len(ns) else None
        sends, ok = counts.get(n, (0, 0))
        out.append({
            "n": n,
            "phase": windows[n - 1][2] if n >= 1 else "no fault",
            "start_s": round((start or 0) / 1e9, 3),
            "end_s": round(end / 1e9, 3) if end is not None else None,
            "sends": sends,
            "ok": ok,
        })
    return out


def run_figures(sparse: DataFrame, windows: dict[str, list[tuple[int, int, str]]],
                sends: SendOps, events: dict[str, dict[str, int]] | None, scope: Scope
                ) -> dict[str, dict[str, Any]]:
    """Collect the per-run figures. ``windows``: faults(sparse); ``sends``:
    checker.sends, tallied over those windows; ``events``: each run's event
    figures (checker.load.load_events)."""
    figs = op_figures(sends, sparse)
    for run, fig in figs.items():
        fig["unseen_acked"] = 0
        counts = sends.runs[run].windows if run in sends.runs else {}
        fig["availability"] = availability(windows.get(run, []), counts)
    for r in unseen_acked(scope).collect():
        if r.run in figs:
            figs[r.run]["unseen_acked"] = r.unseen_acked
    for run, counts in (events or {}).items():
        if run in figs:
            figs[run].update(counts)
    return figs
