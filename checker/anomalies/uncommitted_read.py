"""uncommitted-read: a consumer poll returned a record that is not at that offset in
the final committed log (it was read before it was committed and later truncated).

One anomaly per (offset, value) read; the witness is the first poll that returned
it, how many polls did, and what the final log holds at that offset.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.anomalies.base import OFFSET, VALUE, AnomalyKind, Needs, record, rows
from checker.anomalies.observations import known_final, reads_in_scope
from checker.context import CheckContext
from checker.finallog import KEY


def detect(ctx: CheckContext) -> DataFrame:
    final = ctx.final_log.select(*KEY, "offset", "value")
    bad = (
        reads_in_scope(ctx)
        .join(known_final(ctx), KEY)
        .join(final, [*KEY, "offset", "value"], "left_anti")
    )
    grouped = bad.groupBy(*KEY, "offset", "value").agg(
        F.min(F.struct("index", "process", "time", "fetch_offset", "hw")).alias("first_poll"),
        F.count("*").alias("polls"),
    )
    at = ctx.final_log.select(
        *KEY, "offset", F.struct(F.col("value"), F.col("epoch")).alias("final_at_offset")
    )
    held = ctx.logs.groupBy(*KEY, "offset", "value").agg(
        F.sort_array(F.collect_list(F.struct("broker", "epoch"))).alias("held_by")
    )
    df = grouped.join(at, [*KEY, "offset"], "left").join(held, [*KEY, "offset", "value"], "left")
    witness = F.struct(
        "topic",
        "partition",
        "offset",
        "value",
        "first_poll",
        "polls",
        "final_at_offset",
        F.coalesce("held_by", F.array()).alias("held_by"),
    )
    return rows(df, F.col("offset"), witness)


def explain(w: dict[str, Any]) -> str:
    p = w["first_poll"]
    tp = f"{w['topic']}/{w['partition']}"
    at = w.get("final_at_offset")
    now = (
        f"the final committed log holds {record(at['value'], at.get('epoch'))} there"
        if at
        else "the final committed log does not reach that offset"
    )
    return (
        f"Process {p['process']} read value {w['value']} at offset {w['offset']} of {tp} "
        f"(poll op #{p['index']}, HW reported {p['hw']}; {w['polls']} poll(s) returned it), "
        f"but {now}. The consumer saw a record that was never committed: reads must stay "
        "below the high watermark."
    )


# Matches reads with the final log and the logs by offset: one bucket.
KIND = AnomalyKind("uncommitted-read", detect, explain, Needs(compares=(OFFSET, VALUE)))
