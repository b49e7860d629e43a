"""Informational figures per run (never violations by themselves)."""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checker.kinds import FINAL_PROCESS, NEMESIS_PROCESS
from checker.scope import Scope
from checker.sends import SendOps, completions, n_done, odd_pairs, plain_latency


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


def isr_changes(events: DataFrame | None) -> DataFrame | None:
    """run → counts of ISR shrinks and expands and leader elections (events.jsonl)."""
    if events is None:
        return None
    t = F.col("type")
    return events.groupBy("run").agg(
        F.count_if(t == "isr-shrink").alias("isr_shrinks"),
        F.count_if(t == "isr-expand").alias("isr_expands"),
        F.count_if(t == "leader-elected").alias("leader_elections"),
        F.count_if(t == "truncate").alias("truncations"),
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


def _latency(ns: Column, name: str) -> list[Column]:
    ms = ns / 1e6
    return [
        F.percentile_approx(ms, [0.5, 0.95, 0.99]).alias(f"{name}_latency_ms_p50_p95_p99"),
        F.max(ms).alias(f"{name}_latency_ms_max"),
    ]


def send_figures(sends: SendOps, odd: DataFrame | None) -> DataFrame:
    """run -> send counts, send lines, first and last time and send latency, in
    one aggregation over checker.sends' pairs (``odd``: its odd_pairs)."""
    rows = sends.by_value.select(
        "run", "n_invoke", "n_ok", "n_fail", "n_info", "t_lo", "t_hi",
        plain_latency().alias("ns"),
    )
    if odd is not None:
        zero = F.lit(0).cast("long")
        rows = rows.unionByName(odd.select(
            "run", *[zero.alias(c) for c in ("n_invoke", "n_ok", "n_fail", "n_info")],
            F.lit(None).cast("long").alias("t_lo"), F.lit(None).cast("long").alias("t_hi"),
            F.col("latency_ns").alias("ns"),
        ))
    return rows.groupBy("run").agg(
        F.sum("n_invoke").alias("sends"),
        F.sum("n_ok").alias("sends_ok"),
        F.sum("n_fail").alias("sends_fail"),
        F.sum("n_info").alias("sends_info"),
        F.sum(F.col("n_invoke") + n_done()).alias("lines"),
        F.min("t_lo").alias("t0"),
        F.max("t_hi").alias("t1"),
        *_latency(F.col("ns"), "send"),
    )


def other_figures(sparse: DataFrame) -> DataFrame:
    """run -> counts, lines, first and last time and poll latency of every line
    but the sends (checker.sparse holds all of them). Each process has one op in
    flight (Jepsen's model), so a poll's completion follows its invoke among
    that process's polls."""
    f, t, p = F.col("f"), F.col("type"), F.col("process")
    rows = sparse.filter(f != "send")
    w = Window.partitionBy("run", "process").orderBy("index")
    polls = rows.filter(f == "poll").select(
        "run",
        F.when((t != "invoke") & (F.lag("type").over(w) == "invoke"),
               F.col("time") - F.lag("time").over(w)).alias("ns"),
    )
    counts = rows.groupBy("run").agg(
        F.count("*").alias("lines"),
        F.count_if((f == "poll") & (t == "ok") & (p != FINAL_PROCESS)).alias("polls_ok"),
        F.count_if((p == NEMESIS_PROCESS) & (t != "invoke")).alias("nemesis_ops"),
        F.count_if((p == FINAL_PROCESS) & (t == "ok")).alias("final_reads"),
        F.min("time").alias("t0"),
        F.max("time").alias("t1"),
    )
    return counts.join(polls.groupBy("run").agg(*_latency(F.col("ns"), "poll")), "run", "left")


def op_figures(sends: SendOps, odd: DataFrame | None, sparse: DataFrame
               ) -> dict[str, dict[str, Any]]:
    """run -> op counts, duration and latency quantiles (ms) of sends and polls."""
    out: dict[str, dict[str, Any]] = {}
    zero = {"sends": 0, "sends_ok": 0, "sends_fail": 0, "sends_info": 0, "polls_ok": 0,
            "nemesis_ops": 0, "final_reads": 0}
    none = {f"{op}_latency_ms_{q}": None for op in ("send", "poll") for q in ("p50_p95_p99", "max")}
    for r in [*send_figures(sends, odd).collect(), *other_figures(sparse).collect()]:
        d = r.asDict(recursive=True)
        fig = out.setdefault(d.pop("run"), {"ops": 0, **zero, **none, "t": []})
        fig["ops"] += d.pop("lines")
        fig["t"] += [t for t in (d.pop("t0"), d.pop("t1")) if t is not None]
        for k, v in d.items():
            fig[k] = [round(x, 3) for x in v] if isinstance(v, list) else (
                round(v, 3) if isinstance(v, float) else v)
    for fig in out.values():
        t = fig.pop("t")
        fig["duration_ns"] = max(t) - min(t) if t else None
    return out


def window_sends(spark, done: DataFrame, windows: dict[str, list]) -> DataFrame:
    """(run, n) -> sends completed in fault window n and how many were ok
    (``done``: checker.sends.completions). Window n runs from the n-th completed
    nemesis op to the next; windows are few, so each send meets its run's
    windows in a broadcast join."""
    bounds = []
    for run, fs in windows.items():
        starts = [(None, None)] + [(tm, ix) for tm, ix, _ in fs]
        for n, (tm, ix) in enumerate(starts):
            nxt = starts[n + 1] if n + 1 < len(starts) else (None, None)
            bounds.append((run, n, tm, ix, nxt[0], nxt[1]))
    table = spark.createDataFrame(
        bounds, "run string, n int, t0 long, i0 long, t1 long, i1 long"
    )
    at = F.struct("time", "index")
    after_start = F.col("t0").isNull() | (at > F.struct(F.col("t0"), F.col("i0")))
    before_end = F.col("t1").isNull() | (at < F.struct(F.col("t1"), F.col("i1")))
    t = F.col("type")
    phased = done.select("run", "time", "index", "type").join(
        F.broadcast(table), "run", "left"
    ).filter(F.col("n").isNull() | (after_start & before_end))
    return phased.groupBy("run", F.coalesce("n", F.lit(0)).alias("n")).agg(
        F.count("*").alias("sends"), F.count_if(t == "ok").alias("ok")
    )


def availability(windows: list[tuple[int, int, str]], counts: dict[int, tuple[int, int]]
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


def run_figures(
    spark, history: DataFrame, sparse: DataFrame, sends: SendOps, events: DataFrame | None,
    scope: Scope,
) -> dict[str, dict[str, Any]]:
    """Collect the per-run figures."""
    windows = faults(sparse)
    odd = odd_pairs(spark, history, sends)
    figs = op_figures(sends, odd, sparse)
    counts: dict[str, dict[int, tuple[int, int]]] = {}
    for r in window_sends(spark, completions(sends, odd), windows).collect():
        counts.setdefault(r.run, {})[r.n] = (r.sends, r.ok)
    for run, fig in figs.items():
        fig["unseen_acked"] = 0
        fig["availability"] = availability(windows.get(run, []), counts.get(run, {}))
    for r in unseen_acked(scope).collect():
        if r.run in figs:
            figs[r.run]["unseen_acked"] = r.unseen_acked
    isr = isr_changes(events)
    if isr is not None:
        for r in isr.collect():
            if r.run in figs:
                figs[r.run].update({k: v for k, v in r.asDict().items() if k != "run"})
    return figs
