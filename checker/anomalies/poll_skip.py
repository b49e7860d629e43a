"""poll-skip: one consumer's successive reads of a partition jump over offsets that
are present in the final committed log (records it never saw)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.anomalies.base import OFFSET, AnomalyKind, Needs, rows
from checker.anomalies.observations import step_before
from checker.context import CheckContext, Known
from checker.finallog import KEY
from checker.scope import at_most, broadcast_if, hints_off

_SHOWN = 10
# The range join's bucket width (any width finds the same; not the scope's).
_SPAN_BITS = 10


def _spans(steps: DataFrame, final_sources: DataFrame) -> DataFrame:
    """The consumer steps that jump ahead, with ``lo``..``hi``: the final-log
    offsets they jump over (offsets past the final log's end cannot be committed
    ones: clamped), where there are any."""
    jumps = steps.filter(F.col("offset") > F.col("prev_offset") + 1)
    lo = F.greatest(F.col("prev_offset") + 1, F.lit(0))
    hi = F.least(F.col("offset") - 1, F.col("final_length") - 1)
    return (
        jumps.join(final_sources.select(*KEY, F.col("length").alias("final_length")), KEY)
        .filter(hi >= lo)
        .select(*jumps.columns, lo.alias("lo"), hi.alias("hi"))
    )


def skipped_ranges(known: Known) -> DataFrame:
    """(run, topic, partition, lo, hi): the final-log offsets the jumps span,
    which detect looks up."""
    return _spans(known.steps, known.final.sources_df(known.spark)).select(*KEY, "lo", "hi")


def detect(ctx: CheckContext) -> DataFrame:
    # A range join, bucketed by offset so that each jump meets only the final-log
    # records of the buckets it spans (broadcast where the jumps are few).
    jumps = _spans(ctx.steps, ctx.final_sources)
    spans = jumps.withColumn(
        "bucket",
        F.explode(F.sequence(F.shiftright("lo", _SPAN_BITS), F.shiftright("hi", _SPAN_BITS))),
    ).drop("lo", "hi")
    # The scope keeps the final log of skipped_ranges.
    final = ctx.scope.final.select(
        *KEY, F.shiftright("offset", _SPAN_BITS).alias("bucket"), F.col("offset").alias("skipped")
    )
    few = hints_off(ctx.spark) or at_most(jumps)
    hits = final.join(broadcast_if(spans, few), [*KEY, "bucket"]).filter(
        (F.col("skipped") > F.col("prev_offset")) & (F.col("skipped") < F.col("offset"))
    )
    df = hits.groupBy(*KEY, "process", "index", "prev_index", "prev_offset", "offset").agg(
        F.count("*").alias("count"),
        F.slice(F.sort_array(F.collect_list("skipped")), 1, _SHOWN).alias("skipped"),
    )
    witness = F.struct(
        "topic",
        "partition",
        "process",
        step_before(),
        F.struct("index", "offset").alias("after"),
        "count",
        "skipped",
    )
    return rows(df, F.col("index"), witness)


def explain(w: dict[str, Any]) -> str:
    b, a = w["before"], w["after"]
    start = (
        f"after offset {b['offset']} (poll op #{b['index']})"
        if b["index"] is not None
        else f"starting its fetch at offset {b['offset'] + 1}"
    )
    shown = ", ".join(str(s) for s in w["skipped"])
    more = ", ..." if w["count"] > len(w["skipped"]) else ""
    return (
        f"Process {w['process']} read {w['topic']}/{w['partition']} {start} and next at "
        f"offset {a['offset']} (poll op #{a['index']}), skipping {w['count']} committed "
        f"offset(s) ({shown}{more}) it never received."
    )


KIND = AnomalyKind("poll-skip", detect, explain,
                   Needs(compares=(OFFSET,), final_ranges=skipped_ranges))
