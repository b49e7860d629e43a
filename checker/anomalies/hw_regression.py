"""hw-regression: the high watermark one consumer saw for a partition went backwards
between two of its successive polls."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checker.anomalies.base import AnomalyKind, rows
from checker.context import CheckContext
from checker.finallog import KEY
from checker.scope import consumer_polls


def detect(ctx: CheckContext) -> DataFrame:
    w = Window.partitionBy(*KEY, "process").orderBy("index")
    polls = (
        consumer_polls(ctx.sparse)
        .filter(F.col("hw").isNotNull())
        .select(
            *KEY,
            "process",
            "index",
            "time",
            "hw",
            F.lag("hw").over(w).alias("prev_hw"),
            F.lag("index").over(w).alias("prev_index"),
        )
    )
    df = polls.filter(F.col("hw") < F.col("prev_hw"))
    witness = F.struct(
        "topic",
        "partition",
        "process",
        F.struct(F.col("prev_index").alias("index"), F.col("prev_hw").alias("hw")).alias("before"),
        F.struct("index", "hw", "time").alias("after"),
    )
    return rows(df, F.col("index"), witness)


def explain(w: dict[str, Any]) -> str:
    b, a = w["before"], w["after"]
    return (
        f"Process {w['process']} saw the high watermark of {w['topic']}/{w['partition']} at "
        f"{b['hw']} (poll op #{b['index']}) and then at {a['hw']} (poll op #{a['index']}): "
        "the HW went backwards, so records the consumer was told were committed may no "
        "longer be."
    )


# Reads the poll summaries (checker.sparse), which the scope does not narrow: no Needs.
KIND = AnomalyKind("hw-regression", detect, explain)
