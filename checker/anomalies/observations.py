"""Views of the history shared by several anomaly kinds."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checker.context import CheckContext
from checker.finallog import KEY, NONE
from checker.kinds import FINAL_PROCESS


def consumer_polls(ctx: CheckContext) -> DataFrame:
    """ok polls of the consumers (the final read excluded)."""
    h = ctx.history
    return h.filter(
        (F.col("f") == "poll") & (F.col("type") == "ok") & (F.col("process") != FINAL_PROCESS)
    )


def consumer_records(ctx: CheckContext) -> DataFrame:
    """One row per record a consumer poll returned: the poll op plus offset, value and
    the record's position (``seq``) in that consumer's stream for the partition."""
    return ctx.shared("consumer_records", lambda: _consumer_records(ctx))


def _consumer_records(ctx: CheckContext) -> DataFrame:
    recs = consumer_polls(ctx).select(
        *KEY,
        "process",
        "index",
        "time",
        F.col("offset").alias("fetch_offset"),
        "hw",
        F.posexplode("records").alias("pos", "r"),
    )
    recs = recs.select(
        *[c for c in recs.columns if c != "r"],
        F.col("r")[0].alias("offset"),
        F.col("r")[1].alias("value"),
    )
    w = Window.partitionBy(*KEY, "process").orderBy("index", "pos")
    return recs.withColumn("seq", F.row_number().over(w))


def known_final(ctx: CheckContext) -> DataFrame:
    """Partitions whose final committed log is known (run, topic, partition)."""
    return ctx.final_sources.filter(F.col("source") != NONE).select(*KEY)


def consumer_steps(ctx: CheckContext) -> DataFrame:
    """Each record a consumer read next to the one it read before (per partition).

    For a consumer's first record the "previous" offset is its first fetch
    position minus one, so a first poll that starts beyond it counts as a step.
    """
    w = Window.partitionBy(*KEY, "process").orderBy("seq")
    recs = consumer_records(ctx)
    return recs.select(
        *KEY,
        "process",
        "seq",
        "offset",
        "value",
        "index",
        "hw",
        F.coalesce(F.lag("offset").over(w), F.col("fetch_offset") - 1).alias("prev_offset"),
        F.lag("index").over(w).alias("prev_index"),
    )


def step_before() -> Column:
    """Witness field: the earlier position of a consumer_steps() row."""
    return F.struct(F.col("prev_index").alias("index"),
                    F.col("prev_offset").alias("offset")).alias("before")
