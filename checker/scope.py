"""Which records the value- and offset-keyed anomaly checks need to look at.

Most of a long history agrees with itself: every replica holds the final log,
every send was acked where the final log has its value, every consumer read the
final log. Joining all of it record by record costs a dozen shuffles of the
whole input. Instead the checker does what anti-entropy repair does (Dynamo,
Cassandra): it compares digests first.

Offsets are cut into buckets of 2**bits (bucket_bits: 2**10 offsets, wider for a
batch of more than BUCKET_BYTES of history, so that the driver's digests do not
grow with the batch). For each bucket, every source
-- the final log, each replica's log, the acked sends (at their acked offset),
each consumer's reads -- gets a digest (checker.facts: the count and two sums
of a 64-bit hash of (offset, value), a multiset hash computed while the inputs
are first read; the replica logs' also hash the other fields some anomaly kind
compares, the epoch). A bucket is *suspect* when a source that has records
there does not match the final log's digest, the replica logs there do not
match each other's, or the final log has records there and no ack does (two
different record sets share a digest with odds of about 2**-64; the inputs are
not adversarial). Outside suspect buckets every replica, ack and read equals
the final log record for record, in every field a kind compares, and every
final record was acked once there, so no anomaly of those kinds can sit there
-- except through a value that also appears elsewhere, or where a kind looks
beyond its own records. Hence the scope: every record in a suspect bucket, and
the rows the kinds declare they need (checker.anomalies.base.Needs): every
record of a value that a client op's record there names (an ack or a poll
record), or that was acked twice, or sent and failed, and the final log where a
consumer jumped ahead. (A value that only a replica's log names there is,
everywhere else, one record that every source agrees on.) The anomaly kinds run
unchanged on that scope and find exactly what they would on everything
(tests/test_checker_scope.py compares the two on generated runs).

It takes two passes over the history -- the records in the suspect buckets,
then the records of the values they name -- and one over the logs, which takes
both at once.

When most buckets are suspect, or the input is small, the scope is simply
everything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from checker.facts import ACKED, FINAL, LOG, READ, Digest, Facts
from checker.finallog import KEY, PARTITIONS, FinalLog
from checker.load import Inputs
from checker.spark import keep, local_rows
from checker.sparse import uneven_sources
from contract import FINAL_PROCESS

BUCKET_BITS = 10  # the narrowest buckets: 1024 offsets
# A batch with more history than this gets buckets twice as wide per doubling:
# the driver collects a digest per source and bucket (28,734 at 10M operations,
# 1.6 GB of history), which would otherwise grow with the batch.
BUCKET_BYTES = 2 << 30
# Below this much history the digests cost more than they save (~200k lines).
MIN_BYTES = 32 << 20
# Above this share of suspect buckets, check everything.
MAX_SUSPECT_SHARE = 0.25
# A scope of at most this many rows is read as one partition and broadcast to the
# anomaly queries' joins: Spark cannot size a checkpoint, so it would shuffle and
# sort both sides, and every stage would run a task per input partition (a few
# hundred tasks for a few thousand rows).
SMALL_ROWS = 1_000_000
# The most values or buckets a set test (_maybe_in) lists.
MAX_IN = 50_000

_BUCKETS = f"{PARTITIONS}, bucket long"
_VALUES = f"{PARTITIONS}, value long"


@dataclass
class Scope:
    sends: DataFrame  # history rows of f=send (invoke and completions)
    reads: DataFrame  # one row per record a consumer poll returned (consumer_poll_records)
    logs: DataFrame  # replica log records
    final: DataFrame  # final log records (run, topic, partition, offset, value)
    # run -> acked sends outside the scope that no consumer read (unseen_acked).
    unseen_outside: DataFrame | None
    pruned: bool
    buckets: int = 0
    suspect: int = 0
    small: bool = False  # at most SMALL_ROWS rows

    def narrow(self, df: DataFrame) -> DataFrame:
        """``df`` (derived from the scope) as one partition with a broadcast hint,
        if the scope is small."""
        return df.coalesce(1).hint("broadcast") if self.small else df


def consumer_polls(history: DataFrame) -> DataFrame:
    """ok polls of the consumers (the final read excluded)."""
    return history.filter(
        (F.col("f") == "poll") & (F.col("type") == "ok") & (F.col("process") != FINAL_PROCESS)
    )


def _poll_records(polls: DataFrame) -> DataFrame:
    recs = polls.select(
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


def consumer_poll_records(history: DataFrame) -> DataFrame:
    """One row per record a consumer poll of ``history`` returned: the poll op plus
    offset and value."""
    return _poll_records(consumer_polls(history))


def bucket_bits(history_bytes: int) -> int:
    """The offset buckets' width (2**bits offsets) for a batch of ``history_bytes``."""
    bits = BUCKET_BITS
    while history_bytes > BUCKET_BYTES << (bits - BUCKET_BITS):
        bits += 1
    return bits


def _bucket(bits: int, offset: str = "offset") -> Column:
    return F.shiftright(F.col(offset), bits).alias("bucket")


def _everything(spark: SparkSession, inputs: Inputs, final: FinalLog) -> Scope:
    return Scope(
        sends=inputs.history.filter(F.col("f") == "send"),
        reads=keep(consumer_poll_records(inputs.history)),
        logs=inputs.logs,
        final=keep(final.records(spark, inputs.history, inputs.logs)),
        unseen_outside=None,
        pruned=False,
    )


@dataclass
class _Buckets:
    """What the digests say about the buckets (see _suspects)."""

    suspect: set[tuple]
    # Acked-send count of each clean bucket no consumer read.
    untouched: dict[tuple, int]
    # Clean buckets a reader (a consumer or the final read) holds records in
    # and no replica log does.
    unlogged: set[tuple]
    total: int


def _suspects(facts: Facts, unsure: set[tuple]) -> _Buckets:
    by_bucket: dict[tuple, dict[str, Digest]] = {}
    for d in facts.digests:
        by_bucket.setdefault((d.run, d.topic, d.partition, d.bucket), {})[d.src] = d
    out = _Buckets(set(), {}, set(), len(by_bucket))
    for b, srcs in by_bucket.items():
        sums = {s: (d.n, d.lo, d.hi) for s, d in srcs.items()}
        final = sums.get(FINAL, (0, 0, 0))
        read = any(s.startswith(READ) for s in srcs)
        logs = [d for s, d in srcs.items() if s.startswith(LOG)]
        if (
            b[:3] in unsure
            or (FINAL in srcs and ACKED not in srcs)
            or any(s != FINAL and v != final for s, v in sums.items())
            # Fields only the logs have (the epoch): compared between the logs.
            or len({(d.xlo, d.xhi) for d in logs}) > 1
        ):
            out.suspect.add(b)
            continue
        if ACKED in srcs and not read:
            out.untouched[b] = srcs[ACKED].n
        if (read or FINAL in srcs) and not logs:
            out.unlogged.add(b)
    return out


def _range_buckets(ranges: DataFrame | None, bits: int) -> set[tuple]:
    """The buckets of offset ranges (run, topic, partition, lo, hi): found in
    Spark, so the driver holds at most one row per bucket, however many ranges."""
    if ranges is None:
        return set()
    b = F.explode(F.sequence(F.shiftright("lo", bits), F.shiftright("hi", bits)))
    return {tuple(r) for r in ranges.select(*KEY, b.alias("bucket")).distinct().collect()}


def _records(history: DataFrame) -> DataFrame:
    """Sends and ok-poll records in one shape: one row per send (``rec`` = its
    [acked offset, value]) and per poll record (``rec`` = the record)."""
    f, typ = F.col("f"), F.col("type")
    poll = (f == "poll") & (typ == "ok")
    rec = F.when(poll, F.col("records")).otherwise(F.array(F.array("offset", "value")))
    return history.filter((f == "send") | poll).select(
        *[c for c in history.columns if c != "records"], F.explode(rec).alias("rec")
    ).select(
        "*", F.col("rec")[0].alias("rec_offset"), F.col("rec")[1].alias("rec_value")
    ).drop("rec")


def _mark(df: DataFrame, buckets: DataFrame, offset: str, bits: int) -> DataFrame:
    """df plus ``in_bucket`` (true where its offset is in a listed bucket)."""
    return df.withColumn("bucket", _bucket(bits, offset)).join(
        F.broadcast(buckets), [*KEY, "bucket"], "left"
    )


def _touching(spark: SparkSession, history: DataFrame, listed: set[tuple], facts: Facts,
              sends: Column, bits: int) -> DataFrame:
    """The send lines that pass ``sends`` and the ok polls that can hold a record in
    a listed bucket: those whose first-to-last offset range meets one (a poll that
    climbs unevenly -- checker.facts -- is always kept: its records may lie
    anywhere). One scan of ``history``."""
    per_part: dict[tuple, list[int]] = {}
    for *k, b in listed:
        per_part.setdefault(tuple(k), []).append(b)
    parts = local_rows(spark, [(*k, sorted(bs)) for k, bs in per_part.items()],
                       f"{PARTITIONS}, listed array<bigint>")
    odd = local_rows(
        spark, list(uneven_sources(facts.digests)), f"{PARTITIONS}, process string"
    ).withColumn("odd", F.lit(True))
    f, typ = F.col("f"), F.col("type")
    poll = (f == "poll") & (typ == "ok")
    lo = F.shiftright(F.get(F.get("records", 0), 0), bits)
    hi = F.shiftright(F.get(F.try_element_at("records", F.lit(-1)), 0), bits)
    # Null (dropped) for a poll of a partition without a listed bucket.
    hit = F.exists("listed", lambda b: (b >= lo) & (b <= hi))
    return (
        history.filter(poll | ((f == "send") & sends))
        .join(F.broadcast(parts), KEY, "left")
        .join(F.broadcast(odd), [*KEY, "process"], "left")
        .filter(~poll | F.col("odd").isNotNull() | hit)
        .drop("listed", "odd")
    )


def _maybe_in(col: str, keys: Iterable[tuple]) -> Column:
    """True where the integer SQL expression ``col`` equals the last field of one
    of ``keys`` ((run, topic, partition, x) tuples): a hash-set test that drops
    most rows before any join. A row of another partition with the same x
    passes too, so an exact test must follow. SQL text, as Column.isin makes a
    JVM call per element; beyond MAX_IN elements (a plan that large costs more
    than it saves) every row passes."""
    xs = sorted({int(k[-1]) for k in keys})
    if len(xs) > MAX_IN:
        return F.lit(True)
    return F.expr(f"{col} IN ({','.join(map(str, xs))})") if xs else F.lit(False)


def few(df: DataFrame, most: int = MAX_IN) -> list[tuple] | None:
    """The rows of ``df`` if it has at most ``most``, else None: the driver reads
    at most most + 1 of them, however large ``df`` is."""
    rows = [tuple(r) for r in df.limit(most + 1).collect()]
    return rows if len(rows) <= most else None


def at_most(df: DataFrame, most: int = MAX_IN) -> bool:
    """Whether ``df`` has at most ``most`` rows (counting no further)."""
    return df.limit(most + 1).count() <= most


def hints_off(spark: SparkSession) -> bool:
    """Whether the session ignores join hints (checker.spark.SMALL_BATCH): then a
    count made to choose a broadcast is a job for nothing."""
    return spark.conf.get("spark.sql.optimizer.disableHints", "false") == "true"


def broadcast_if(df: DataFrame, small: bool) -> DataFrame:
    """``df`` with a broadcast hint if it is known to be ``small`` (at most MAX_IN
    rows); a table of unbounded size is joined by shuffle instead."""
    return F.broadcast(df) if small else df


def _of_values(df: DataFrame, values: DataFrame, value: str, small: bool) -> DataFrame:
    """The rows of ``df`` whose ``value`` column is one of ``values``."""
    return df.join(broadcast_if(values.withColumnRenamed("value", value), small), [*KEY, value],
                   "left_semi")


def _outside(df: DataFrame, buckets: DataFrame, offset: str, bits: int) -> DataFrame:
    """The rows of ``df`` outside the listed buckets, kept."""
    return keep(_mark(df, buckets, offset, bits).filter(F.col("in_bucket").isNull())
                .drop("bucket", "in_bucket"))


def _split(spark: SparkSession, recs: DataFrame, logs: DataFrame, final: FinalLog,
           ) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame]:
    """Kept records of both passes -> (sends, reads, final records, logs)."""
    poll = F.col("f") == "poll"
    sends = recs.filter(~poll).drop("rec_offset", "rec_value")
    polls = recs.filter(poll)
    reads = polls.filter(F.col("process") != FINAL_PROCESS).select(
        *KEY, "process", "index", "time", F.col("offset").alias("fetch_offset"), "hw",
        F.col("rec_offset").alias("offset"), F.col("rec_value").alias("value"),
    )
    read = polls.filter(F.col("process") == FINAL_PROCESS).select(
        *KEY, F.col("rec_offset").alias("offset"), F.col("rec_value").alias("value")
    )
    return sends, reads, final.assemble(spark, read, logs), logs


def scope(
    spark: SparkSession,
    inputs: Inputs,
    facts: Facts,
    final: FinalLog,
    by_value: bool,
    values: DataFrame | None,
    final_ranges: DataFrame | None,
    prune: bool | None = None,
    history_bytes: int = 0,
    bits: int = BUCKET_BITS,
) -> Scope:
    """The records the anomaly checks read. ``prune``: True/False forces the
    digest comparison on/off; None decides by size (``history_bytes``). What
    the anomaly kinds declare they need (checker.anomalies.base.Needs):
    ``by_value``, the records of the values named in the suspect buckets;
    ``values`` (run, topic, partition, value); ``final_ranges`` (run, topic,
    partition, lo, hi); ``bits``: the digests' bucket width (bucket_bits)."""
    if prune is False or (prune is None and history_bytes < MIN_BYTES):
        return _everything(spark, inputs, final)
    bk = _suspects(facts, final.unsure)
    if prune is None and len(bk.suspect) > MAX_SUSPECT_SHARE * max(bk.total, 1):
        return _everything(spark, inputs, final)
    listed = bk.suspect | _range_buckets(final_ranges, bits)
    buckets = local_rows(spark, list(listed), _BUCKETS).withColumn("in_bucket", F.lit(True))

    # Pass 1: every record of the history in a listed bucket, of the acks (half
    # the history, few of them there) and the polls that can hold one.
    bucket_sql = f"shiftright(offset, {bits})"
    acks_in = (F.col("type") == "ok") & _maybe_in(bucket_sql, listed)
    first = keep(_mark(_records(_touching(spark, inputs.history, listed, facts, acks_in, bits)),
                       buckets, "rec_offset", bits)
                 .filter(F.col("in_bucket")).drop("bucket", "in_bucket"))
    # The named values stay in Spark (a chaos run can fail or resend millions of
    # sends); the driver reads them only when they are few, for a set test.
    named = [values] if values is not None else []
    if by_value:
        named.append(first.filter((F.col("f") == "poll") | (F.col("type") == "ok"))
                     .select(*KEY, F.col("rec_value").alias("value")))
    values = (keep(reduce(DataFrame.unionByName, named).distinct()) if named
              else local_rows(spark, [], _VALUES))
    listed_values = few(values)
    small = listed_values is not None
    # The logs in one pass: the records in a listed bucket and those of the named
    # values. A value only a replica's log names there needs nothing more: outside
    # the listed buckets its records are one acked, committed and read record
    # that every source agrees on, and no value-keyed check can flag it.
    value_in = _maybe_in("value", listed_values) if small else F.lit(True)
    marked = keep(_mark(inputs.logs.filter(_maybe_in(bucket_sql, listed) | value_in), buckets,
                        "offset", bits)
                  .join(broadcast_if(values.withColumn("named", F.lit(True)), small),
                        [*KEY, "value"], "left")
                  .filter(F.col("in_bucket") | F.col("named"))
                  .drop("named"))
    logs_all = marked.drop("bucket", "in_bucket")

    # Pass 2: the history's records of the named values outside the listed
    # buckets: all their sends, and the polls that can hold one. A reader's
    # record outside the listed buckets sits in a clean bucket, where every
    # replica log holding records equals the reader's, so it is at an offset
    # where a log holds that value (the pass over the logs found it), unless
    # no log holds records there (unlogged).
    logged = {tuple(r) for r in marked.filter(F.col("in_bucket").isNull())
              .select(*KEY, "bucket").distinct().collect()}
    second = _touching(spark, inputs.history, logged | bk.unlogged, facts, value_in, bits)
    recs_all = first.unionByName(_outside(
        _of_values(_records(second), values, "rec_value", small), buckets, "rec_offset", bits))
    scoped_sends, reads, final_records, logs = _split(spark, recs_all, logs_all, final)
    out = Scope(
        sends=scoped_sends,
        reads=reads,
        logs=logs,
        final=keep(final_records),
        unseen_outside=None,
        pruned=True,
        buckets=bk.total,
        suspect=len(bk.suspect),
        small=recs_all.count() + logs_all.count() <= SMALL_ROWS,
    )
    out.sends, out.reads, out.logs, out.final = (
        out.narrow(df) for df in (out.sends, out.reads, out.logs, out.final))
    out.unseen_outside = _unseen_outside(spark, scoped_sends, bk.untouched, bits)
    return out


def _unseen_outside(spark: SparkSession, scoped_sends: DataFrame, untouched: dict,
                    bits: int) -> DataFrame:
    """Acked sends no consumer read among those outside the scope: all acked sends
    of clean buckets no consumer touched, less those the scope holds (the exact
    check counts those)."""
    inside = {
        (r.run, r.topic, r.partition, r.bucket): r.n
        for r in scoped_sends.filter(F.col("type") == "ok")
        .groupBy(*KEY, _bucket(bits))
        .agg(F.count("*").alias("n"))
        .collect()
    }
    per_run: dict[str, int] = {}
    for b, n in untouched.items():
        per_run[b[0]] = per_run.get(b[0], 0) + n - inside.get(b, 0)
    return local_rows(spark, list(per_run.items()), "run string, unseen_outside long")
