"""One row per sent value: its invoke and completion, from one aggregation.

Sends are nearly all of a history, and a send's invoke and completion share its
value (DESIGN.md: a unique int). Grouping the send lines by value -- a hash
aggregation, no sort -- pairs them, which gives the latency, the completion's
type and time (availability per fault window), the op counts and the values
acknowledged more than once, without ordering the history by process.

A value whose lines do not form one invoke followed by at most one completion
by one process (sent twice, or a history that breaks the format) is *odd*: its
lines are read again and paired the Jepsen way, each completion with the op
before it in its process (odd_pairs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checker.finallog import KEY, PARTITIONS
from checker.spark import keep

VALUE = [*KEY, "value"]
# One row per send completion: the shape of completions().
_DONE = ["run", "time", "index", "type", "latency_ns"]


@dataclass
class SendOps:
    # Kept, one row per VALUE: n_invoke, n_ok, n_fail, n_info; t_lo/t_hi and
    # i_lo/i_hi, the first and last time and index of its lines; invoke_index;
    # proc_lo/proc_hi, the processes that sent it; odd.
    by_value: DataFrame
    # (run, topic, partition, value) acknowledged more than once.
    acked_twice: set[tuple] = field(default_factory=set)
    # (run, topic, partition, value) of the odd values (see the module docstring).
    odd: set[tuple] = field(default_factory=set)


def send_ops(history: DataFrame) -> SendOps:
    """Group every send line by value (one job), keep the groups and collect the
    values acked twice and the odd ones."""
    t, proc = F.col("type"), F.col("process").cast("long")
    grouped = (
        history.filter(F.col("f") == "send")
        .groupBy(*VALUE)
        .agg(
            F.count_if(t == "invoke").alias("n_invoke"),
            F.count_if(t == "ok").alias("n_ok"),
            F.count_if(t == "fail").alias("n_fail"),
            F.count_if(t == "info").alias("n_info"),
            F.min("time").alias("t_lo"),
            F.max("time").alias("t_hi"),
            F.min("index").alias("i_lo"),
            F.max("index").alias("i_hi"),
            F.min(F.when(t == "invoke", F.col("index"))).alias("invoke_index"),
            F.min(proc).alias("proc_lo"),
            F.max(proc).alias("proc_hi"),
        )
    )
    # Plain: one invoke, first, then at most one completion, by one process.
    odd = (
        (F.col("n_invoke") != 1)
        | (n_done() > 1)
        | (F.col("invoke_index") != F.col("i_lo"))
        | F.col("proc_lo").isNull()
        | (F.col("proc_lo") != F.col("proc_hi"))
    )
    by_value = keep(grouped.withColumn("odd", odd))
    rows = by_value.filter(F.col("odd") | (F.col("n_ok") > 1)).select(
        *VALUE, "odd", "n_ok"
    ).collect()
    return SendOps(
        by_value,
        acked_twice={(r.run, r.topic, r.partition, r.value) for r in rows if r.n_ok > 1},
        odd={(r.run, r.topic, r.partition, r.value) for r in rows if r.odd},
    )


def n_done() -> Column:
    """A by_value row's completions."""
    return F.col("n_ok") + F.col("n_fail") + F.col("n_info")


def paired() -> Column:
    """A by_value row that is one invoke and its completion."""
    return ~F.col("odd") & (n_done() == 1)


def plain_latency() -> Column:
    """A by_value row's latency (ns): its last line's time less its first's, if
    paired(); null otherwise (odd_pairs has the odd ones)."""
    return F.when(paired(), F.col("t_hi") - F.col("t_lo"))


def odd_pairs(spark: SparkSession, history: DataFrame, sends: SendOps) -> DataFrame | None:
    """The completions of the odd values (shape _DONE, kept), each paired with
    the op before it in its process among that value's lines (Jepsen: one op in
    flight per process), from the history itself; None without odd values."""
    if not sends.odd:
        return None
    keys = spark.createDataFrame(list(sends.odd), f"{PARTITIONS}, value long")
    lines = history.filter(F.col("f") == "send").join(F.broadcast(keys), VALUE, "left_semi")
    w = Window.partitionBy(*VALUE, "process").orderBy("index")
    prev_inv = F.lag("type").over(w) == "invoke"
    return keep(
        lines.select(
            "run", "time", "index", "type",
            F.when(prev_inv, F.col("time") - F.lag("time").over(w)).alias("latency_ns"),
        )
        .filter(F.col("type") != "invoke")
        .select(*_DONE)
    )


def completions(sends: SendOps, odd: DataFrame | None) -> DataFrame:
    """One row per send completion: run, time, index, type and its latency (ns;
    null without an invoke before it). ``odd``: odd_pairs."""
    typ = (
        F.when(F.col("n_ok") == 1, F.lit("ok"))
        .when(F.col("n_fail") == 1, F.lit("fail"))
        .otherwise(F.lit("info"))
    )
    plain = sends.by_value.filter(paired()).select(
        "run",
        F.col("t_hi").alias("time"),
        F.col("i_hi").alias("index"),
        typ.alias("type"),
        plain_latency().alias("latency_ns"),
    )
    return plain if odd is None else plain.unionByName(odd)
