"""Informational figures per run (never violations by themselves)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checker.kinds import FINAL_PROCESS, NEMESIS_PROCESS


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


def unseen_acked(history: DataFrame) -> DataFrame:
    """run → acked values no consumer poll (other than the final read) returned."""
    key = ["run", "topic", "partition", "value"]
    acked = history.filter((F.col("f") == "send") & (F.col("type") == "ok")).select(*key)
    seen = (
        history.filter(
            (F.col("f") == "poll") & (F.col("type") == "ok") & (F.col("process") != FINAL_PROCESS)
        )
        .select("run", "topic", "partition", F.explode("records").alias("r"))
        .select("run", "topic", "partition", F.col("r")[1].alias("value"))
    )
    return acked.join(seen, key, "left_anti").groupBy("run").agg(F.count("*").alias("unseen_acked"))


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

    One sort of the run's sends and nemesis ops by time (a running count of
    nemesis ops numbers the phases), not a join of every send with every window."""
    proc, typ, f = F.col("process"), F.col("type"), F.col("f")
    nem = (proc == NEMESIS_PROCESS) & (typ != "invoke")
    label = F.when(f.isin("partition", "heal"), f).otherwise(
        F.concat_ws(" ", f, F.regexp_replace("nodes", r'[\[\]" ]', "")))
    upto = Window.partitionBy("run").orderBy("time", "index").rowsBetween(
        Window.unboundedPreceding, Window.currentRow)
    marked = (
        history.filter(nem | ((f == "send") & (typ != "invoke")))
        .select("run", "time", "index", nem.alias("is_nem"), F.when(nem, label).alias("label"),
                F.when(~nem, (typ == "ok").cast("int")).alias("ok"))
        .withColumn("n", F.sum(F.col("is_nem").cast("int")).over(upto))
    )
    phases = marked.groupBy("run", "n").agg(
        F.max("label").alias("phase"),
        F.min(F.when(F.col("is_nem"), F.col("time"))).alias("start"),
        F.count("ok").alias("sends"),
        F.coalesce(F.sum("ok"), F.lit(0)).alias("ok"),
    )
    w = Window.partitionBy("run").orderBy("n")
    return (
        phases.withColumn("end", F.lead("start").over(w))
        .groupBy("run")
        .agg(F.sort_array(F.collect_list(F.struct(
            "n",
            F.coalesce("phase", F.lit("no fault")).alias("phase"),
            F.round(F.coalesce("start", F.lit(0)) / 1e9, 3).alias("start_s"),
            F.round(F.col("end") / 1e9, 3).alias("end_s"),
            "sends", "ok"))).alias("availability"))
    )


def run_figures(history: DataFrame, events: DataFrame | None = None) -> dict[str, dict[str, Any]]:
    """Collect the per-run figures (one small row per run)."""
    df = (
        op_counts(history)
        .join(unseen_acked(history), "run", "left")
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
