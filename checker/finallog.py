"""The final committed log of each partition.

Preferred source: the records of the ``ok`` polls of process "final" (the final
read after healing). A run interrupted before its final read falls back to the
log of the replica whose state says it is leader (the highest leader epoch if
several claim it), up to that replica's HW. A partition with neither has no
known final log; checks that need one skip it and the summary says so.

Which partitions have a final read, who leads the others and how long each final
log is are small facts: they are collected and decided in Python, so no query
joins big data on the partition key alone (one task would get all of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from checker.kinds import FINAL_PROCESS
from checker.load import Inputs
from checker.spark import keep

KEY = ["run", "topic", "partition"]

FINAL_READ = "final-read"
LEADER_LOG = "leader-log-up-to-hw"
NONE = "none"

SOURCES_SCHEMA = (
    "run string, topic string, partition int, source string, broker string, "
    "length long, records long"
)


@dataclass
class FinalLog:
    # run, topic, partition, offset, value: every record the cluster finally committed.
    records: DataFrame
    # One dict per partition (SOURCES_SCHEMA): where its final log came from.
    sources: list[dict[str, Any]]
    # Partitions whose final log may hold an offset twice (overlapping final-read
    # pages, or a leader log taken as is): checked record by record, never skipped.
    unsure: set[tuple[str, str, int]]

    def sources_df(self, spark: SparkSession) -> DataFrame:
        return spark.createDataFrame(self.sources, SOURCES_SCHEMA)


def _final_polls(history: DataFrame) -> DataFrame:
    return history.filter(
        (F.col("process") == FINAL_PROCESS) & (F.col("f") == "poll") & (F.col("type") == "ok")
    )


def _leaders(states: list[Any]) -> dict[tuple, tuple[str, int]]:
    """(run, topic, partition) -> (broker, hw) of the replica in the leader role with
    the highest leader epoch (then the first broker by name)."""
    best: dict[tuple, Any] = {}
    for s in states:
        if s.role != "leader":
            continue
        k = (s.run, s.topic, s.partition)
        rank = (-(s.leader_epoch if s.leader_epoch is not None else -1), s.broker)
        if k not in best or rank < best[k][0]:
            best[k] = (rank, s.broker, s.hw)
    return {k: (b, hw) for k, (_, b, hw) in best.items()}


def final_log(spark: SparkSession, inputs: Inputs) -> FinalLog:
    """Build the final committed log of every partition (records checkpointed)."""
    h = inputs.history
    polls = _final_polls(h)
    # One row per final-read page: its offsets strictly increasing, and its range.
    offs = F.transform("records", lambda r: r[0])
    n = F.size("records")
    pages = polls.select(
        *KEY,
        F.array_min(offs).alias("lo"),
        F.array_max(offs).alias("hi"),
        F.when(
            n > 1,
            # records[i][0], not offs[i]: a lambda over a derived array would
            # rebuild the array for every element.
            F.exists(
                F.sequence(F.lit(1), n - 1),
                lambda i: F.col("records")[i][0] <= F.col("records")[i - 1][0],
            ),
        ).otherwise(F.lit(False)).alias("unordered"),
    ).collect()
    read_parts: set[tuple] = set()
    unsure: set[tuple] = set()
    ranges: dict[tuple, list[tuple[int, int]]] = {}
    for p in pages:
        k = (p.run, p.topic, p.partition)
        read_parts.add(k)
        if p.unordered:
            unsure.add(k)
        elif p.lo is not None:
            ranges.setdefault(k, []).append((p.lo, p.hi))
    for k, rs in ranges.items():
        rs.sort()
        if any(b[0] <= a[1] for a, b in zip(rs, rs[1:], strict=False)):
            unsure.add(k)

    leaders = _leaders(inputs.states.collect())
    read = polls.select(*KEY, F.explode("records").alias("r")).select(
        *KEY, F.col("r")[0].alias("offset"), F.col("r")[1].alias("value")
    )
    fallback = {k: v for k, v in leaders.items() if k not in read_parts}
    if fallback:
        upto = spark.createDataFrame(
            [(*k, b, hw) for k, (b, hw) in fallback.items()],
            "run string, topic string, partition int, leader_broker string, leader_hw long",
        )
        from_logs = (
            inputs.logs.join(F.broadcast(upto), KEY)
            .filter(
                (F.col("broker") == F.col("leader_broker"))
                & (F.col("offset") < F.col("leader_hw"))
            )
            .select(*KEY, "offset", "value")
        )
        unsure |= set(fallback)
        read = read.unionByName(from_logs)
    if unsure:
        # Rare: drop repeated (offset, value) pairs where the pages overlap.
        u = spark.createDataFrame(list(unsure), "run string, topic string, partition int")
        u = F.broadcast(u.withColumn("unsure", F.lit(True)))
        marked = read.join(u, KEY, "left")
        read = (
            marked.filter(F.col("unsure").isNull())
            .drop("unsure")
            .unionByName(marked.filter(F.col("unsure")).drop("unsure").distinct())
        )
    records = keep(read)

    # Every partition any input names, with its final log's length and size.
    universe = reduce(
        DataFrame.union,
        [
            records.select(*KEY, "offset", F.lit(1).alias("one")),
            inputs.logs.select(*KEY, F.lit(None).cast("long"), F.lit(0)),
            h.filter(F.col("f") == "send").select(*KEY, F.lit(None).cast("long"), F.lit(0)),
            inputs.states.select(*KEY, F.lit(None).cast("long"), F.lit(0)),
        ]
    )
    stats = universe.groupBy(*KEY).agg(
        (F.max("offset") + 1).alias("length"), F.sum("one").alias("records")
    )
    sources = []
    for r in stats.orderBy(*KEY).collect():
        k = (r.run, r.topic, r.partition)
        if k in read_parts:
            source, broker = FINAL_READ, None
        elif k in leaders:
            source, broker = LEADER_LOG, leaders[k][0]
        else:
            source, broker = NONE, None
        sources.append(
            {
                "run": r.run,
                "topic": r.topic,
                "partition": r.partition,
                "source": source,
                "broker": broker,
                "length": int(r.length or 0),
                "records": int(r.records or 0),
            }
        )
    return FinalLog(records, sources, unsure)


def with_epochs(final: DataFrame, logs: DataFrame) -> DataFrame:
    """Final records with the epoch the replica logs stamped on them (the highest
    where replicas disagree); the final read itself carries no epochs."""
    epochs = logs.groupBy(*KEY, "offset", "value").agg(F.max("epoch").alias("epoch"))
    return final.join(epochs, [*KEY, "offset", "value"], "left")
