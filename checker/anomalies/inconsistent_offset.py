"""inconsistent-offset: a value acknowledged (or read) at offset X but committed at
offset Y, or one offset of the final committed log holding two values.

A send acked at X whose value is not committed at all is a lost-write, not this
(even when another value now sits at X: docs/catalogue.md#kip101-power-loss-divergence),
and a poll of a value that is not committed is an uncommitted-read: only values
that *are* in the final log are compared here.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.anomalies.base import OFFSET, VALUE, AnomalyKind, Needs, rows
from checker.anomalies.lost_write import acked_sends
from checker.anomalies.observations import reads_in_scope
from checker.context import CheckContext
from checker.finallog import KEY


def detect(ctx: CheckContext) -> DataFrame:
    acks = acked_sends(ctx).select(
        *KEY,
        "value",
        F.col("acked_offset").alias("seen_offset"),
        F.lit("ack").alias("source"),
        "index",
        "process",
    )
    reads = reads_in_scope(ctx).select(
        *KEY,
        "value",
        F.col("offset").alias("seen_offset"),
        F.lit("poll").alias("source"),
        "index",
        "process",
    )
    committed = ctx.final_log.groupBy(*KEY, "value").agg(
        F.sort_array(F.collect_set("offset")).alias("committed_at")
    )
    moved = (
        acks.unionByName(reads)
        .join(committed, [*KEY, "value"])
        .filter(~F.array_contains("committed_at", F.col("seen_offset")))
        .groupBy(*KEY, "value", "committed_at")
        .agg(
            F.slice(
                F.sort_array(F.collect_list(F.struct("index", "source", "process", "seen_offset"))),
                1,
                20,
            ).alias("observed"),
        )
        .select(
            *KEY,
            F.lit("moved").alias("case"),
            "value",
            "committed_at",
            "observed",
            F.lit(None).cast("array<struct<value:bigint,epoch:bigint>>").alias("values"),
            F.col("committed_at")[0].alias("sort"),
        )
    )
    two = (
        ctx.final_log.groupBy(*KEY, "offset")
        .agg(F.sort_array(F.collect_set(F.struct("value", "epoch"))).alias("values"))
        .filter(F.size("values") > 1)
        .select(
            *KEY,
            F.lit("two-values").alias("case"),
            F.lit(None).cast("bigint").alias("value"),
            F.array("offset").alias("committed_at"),
            F.lit(None).cast(moved.schema["observed"].dataType).alias("observed"),
            "values",
            F.col("offset").alias("sort"),
        )
    )
    df = moved.unionByName(two)
    witness = F.struct("topic", "partition", "case", "value", "committed_at", "observed", "values")
    return rows(df, F.col("sort"), witness)


def explain(w: dict[str, Any]) -> str:
    tp = f"{w['topic']}/{w['partition']}"
    if w["case"] == "two-values":
        vals = " and ".join(str(v["value"]) for v in w["values"])
        return (
            f"The final read of {tp} returned two different values ({vals}) at offset "
            f"{w['committed_at'][0]}: an offset must name exactly one record."
        )
    obs = "; ".join(
        f"{'acknowledged' if o['source'] == 'ack' else 'read'} at offset {o['seen_offset']} "
        f"(op #{o['index']}, process {o['process']})"
        for o in w["observed"]
    )
    at = ", ".join(str(o) for o in w["committed_at"])
    return (
        f"Value {w['value']} is committed at offset {at} of {tp}, but it was {obs}. "
        "A record's offset must never change once a client has been told it."
    )


KIND = AnomalyKind("inconsistent-offset", detect, explain,
                   Needs(compares=(OFFSET, VALUE), by_value=True))
