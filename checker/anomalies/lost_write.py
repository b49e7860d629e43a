"""lost-write: a send that returned ok whose value is not in the final committed log.

Witness: the acknowledging op, the offset it was acked at, what the final log
holds at that offset now, and which replicas (if any) still hold the value.
Partitions whose final log is unknown (no final read, no leader) are skipped.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.anomalies.base import OFFSET, VALUE, AnomalyKind, Needs, plural, record, rows
from checker.context import CheckContext
from checker.finallog import KEY, NONE


def acked_sends(ctx: CheckContext) -> DataFrame:
    """Every ok send with its invoke (for acks and latency): shared by other kinds."""
    return ctx.shared("acked_sends", lambda: _acked_sends(ctx).cache())


def _acked_sends(ctx: CheckContext) -> DataFrame:
    h = ctx.sends
    ok = h.filter(F.col("type") == "ok").select(
        *KEY, "value", "process", "index", "time", F.col("offset").alias("acked_offset"), "acks"
    )
    inv = h.filter(F.col("type") == "invoke").select(
        "run",
        "process",
        "value",
        F.col("index").alias("invoke_index"),
        F.col("time").alias("invoke_time"),
        F.col("acks").alias("invoke_acks"),
    )
    return ok.join(inv, ["run", "process", "value"], "left").withColumn(
        "acks", F.coalesce("acks", "invoke_acks")
    )


def detect(ctx: CheckContext) -> DataFrame:
    known = ctx.final_sources.filter(F.col("source") != NONE).select(
        *KEY, F.col("source"), F.col("broker").alias("source_broker"), F.col("length")
    )
    final = ctx.final_log
    lost = (
        acked_sends(ctx)
        .join(known, KEY)
        .join(final.select(*KEY, "value"), [*KEY, "value"], "left_anti")
    )
    at_offset = final.select(
        *KEY,
        F.col("offset").alias("acked_offset"),
        F.struct(F.col("value"), F.col("epoch")).alias("final_at_offset"),
    )
    holders = ctx.logs.groupBy(*KEY, "value").agg(
        F.sort_array(F.collect_list(F.struct("broker", "offset", "epoch"))).alias("held_by")
    )
    df = lost.join(at_offset, [*KEY, "acked_offset"], "left").join(holders, [*KEY, "value"], "left")
    witness = F.struct(
        "topic",
        "partition",
        "value",
        "acked_offset",
        "acks",
        F.struct("index", "process", "time", "invoke_index", "invoke_time").alias("op"),
        F.struct("source", F.col("source_broker").alias("broker"), "length").alias("final_log"),
        "final_at_offset",
        F.coalesce("held_by", F.array()).alias("held_by"),
    )
    return rows(df, F.col("acked_offset"), witness)


def explain(w: dict[str, Any]) -> str:
    op = w.get("op") or {}
    fl = w.get("final_log") or {}
    tp = f"{w['topic']}/{w['partition']}"
    acks = f" with acks={w['acks']}" if w.get("acks") is not None else ""
    src = (
        "the final read"
        if fl.get("source") == "final-read"
        else f"the log of leader {fl.get('broker')} up to its HW (no final read was recorded)"
    )
    text = (
        f"Value {w['value']} was acknowledged{acks} "
        + (f"at offset {w['acked_offset']} of {tp} " if w.get("acked_offset") is not None
           else f"to {tp} (acks 0: counted done once written, no answer, no offset) ")
        + f"(send op #{op.get('index')}, process {op.get('process')}), but it is not in the "
        f"final committed log of {tp}, taken from {src}, which has "
        f"{plural(int(fl.get('length') or 0), 'offset')}. "
    )
    at = w.get("final_at_offset")
    if at:
        text += (
            f"Offset {w['acked_offset']} now holds {record(at['value'], at.get('epoch'))}: "
            "the acknowledged record was replaced. "
        )
    elif w.get("acked_offset") is not None:
        text += f"The committed log no longer reaches offset {w['acked_offset']}. "
    held = w.get("held_by") or []
    if held:
        where = ", ".join(
            f"{h['broker']} at offset {h['offset']}"
            + (f" (epoch {h['epoch']})" if h.get("epoch") is not None else "")
            for h in held
        )
        text += f"The value survives only on replica(s) {where}, outside the committed log. "
    else:
        text += "No replica holds it any more. "
    return text + "An acknowledged write disappeared: this is data loss."


KIND = AnomalyKind("lost-write", detect, explain, Needs(compares=(OFFSET, VALUE), by_value=True))
