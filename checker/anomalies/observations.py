"""Views of the history shared by several anomaly kinds."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checker.context import CheckContext
from checker.finallog import KEY, NONE
from checker.scope import consumer_polls
from checker.spark import keep


def reads_in_scope(ctx: CheckContext) -> DataFrame:
    """The records consumers read, within the scope: one row per record, the
    poll op (process, index, time, fetch_offset, hw) plus its offset and value."""
    return ctx.reads


def known_final(ctx: CheckContext) -> DataFrame:
    """Partitions whose final committed log is known (run, topic, partition)."""
    return F.broadcast(ctx.final_sources.filter(F.col("source") != NONE).select(*KEY))


def consumer_steps(sparse: DataFrame) -> DataFrame:
    """Each record a consumer read that does not follow the one it read before by
    exactly one offset (per partition): the only steps an ordering anomaly can be.
    Kept (small).

    For a consumer's first record the "previous" offset is its first fetch
    position minus one, so a first poll that starts beyond it counts as a step.
    Worked out per poll, not per record: a poll's first record is compared with
    the last record of the consumer's previous non-empty poll (one window over
    the poll summaries), and records inside a poll with each other -- only in
    the polls checker.sparse kept records for (those checker.facts saw climb
    unevenly; any other poll climbs one offset at a time).
    """
    before = Window.partitionBy(*KEY, "process").orderBy("index").rowsBetween(
        Window.unboundedPreceding, -1
    )
    nonempty = F.col("n") > 0
    polls = consumer_polls(sparse).select(
        *KEY,
        "process",
        "index",
        "hw",
        "n",
        "records",
        "first_offset",
        "first_value",
        F.coalesce(
            F.last(F.when(nonempty, F.col("last_offset")), ignorenulls=True).over(before),
            F.col("offset") - 1,
        ).alias("prev_offset"),
        F.last(F.when(nonempty, F.col("index")), ignorenulls=True).over(before).alias(
            "prev_index"
        ),
    ).filter(nonempty)
    across = polls.select(
        *KEY,
        "process",
        F.col("first_offset").alias("offset"),
        F.col("first_value").alias("value"),
        "index",
        "hw",
        "prev_offset",
        "prev_index",
    )
    # (records[i][0], not a derived offsets array: the lambda would rebuild it
    # for every element.)
    rec, n = F.col("records"), F.col("n")
    uneven = polls.filter(
        rec.isNotNull()
        & F.when(
            n > 1,
            F.exists(
                F.sequence(F.lit(1), n - 1),
                lambda i: rec[i][0] != rec[i - 1][0] + 1,
            ),
        ).otherwise(F.lit(False))
    )
    w = Window.partitionBy(*KEY, "process", "index").orderBy("pos")
    inside = (
        uneven.select(*KEY, "process", "index", "hw", F.posexplode("records").alias("pos", "r"))
        .select(
            *KEY,
            "process",
            F.col("r")[0].alias("offset"),
            F.col("r")[1].alias("value"),
            "index",
            "hw",
            F.lag(F.col("r")[0]).over(w).alias("prev_offset"),
            F.col("index").alias("prev_index"),
            "pos",
        )
        .filter(F.col("pos") > 0)
        .drop("pos")
    )
    steps = across.unionByName(inside)
    return keep(
        steps.filter(
            (F.col("offset") <= F.col("prev_offset"))
            | (F.col("offset") > F.col("prev_offset") + 1)
        )
    )


def step_before() -> Column:
    """Witness field: the earlier position of a consumer_steps() row."""
    return F.struct(F.col("prev_index").alias("index"),
                    F.col("prev_offset").alias("offset")).alias("before")
