"""aborted-read: a consumer poll returned a value whose send failed (definitely not
written: docs/anomalies.md), so the client was told one thing and readers see another."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.anomalies.base import VALUE, AnomalyKind, Needs, rows
from checker.anomalies.observations import reads_in_scope
from checker.context import CheckContext, Known
from checker.finallog import KEY


def detect(ctx: CheckContext) -> DataFrame:
    failed = ctx.sends.filter(F.col("type") == "fail").select(
        *KEY,
        "value",
        F.struct("index", "process", "time", "error").alias("send"),
    )
    reads = (
        reads_in_scope(ctx)
        .groupBy(*KEY, "value")
        .agg(
            F.min(F.struct("index", "process", "time", "offset", "hw")).alias("first_poll"),
            F.count("*").alias("polls"),
        )
    )
    in_final = ctx.final_log.groupBy(*KEY, "value").agg(
        F.sort_array(F.collect_set("offset")).alias("committed_at")
    )
    df = failed.join(reads, [*KEY, "value"]).join(in_final, [*KEY, "value"], "left")
    witness = F.struct(
        "topic",
        "partition",
        "value",
        "send",
        "first_poll",
        "polls",
        F.coalesce("committed_at", F.array()).alias("committed_at"),
    )
    return rows(df, F.col("first_poll.offset"), witness)


def explain(w: dict[str, Any]) -> str:
    s, p = w["send"], w["first_poll"]
    committed = (
        f" It is even in the final committed log (offset {w['committed_at'][0]})."
        if w["committed_at"]
        else ""
    )
    return (
        f"The send of value {w['value']} to {w['topic']}/{w['partition']} failed "
        f"(op #{s['index']}, error {s.get('error')}), which promises it was not written, "
        f"yet process {p['process']} read it at offset {p['offset']} (poll op #{p['index']}; "
        f"{w['polls']} poll(s) returned it).{committed}"
    )


def failed_values(known: Known) -> DataFrame:
    """The values of failed sends: a read of one is the anomaly wherever it sits
    (sent again, acked and read, it is in a bucket every digest agrees on)."""
    failed = known.sparse.filter((F.col("f") == "send") & (F.col("type") == "fail"))
    return failed.select(*KEY, "value")


KIND = AnomalyKind("aborted-read", detect, explain,
                   Needs(compares=(VALUE,), by_value=True, values=failed_values))
