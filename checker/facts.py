"""The first query over the parsed inputs: one aggregation that fills their kept
copies (checker.load) and, on the way, counts what checker.scope and the
validation need.

Every history and log line becomes zero or more *facts*, each a source, an
offset bucket, and an (offset, value):

- ``A``: an acknowledged send, at its acked offset;
- ``R<process>``: a record a consumer poll returned; ``F``: one the final read returned;
- ``L<broker>``: a record of that replica's log;
- ``!h``/``!l``: a history/log line that failed a check, or a poll record that
  is not [offset, value].

Facts are summed per (run, partition, source, bucket) into digests: a count,
two sums of a 64-bit hash of (offset, value) and the highest offset (fixed-width
sums only: Spark's hash aggregation; a string in the buffer would make it sort).
Every source's records have an offset and a value; a replica log's also have an
epoch. When an anomaly kind compares a field only the logs have (divergence: the
epoch; checker.anomalies.base.Needs), the log digests get two more sums, of a hash
of every field compared, so that replicas differing in that field alone differ
in their digests too.
A source is grouped as its letter and its process or broker, two columns, so
that no string is built per record. Values acknowledged twice are found by
checker.sends.

A poll record also says whether it sits where an evenly climbing poll would put
it (offset = first offset + position): ``uneven`` digests mark the sources and
buckets where a poll skips, repeats or reorders offsets, so that the per-poll
ordering checks look inside those polls only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from sys import intern

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from contract import FINAL_PROCESS

_MASK32 = 0xFFFFFFFF

# Record fields an anomaly kind can compare (checker.anomalies.base.Needs).
OFFSET, VALUE, EPOCH = "offset", "value", "epoch"
SHARED_FIELDS = (OFFSET, VALUE)  # every source's records have them
LOG_FIELDS = (*SHARED_FIELDS, EPOCH)  # a replica log record's

ACKED = "A"
FINAL = "F"
READ = "R"
LOG = "L"
BAD_HISTORY = "!h"
BAD_LOG = "!l"


@dataclass(slots=True)  # one per offset bucket and source: 287k at 100M operations
class Digest:
    run: str
    topic: str | None
    partition: int | None
    src: str
    bucket: int | None
    n: int
    lo: int
    hi: int
    top: int | None
    uneven: bool
    # Sums of the hash of every compared field, for the sources with fields beyond
    # SHARED_FIELDS (the replica logs); None without such fields.
    xlo: int | None = None
    xhi: int | None = None


@dataclass
class Facts:
    digests: list[Digest] = field(default_factory=list)
    bad_history: bool = False
    bad_logs: bool = False
    runs: set[str] = field(default_factory=set)  # run URIs with any fact


def bad_record(r: Column) -> Column:
    """A poll record that is not [offset, value]."""
    return (F.size(r) != 2) | F.get(r, 0).isNull() | F.get(r, 1).isNull()


def _history_facts(kept: DataFrame, bits: int) -> DataFrame:
    """One row per fact of the history. Built with a native generator over plain
    arrays (a poll's records; an ack's [offset, value]), not a lambda per
    record: Spark interprets lambdas."""
    f, typ = F.col("f"), F.col("type")
    ack = (f == "send") & (typ == "ok")
    poll = (f == "poll") & (typ == "ok")
    problem = F.col("problem").isNotNull()
    pair = F.array(F.col("offset"), F.col("value"))
    arr = (
        F.when(problem, F.array(F.array().cast("array<bigint>")))
        .when(ack, F.array(pair))
        .otherwise(F.col("records"))
    )
    x = kept.filter(problem | ack | poll).select(
        "run", "topic", "partition", "process", "problem",
        F.when(ack, F.lit(True)).otherwise(F.lit(False)).alias("ack"),
        F.get(F.get("records", 0), 0).alias("first"),
        F.posexplode(arr).alias("pos", "r"),
    )
    r, pos = F.col("r"), F.col("pos")
    offset, value = F.get(r, 0), F.get(r, 1)
    src = (
        F.when(F.col("problem").isNotNull() | bad_record(r), F.lit(BAD_HISTORY))
        .when(F.col("ack"), F.lit(ACKED))
        .when(F.col("process") == FINAL_PROCESS, F.lit(FINAL))
        .otherwise(F.lit(READ))
    )
    return x.select(
        "run",
        "topic",
        "partition",
        src.alias("src"),
        # Whose reads (a consumer's): kept apart from ``src`` so that no string
        # is built per record; collect_facts joins them.
        F.when(src == READ, F.col("process")).alias("who"),
        F.shiftright(offset, bits).alias("bucket"),
        offset.alias("offset"),
        value.alias("value"),
        (~F.col("ack") & (offset != F.col("first") + pos)).alias("uneven"),
        F.lit(None).cast("long").alias("xh"),
    )


def _log_facts(kept: DataFrame, bits: int, extra: list[str]) -> DataFrame:
    """One row per replica log line; ``xh`` hashes the record with the ``extra``
    fields too (null without)."""
    bad = F.col("problem").isNotNull()
    xh = F.xxhash64(*SHARED_FIELDS, *extra) if extra else F.lit(None).cast("long")
    return kept.select(
        "run",
        "topic",
        "partition",
        F.when(bad, F.lit(BAD_LOG)).otherwise(F.lit(LOG)).alias("src"),
        F.when(~bad, F.col("broker")).alias("who"),
        F.shiftright("offset", bits).alias("bucket"),
        "offset",
        "value",
        F.lit(False).alias("uneven"),
        xh.alias("xh"),
    )


def _digests(facts: DataFrame) -> DataFrame:
    h, xh = F.xxhash64(*SHARED_FIELDS), F.col("xh")
    return facts.groupBy("run", "topic", "partition", "src", "who", "bucket").agg(
        F.count("*").alias("n"),
        F.sum(h.bitwiseAND(F.lit(_MASK32))).alias("lo"),
        F.sum(F.shiftrightunsigned(h, 32)).alias("hi"),
        F.max("offset").alias("top"),
        F.max("uneven").alias("uneven"),
        F.sum(xh.bitwiseAND(F.lit(_MASK32))).alias("xlo"),
        F.sum(F.shiftrightunsigned(xh, 32)).alias("xhi"),
    )


def collect_facts(history: DataFrame, logs: DataFrame, bits: int,
                  fields: Iterable[str] = LOG_FIELDS) -> Facts:
    """One job: fill the kept history and logs (each read once) and collect their
    facts. ``history``/``logs`` are checker.load's kept frames with ``problem``;
    ``fields``: the record fields the anomaly kinds compare (the digests hash them;
    by default every field)."""
    unknown = set(fields) - set(LOG_FIELDS)
    if unknown:
        raise ValueError(f"no source has record field(s) {sorted(unknown)}")
    extra = sorted(set(fields) - set(SHARED_FIELDS))
    facts = _history_facts(history, bits).unionByName(_log_facts(logs, bits, extra))
    rows = _digests(facts).collect()
    out = Facts()
    for r in rows:
        out.runs.add(r.run)
        if r.src == BAD_HISTORY:
            out.bad_history = True
            continue
        if r.src == BAD_LOG:
            out.bad_logs = True
            continue
        # The run, topic and source repeat on every bucket's row: one string each.
        out.digests.append(Digest(intern(r.run), r.topic and intern(r.topic), r.partition,
                                  intern(r.src + (r.who or "")), r.bucket, r.n,
                                  r.lo, r.hi, r.top, bool(r.uneven), r.xlo, r.xhi))
    return out

