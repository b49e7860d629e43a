"""Informational figures per run (never violations by themselves)."""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checker.kinds import FINAL_PROCESS, NEMESIS_PROCESS
from checker.scope import Scope


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
        F.sum(F.when(t == "isr-shrink", 1).otherwise(0)).alias("isr_shrinks"),
        F.sum(F.when(t == "isr-expand", 1).otherwise(0)).alias("isr_expands"),
        F.sum(F.when(t == "leader-elected", 1).otherwise(0)).alias("leader_elections"),
        F.sum(F.when(t == "truncate", 1).otherwise(0)).alias("truncations"),
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


def op_figures(history: DataFrame) -> DataFrame:
    """run -> op counts and latency quantiles (ms) of sends and polls.

    Each process has one op in flight (Jepsen's model), so an op's completion is
    the next op of the same process after its invoke (a window per process)."""
    f, t, p = F.col("f"), F.col("type"), F.col("process")
    w = Window.partitionBy("run", "process").orderBy("index")
    ops = history.select(
        "run", "process", "time", "type", "f",
        (F.col("time") - F.lag("time").over(w)).alias("ns"),
        F.lag("type").over(w).alias("prev_type"),
    )

    def n(cond: Column, name: str) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0)).alias(name)

    done = (F.col("prev_type") == "invoke") & (t != "invoke") & (p != NEMESIS_PROCESS)
    ms = F.col("ns") / 1e6
    aggs = [
        F.count("*").alias("ops"),
        n((f == "send") & (t == "invoke"), "sends"),
        n((f == "send") & (t == "ok"), "sends_ok"),
        n((f == "send") & (t == "fail"), "sends_fail"),
        n((f == "send") & (t == "info"), "sends_info"),
        n((f == "poll") & (t == "ok") & (p != FINAL_PROCESS), "polls_ok"),
        n((p == NEMESIS_PROCESS) & (t != "invoke"), "nemesis_ops"),
        n((p == FINAL_PROCESS) & (t == "ok"), "final_reads"),
        (F.max("time") - F.min("time")).alias("duration_ns"),
    ]
    for op in ("send", "poll"):
        sel = F.when(done & (f == op), ms)
        aggs += [
            F.percentile_approx(sel, [0.5, 0.95, 0.99]).alias(f"{op}_latency_ms_p50_p95_p99"),
            F.max(sel).alias(f"{op}_latency_ms_max"),
        ]
    return ops.groupBy("run").agg(*aggs)


def window_sends(spark, history: DataFrame, windows: dict[str, list]) -> DataFrame:
    """(run, n) -> sends completed in fault window n and how many were ok. Window
    n runs from the n-th completed nemesis op to the next; windows are few, so
    each send meets its run's windows in a broadcast join."""
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
    sends = history.filter((F.col("f") == "send") & (t != "invoke")).select(
        "run", "time", "index", "type"
    )
    phased = sends.join(F.broadcast(table), "run", "left").filter(
        F.col("n").isNull() | (after_start & before_end)
    )
    return phased.groupBy("run", F.coalesce("n", F.lit(0)).alias("n")).agg(
        F.count("*").alias("sends"), F.sum(F.when(t == "ok", 1).otherwise(0)).alias("ok")
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
    spark, history: DataFrame, sparse: DataFrame, events: DataFrame | None, scope: Scope
) -> dict[str, dict[str, Any]]:
    """Collect the per-run figures."""
    windows = faults(sparse)
    figs: dict[str, dict[str, Any]] = {}
    for r in op_figures(history).collect():
        d = r.asDict(recursive=True)
        figs[d.pop("run")] = {
            k: ([round(x, 3) if isinstance(x, float) else x for x in v]
                if isinstance(v, list) else v)
            for k, v in d.items()
        }
    counts: dict[str, dict[int, tuple[int, int]]] = {}
    for r in window_sends(spark, history, windows).collect():
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
