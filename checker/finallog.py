"""The final committed log of each partition.

Preferred source: the records of the ``ok`` polls of process "final" (the final
read after healing). A run interrupted before its final read falls back to the
log of the replica whose state says it is leader (the highest leader epoch if
several claim it), up to that replica's HW. A partition with neither has no
known final log; checks that need one skip it and the summary says so.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checker.kinds import FINAL_PROCESS
from checker.load import Inputs

KEY = ["run", "topic", "partition"]

FINAL_READ = "final-read"
LEADER_LOG = "leader-log-up-to-hw"
NONE = "none"


def final_log(inputs: Inputs) -> tuple[DataFrame, DataFrame]:
    """Return (final_log, final_sources); see CheckContext for their columns."""
    h, logs, states = inputs.history, inputs.logs, inputs.states
    final_polls = h.filter(
        (F.col("process") == FINAL_PROCESS) & (F.col("f") == "poll") & (F.col("type") == "ok")
    )
    read_parts = final_polls.select(*KEY).distinct().withColumn("read", F.lit(True))
    read = (
        final_polls.select(*KEY, F.explode("records").alias("r"))
        .select(*KEY, F.col("r")[0].alias("offset"), F.col("r")[1].alias("value"))
        .distinct()
    )

    leaders = (
        states.filter(F.col("role") == "leader")
        .withColumn(
            "rk",
            F.row_number().over(
                Window.partitionBy(*KEY).orderBy(F.col("leader_epoch").desc_nulls_last(), "broker")
            ),
        )
        .filter("rk = 1")
        .select(*KEY, F.col("broker").alias("leader_broker"), F.col("hw").alias("leader_hw"))
    )
    fallback = (
        logs.join(leaders.join(read_parts, KEY, "left_anti"), KEY)
        .filter(
            (F.col("broker") == F.col("leader_broker")) & (F.col("offset") < F.col("leader_hw"))
        )
        .select(*KEY, "offset", "value")
    )
    # Epochs are not in the final read; take them from the replica logs.
    epochs = logs.groupBy(*KEY, "offset", "value").agg(F.max("epoch").alias("epoch"))
    final = read.unionByName(fallback).join(epochs, [*KEY, "offset", "value"], "left")

    universe = (
        states.select(*KEY)
        .union(logs.select(*KEY))
        .union(h.filter(F.col("f") == "send").select(*KEY))
        .distinct()
    )
    lengths = final.groupBy(*KEY).agg(
        (F.max("offset") + 1).alias("length"), F.count("*").alias("records")
    )
    sources = (
        universe.join(read_parts, KEY, "left")
        .join(leaders, KEY, "left")
        .join(lengths, KEY, "left")
        .select(
            *KEY,
            F.when(F.col("read"), F.lit(FINAL_READ))
            .when(F.col("leader_broker").isNotNull(), F.lit(LEADER_LOG))
            .otherwise(F.lit(NONE))
            .alias("source"),
            F.when(~F.coalesce(F.col("read"), F.lit(False)), F.col("leader_broker")).alias(
                "broker"
            ),
            F.coalesce("length", F.lit(0)).alias("length"),
            F.coalesce("records", F.lit(0)).alias("records"),
        )
    )
    return final, sources
