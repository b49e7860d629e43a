"""Which records the value- and offset-keyed anomaly checks need to look at.

Most of a long history agrees with itself: every replica holds the final log,
every send was acked where the final log has its value, every consumer read the
final log. Joining all of it record by record costs a dozen shuffles of the
whole input. Instead the checker does what anti-entropy repair does (Dynamo,
Cassandra): it compares digests first.

Offsets are cut into buckets of 2**BUCKET_BITS. For each bucket, every source
-- the final log, each replica's log, the acked sends (at their acked offset),
each consumer's reads -- gets a digest: the count and two sums of a 64-bit hash
of (offset, value) (a multiset hash: map-side aggregation, so nothing big is
shuffled). A bucket is *suspect* when a source that has records there does not
match the final log's digest (two different record sets share a digest with
odds of about 2**-64; the inputs are not adversarial). Outside suspect buckets
every replica, ack and read equals the final log record for record, so no
anomaly of those kinds can sit there -- except through a value that also
appears elsewhere. Hence the scope: every record in a suspect bucket, plus
every record whose value is one of the suspect records' values, a value the
final log holds twice, or a value whose send failed. The anomaly kinds run
unchanged on that scope and find exactly what they would on everything
(tests/test_checker_scope.py compares the two on generated runs).

When most buckets are suspect, or the input is small, the scope is simply
everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from checker.finallog import KEY, FinalLog
from checker.kinds import FINAL_PROCESS
from checker.load import Inputs
from checker.spark import keep

BUCKET_BITS = 10
# Below this many history lines the digests cost more than they save.
MIN_LINES = 200_000
# Above this share of suspect buckets, check everything.
MAX_SUSPECT_SHARE = 0.25

_MASK32 = 0xFFFFFFFF


@dataclass
class Scope:
    sends: DataFrame  # history rows of f=send (invoke and completions)
    reads: DataFrame  # one row per record a consumer poll returned (see consumer_records)
    logs: DataFrame  # replica log records
    final: DataFrame  # final log records (run, topic, partition, offset, value)
    # run -> acked sends outside the scope that no consumer read (unseen_acked).
    unseen_outside: DataFrame | None
    pruned: bool
    buckets: int = 0
    suspect: int = 0


def consumer_polls(history: DataFrame) -> DataFrame:
    """ok polls of the consumers (the final read excluded)."""
    return history.filter(
        (F.col("f") == "poll") & (F.col("type") == "ok") & (F.col("process") != FINAL_PROCESS)
    )


def consumer_records(history: DataFrame) -> DataFrame:
    """One row per record a consumer poll returned: the poll op plus offset and value."""
    recs = consumer_polls(history).select(
        *KEY,
        "process",
        "index",
        "time",
        F.col("offset").alias("fetch_offset"),
        "hw",
        F.explode("records").alias("r"),
    )
    return recs.select(
        *[c for c in recs.columns if c != "r"],
        F.col("r")[0].alias("offset"),
        F.col("r")[1].alias("value"),
    )


def _bucket(offset: str = "offset") -> Column:
    return F.shiftright(F.col(offset), BUCKET_BITS).alias("bucket")


def _digest_rows(df: DataFrame, src: Column, offset: str = "offset") -> DataFrame:
    h = F.xxhash64(F.col(offset), F.col("value"))
    return df.select(
        *KEY,
        _bucket(offset),
        src.alias("src"),
        (h.bitwiseAND(F.lit(_MASK32))).alias("lo"),
        F.shiftrightunsigned(h, 32).alias("hi"),
    )


def _everything(inputs: Inputs, final: FinalLog) -> Scope:
    return Scope(
        sends=inputs.history.filter(F.col("f") == "send"),
        reads=keep(consumer_records(inputs.history)),
        logs=inputs.logs,
        final=final.records,
        unseen_outside=None,
        pruned=False,
    )


def _suspects(digests: list, unsure: set[tuple]) -> tuple[list[tuple], dict, int]:
    """From the collected digests: the suspect buckets, the acked-send count of each
    clean bucket no consumer read, and the number of buckets."""
    by_bucket: dict[tuple, dict[str, tuple]] = {}
    for d in digests:
        by_bucket.setdefault((d.run, d.topic, d.partition, d.bucket), {})[d.src] = (
            d.n, d.lo, d.hi,
        )
    suspect, untouched = [], {}
    for b, srcs in by_bucket.items():
        final = srcs.get("F", (0, 0, 0))
        if b[:3] in unsure or any(s != "F" and v != final for s, v in srcs.items()):
            suspect.append(b)
        elif "A" in srcs and not any(s.startswith("R") for s in srcs):
            untouched[b] = srcs["A"][0]
    return suspect, untouched, len(by_bucket)


def _in_scope(df: DataFrame, buckets: DataFrame, values: DataFrame, offset: str) -> DataFrame:
    """Rows of df whose offset lies in a suspect bucket or whose value is a scope value."""
    return (
        df.withColumn("bucket", _bucket(offset))
        .join(F.broadcast(buckets), [*KEY, "bucket"], "left")
        .join(F.broadcast(values), [*KEY, "value"], "left")
        .filter(F.col("in_bucket") | F.col("in_values"))
        .drop("bucket", "in_bucket", "in_values")
    )


def scope(
    spark: SparkSession,
    inputs: Inputs,
    final: FinalLog,
    prune: bool | None = None,
    lines: int | None = None,
) -> Scope:
    """The records the anomaly checks read. ``prune``: True/False forces the
    digest comparison on/off; None decides by size (``lines`` of history)."""
    if prune is False or (prune is None and (lines or 0) < MIN_LINES):
        return _everything(inputs, final)
    h = inputs.history
    sends = h.filter(F.col("f") == "send")
    acked = sends.filter(F.col("type") == "ok")
    reads = consumer_records(h)
    digests = (
        reduce(
            DataFrame.union,
            [
                _digest_rows(final.records, F.lit("F")),
                _digest_rows(inputs.logs, F.concat(F.lit("L"), "broker")),
                _digest_rows(acked, F.lit("A")),
                _digest_rows(reads, F.concat(F.lit("R"), "process")),
            ]
        )
        .groupBy(*KEY, "bucket", "src")
        .agg(F.count("*").alias("n"), F.sum("lo").alias("lo"), F.sum("hi").alias("hi"))
        .collect()
    )
    suspect, untouched, total = _suspects(digests, final.unsure)
    if prune is None and len(suspect) > MAX_SUSPECT_SHARE * max(total, 1):
        return _everything(inputs, final)

    buckets = spark.createDataFrame(
        suspect, "run string, topic string, partition int, bucket long"
    ).withColumn("in_bucket", F.lit(True))
    in_bucket = F.broadcast(buckets)

    def suspect_values(df: DataFrame, offset: str = "offset") -> DataFrame:
        return df.select(*KEY, _bucket(offset), "value").join(in_bucket, [*KEY, "bucket"]).select(
            *KEY, "value"
        )

    twice = (
        final.records.groupBy(*KEY, "value")
        .count()
        .filter(F.col("count") > 1)
        .select(*KEY, "value")
    )
    failed = sends.filter(F.col("type") == "fail").select(*KEY, "value")
    values = (
        reduce(
            DataFrame.union,
            [
                suspect_values(final.records),
                suspect_values(inputs.logs),
                suspect_values(acked),
                suspect_values(reads),
                twice,
                failed,
            ]
        )
        .distinct()
        .withColumn("in_values", F.lit(True))
    )
    values = keep(values)
    scoped_sends = keep(sends.join(F.broadcast(values), [*KEY, "value"], "left_semi"))
    out = Scope(
        sends=scoped_sends,
        reads=keep(_in_scope(reads, buckets, values, "offset")),
        logs=keep(_in_scope(inputs.logs, buckets, values, "offset")),
        final=keep(_in_scope(final.records, buckets, values, "offset")),
        unseen_outside=None,
        pruned=True,
        buckets=total,
        suspect=len(suspect),
    )
    out.unseen_outside = _unseen_outside(spark, scoped_sends, untouched)
    return out


def _unseen_outside(spark: SparkSession, scoped_sends: DataFrame, untouched: dict) -> DataFrame:
    """Acked sends no consumer read among those outside the scope: all acked sends
    of clean buckets no consumer touched, less those the scope holds (the exact
    check counts those)."""
    inside = {
        (r.run, r.topic, r.partition, r.bucket): r.n
        for r in scoped_sends.filter(F.col("type") == "ok")
        .groupBy(*KEY, _bucket())
        .agg(F.count("*").alias("n"))
        .collect()
    }
    per_run: dict[str, int] = {}
    for b, n in untouched.items():
        per_run[b[0]] = per_run.get(b[0], 0) + n - inside.get(b, 0)
    return spark.createDataFrame(
        list(per_run.items()), "run string, unseen_outside long"
    )
