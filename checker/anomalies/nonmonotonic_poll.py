"""nonmonotonic-poll: one consumer's successive reads of a partition go backwards
(a record at an offset at or below the one it read just before)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.anomalies.base import AnomalyKind, rows
from checker.anomalies.observations import step_before
from checker.context import CheckContext


def detect(ctx: CheckContext) -> DataFrame:
    df = ctx.steps.filter(
        F.col("prev_index").isNotNull() & (F.col("offset") <= F.col("prev_offset"))
    )
    witness = F.struct(
        "topic",
        "partition",
        "process",
        step_before(),
        F.struct("index", "offset", "value").alias("after"),
    )
    return rows(df, F.col("index"), witness)


def explain(w: dict[str, Any]) -> str:
    b, a = w["before"], w["after"]
    same = "the same poll" if b["index"] == a["index"] else f"poll op #{a['index']}"
    return (
        f"Process {w['process']} read offset {b['offset']} of {w['topic']}/{w['partition']} "
        f"(poll op #{b['index']}) and then offset {a['offset']} (value {a['value']}) in {same}: "
        "a consumer's position must only move forward."
    )


# Reads ctx.steps, which the scope does not narrow: no Needs.
KIND = AnomalyKind("nonmonotonic-poll", detect, explain)
