"""Informational figures per run (never violations by themselves)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checker.kinds import FINAL_PROCESS, NEMESIS_PROCESS
from checker.scope import Scope


def op_counts(history: DataFrame) -> DataFrame:
    """run → counts of client and nemesis ops by kind and outcome."""
    f, t, p = F.col("f"), F.col("type"), F.col("process")

    def n(cond, name: str):
        return F.sum(F.when(cond, 1).otherwise(0)).alias(name)

    return history.groupBy("run").agg(
        F.count("*").alias("ops"),
        n((f == "send") & (t == "invoke"), "sends"),
        n((f == "send") & (t == "ok"), "sends_ok"),
        n((f == "send") & (t == "fail"), "sends_fail"),
        n((f == "send") & (t == "info"), "sends_info"),
        n((f == "poll") & (t == "ok") & (p != FINAL_PROCESS), "polls_ok"),
        n((p == NEMESIS_PROCESS) & (t != "invoke"), "nemesis_ops"),
        n((p == FINAL_PROCESS) & (t == "ok"), "final_reads"),
        (F.max("time") - F.min("time")).alias("duration_ns"),
    )


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


def latencies(history: DataFrame) -> DataFrame:
    """run → latency quantiles (ms) of sends and polls.

    Each process has one op in flight (Jepsen's model), so an op's completion is the
    next op of the same process after its invoke."""
    w = Window.partitionBy("run", "process").orderBy("index")
    done = (
        history.filter(F.col("process") != NEMESIS_PROCESS)
        .select(
            "run",
            "f",
            "type",
            (F.col("time") - F.lag("time").over(w)).alias("ns"),
            F.lag("type").over(w).alias("prev_type"),
        )
        .filter((F.col("prev_type") == "invoke") & (F.col("type") != "invoke"))
    )
    ms = F.col("ns") / 1e6
    aggs = []
    for f in ("send", "poll"):
        sel = F.when(F.col("f") == f, ms)
        aggs += [
            F.percentile_approx(sel, [0.5, 0.95, 0.99]).alias(f"{f}_latency_ms_p50_p95_p99"),
            F.max(sel).alias(f"{f}_latency_ms_max"),
        ]
    return done.groupBy("run").agg(*aggs)


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


def availability(history: DataFrame) -> DataFrame:
    """run -> availability per fault window, as Jepsen's perf plots shade them: the
    run is cut into phases at every completed nemesis op (phase 0 is "no fault
    yet"); per phase, the sends that completed in it and how many were ok.

    Nemesis ops are few: each run's list of them (sorted by time, then index)
    is joined to the sends, and a send's phase is how many of them precede it.
    No sort of the sends."""
    proc, typ, f = F.col("process"), F.col("type"), F.col("f")
    label = F.when(f.isin("partition", "heal"), f).otherwise(
        F.concat_ws(" ", f, F.regexp_replace("nodes", r'[\[\]" ]', "")))
    nem = history.filter((proc == NEMESIS_PROCESS) & (typ != "invoke")).select(
        "run", F.struct("time", "index").alias("at"), label.alias("label")
    )
    faults = nem.groupBy("run").agg(F.sort_array(F.collect_list("at")).alias("faults"))
    at = F.struct("time", "index")
    sends = (
        history.filter((f == "send") & (typ != "invoke"))
        .join(F.broadcast(faults), "run", "left")
        .select(
            "run",
            F.size(F.filter(F.coalesce("faults", F.array()), lambda x: x < at)).alias("n"),
            (typ == "ok").cast("int").alias("ok"),
        )
        .groupBy("run", "n")
        .agg(F.count("*").alias("sends"), F.sum("ok").alias("ok"))
    )
    w = Window.partitionBy("run").orderBy("at")
    starts = nem.select(
        "run", F.row_number().over(w).alias("n"), F.col("at.time").alias("start"), "label"
    )
    phases = (
        starts.join(sends, ["run", "n"], "full")
        .groupBy("run", "n")
        .agg(F.max("start").alias("start"), F.max("label").alias("phase"),
             F.coalesce(F.sum("sends"), F.lit(0)).alias("sends"),
             F.coalesce(F.sum("ok"), F.lit(0)).alias("ok"))
    )
    wn = Window.partitionBy("run").orderBy("n")
    return (
        phases.withColumn("end", F.lead("start").over(wn))
        .groupBy("run")
        .agg(F.sort_array(F.collect_list(F.struct(
            "n",
            F.coalesce("phase", F.lit("no fault")).alias("phase"),
            F.round(F.coalesce("start", F.lit(0)) / 1e9, 3).alias("start_s"),
            F.round(F.col("end") / 1e9, 3).alias("end_s"),
            "sends", "ok"))).alias("availability"))
    )


def run_figures(
    history: DataFrame, events: DataFrame | None, scope: Scope
) -> dict[str, dict[str, Any]]:
    """Collect the per-run figures (one small row per run)."""
    df = (
        op_counts(history)
        .join(unseen_acked(scope), "run", "left")
        .fillna(0, ["unseen_acked"])
        .join(latencies(history), "run", "left")
        .join(availability(history), "run", "left")
    )
    isr = isr_changes(events)
    if isr is not None:
        df = df.join(isr, "run", "left")
    out = {}
    for r in df.collect():
        d = r.asDict(recursive=True)
        out[d.pop("run")] = {
            k: ([round(x, 3) if isinstance(x, float) else x for x in v]
                if isinstance(v, list) else v)
            for k, v in d.items()
        }
    return out
