"""duplicate: one value at more than one offset of the final committed log.

Witness: the value, every offset holding it (with epochs), and the send ops of
that value (how many acked, failed or unknown; a retried send is the usual cause).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.anomalies.base import OFFSET, VALUE, AnomalyKind, Needs, rows
from checker.context import CheckContext, Known
from checker.finallog import KEY


def detect(ctx: CheckContext) -> DataFrame:
    dups = (
        ctx.final_log.groupBy(*KEY, "value")
        .agg(F.sort_array(F.collect_set(F.struct("offset", "epoch"))).alias("at"))
        .filter(F.size("at") > 1)
    )
    sends = (
        ctx.sends.filter(F.col("type") != "invoke")
        .groupBy(*KEY, "value")
        .agg(F.sort_array(F.collect_list(F.struct("index", "type", "offset"))).alias("sends"))
    )
    df = dups.join(sends, [*KEY, "value"], "left")
    witness = F.struct(
        "topic", "partition", "value", "at", F.coalesce("sends", F.array()).alias("sends")
    )
    return rows(df, F.col("at")[0]["offset"], witness)


def explain(w: dict[str, Any]) -> str:
    offs = ", ".join(str(a["offset"]) for a in w["at"])
    sends = w.get("sends") or []
    how = (
        f"It was sent {len(sends)} time(s) ("
        + ", ".join(f"op #{s['index']} {s['type']}" for s in sends)
        + ")."
        if sends
        else "No send of it is in the history."
    )
    return (
        f"Value {w['value']} appears at {len(w['at'])} offsets ({offs}) of the final committed "
        f"log of {w['topic']}/{w['partition']}, though every value is produced once. {how} "
        "A consumer reading the partition sees the same write twice."
    )


def acked_twice(known: Known) -> DataFrame | None:
    """A value acked twice, at two offsets where the final log holds it: every
    digest of both buckets agrees, so the scope must be told."""
    return known.sends.acked_twice


KIND = AnomalyKind("duplicate", detect, explain,
                   Needs(compares=(OFFSET, VALUE), by_value=True, values=acked_twice))
