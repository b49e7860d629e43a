"""divergence: two replicas hold different records at the same offset, where both
consider it settled: below both their HWs after healing, or anywhere once they
report the same LEO (docs/anomalies.md).

One anomaly per partition and replica pair; the witness lists the divergent
offsets (first 20) with both replicas' records and both replicas' final states.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.anomalies.base import EPOCH, OFFSET, VALUE, AnomalyKind, Needs, plural, record, rows
from checker.context import CheckContext

_SHOWN = 20


def detect(ctx: CheckContext) -> DataFrame:
    def side(s: str) -> DataFrame:
        log = ctx.logs.select(
            "run",
            "topic",
            "partition",
            "offset",
            F.col("broker").alias(f"{s}_broker"),
            F.col("epoch").alias(f"{s}_epoch"),
            F.col("value").alias(f"{s}_value"),
        )
        st = ctx.states.select(
            "run",
            "topic",
            "partition",
            F.col("broker").alias(f"{s}_broker"),
            F.struct("role", "leader_epoch", "leo", "hw", "hw_checkpoint").alias(f"{s}_state"),
        )
        return log.join(st, ["run", "topic", "partition", f"{s}_broker"])

    a, b = side("a"), side("b")
    pairs = a.join(b, ["run", "topic", "partition", "offset"]).filter(
        F.col("a_broker") < F.col("b_broker")
    )
    # Records differ: other value, or other epoch where both replicas stamp one
    # (0.10 may not stamp epochs; a missing epoch is not a difference).
    differ = (F.col("a_value") != F.col("b_value")) | (
        F.col("a_epoch").isNotNull()
        & F.col("b_epoch").isNotNull()
        & (F.col("a_epoch") != F.col("b_epoch"))
    )
    below_hw = F.col("offset") < F.least(F.col("a_state.hw"), F.col("b_state.hw"))
    same_leo = F.col("a_state.leo") == F.col("b_state.leo")
    div = pairs.filter(differ & (below_hw | same_leo)).withColumn(
        "rule", F.when(below_hw, F.lit("below-both-hw")).otherwise(F.lit("same-leo"))
    )
    grouped = div.groupBy(
        "run", "topic", "partition", "a_broker", "b_broker", "a_state", "b_state"
    ).agg(
        F.min("offset").alias("first_offset"),
        F.count("*").alias("count"),
        F.slice(
            F.sort_array(
                F.collect_list(
                    F.struct(
                        "offset",
                        "rule",
                        F.struct(
                            F.col("a_epoch").alias("epoch"), F.col("a_value").alias("value")
                        ).alias("a"),
                        F.struct(
                            F.col("b_epoch").alias("epoch"), F.col("b_value").alias("value")
                        ).alias("b"),
                    )
                )
            ),
            1,
            _SHOWN,
        ).alias("offsets"),
    )
    witness = F.struct(
        "topic",
        "partition",
        F.array("a_broker", "b_broker").alias("replicas"),
        "first_offset",
        "count",
        "offsets",
        F.struct(F.col("a_state").alias("a"), F.col("b_state").alias("b")).alias("states"),
    )
    return rows(grouped, F.col("first_offset"), witness)


def explain(w: dict[str, Any]) -> str:
    ra, rb = w["replicas"]
    sa, sb = w["states"]["a"], w["states"]["b"]
    tp = f"{w['topic']}/{w['partition']}"
    first = w["offsets"][0]
    text = (
        f"Replicas {ra} and {rb} of {tp} disagree at offset {first['offset']}: "
        f"{ra} holds {record(first['a']['value'], first['a'].get('epoch'))} while "
        f"{rb} holds {record(first['b']['value'], first['b'].get('epoch'))}"
    )
    more = int(w["count"]) - 1
    if more > 0:
        others = ", ".join(str(o["offset"]) for o in w["offsets"][1:])
        if more >= len(w["offsets"]):  # the witness lists only the first offsets
            others += ", ..."
        text += f", and they differ at {plural(more, 'more offset')} ({others})"
    text += ". "
    if first["rule"] == "below-both-hw":
        text += (
            f"The offset is below both high watermarks ({ra} HW {sa['hw']}, {rb} HW {sb['hw']}), "
            "so each replica considers its record committed. "
        )
    else:
        text += (
            f"Both replicas report the same log end offset ({sa['leo']}), so neither will "
            "truncate to repair the difference. "
        )
    return text + (
        "The partition's history has forked: a consumer reading from one replica sees "
        "different data from one reading the other, and the next leader change can "
        "silently replace committed records."
    )


# Offset-keyed: both replicas' records of an offset sit in one bucket.
KIND = AnomalyKind("divergence", detect, explain, Needs(compares=(OFFSET, VALUE, EPOCH)))
