"""hw-regression: the high watermark one consumer saw for a partition went backwards
between two of its polls served in the same leader epoch.

A leader's HW never decreases within its epoch, but after a leader election the
new leader's HW can lag behind the offset at the start of its epoch and behind
the previous leader's HW (KAFKA-2334, Kafka commit 152292994e4; KIP-207 guards
only ListOffsets, Fetch responses still carry the lagging HW). So a drop across
a leader change is real Kafka behaviour in every release and is not compared.

Polls are grouped by the leader epoch that served them (the poll's ``epoch``);
a history written before polls carried it (null ``epoch``) falls back to the
serving ``node``: two epoch-less polls are compared when the same node served
both. A poll with neither is never compared.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checker.anomalies.base import AnomalyKind, rows
from checker.context import CheckContext
from checker.finallog import KEY
from checker.scope import consumer_polls


def detect(ctx: CheckContext) -> DataFrame:
    epoch, node = F.col("epoch"), F.col("node")
    # The server a poll is compared within: its leader epoch, else (an old
    # history) its node. Epoch-less polls form their own groups (by_node).
    by_node = F.when(epoch.isNull(), node)
    w = Window.partitionBy(*KEY, "process", "epoch", by_node).orderBy("index")
    polls = (
        consumer_polls(ctx.sparse)
        .filter(F.col("hw").isNotNull() & (epoch.isNotNull() | node.isNotNull()))
        .select(
            *KEY,
            "process",
            "index",
            "time",
            "hw",
            "node",
            "epoch",
            F.lag("hw").over(w).alias("prev_hw"),
            F.lag("index").over(w).alias("prev_index"),
            F.lag("node").over(w).alias("prev_node"),
        )
    )
    df = polls.filter(F.col("hw") < F.col("prev_hw"))
    witness = F.struct(
        "topic",
        "partition",
        "process",
        "epoch",
        F.struct(
            F.col("prev_index").alias("index"),
            F.col("prev_hw").alias("hw"),
            F.col("prev_node").alias("node"),
        ).alias("before"),
        F.struct("index", "hw", "time", "node").alias("after"),
    )
    return rows(df, F.col("index"), witness)


def explain(w: dict[str, Any]) -> str:
    b, a = w["before"], w["after"]
    served = (
        f"in leader epoch {w['epoch']}" if w.get("epoch") is not None
        else f"from the same node {a.get('node')} (no leader epoch recorded)"
    )
    return (
        f"Process {w['process']} saw the high watermark of {w['topic']}/{w['partition']} at "
        f"{b['hw']} (poll op #{b['index']}) and then at {a['hw']} (poll op #{a['index']}), "
        f"both served {served}: the HW went backwards under one leader, so records the "
        "consumer was told were committed may no longer be."
    )


# Reads the poll summaries (checker.sparse), which the scope does not narrow: no Needs.
KIND = AnomalyKind("hw-regression", detect, explain)
