"""The final committed log of each partition.

Preferred source: the records of the ``ok`` polls of process "final" (the final
read after healing). A run interrupted before its final read falls back to the
log of the replica whose state says it is leader (the highest leader epoch if
several claim it), up to that replica's HW. A partition with neither has no
known final log; checks that need one skip it and the summary says so.

Which partitions have a final read, who leads the others and how long each final
log is are small facts (checker.facts, checker.sparse): they are decided in
Python, so no query joins big data on the partition key alone (one task would
get all of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from checker.facts import FINAL, Digest
from checker.load import Inputs
from checker.spark import local_rows
from contract import FINAL_PROCESS

KEY = ["run", "topic", "partition"]

FINAL_READ = "final-read"
LEADER_LOG = "leader-log-up-to-hw"
NONE = "none"

PARTITIONS = "run string, topic string, partition int"
SOURCES_SCHEMA = (
    "run string, topic string, partition int, source string, broker string, "
    "length long, records long"
)


@dataclass
class FinalLog:
    # One dict per partition (SOURCES_SCHEMA): where its final log came from.
    sources: list[dict[str, Any]]
    # Partitions whose final log may hold an offset twice or out of order
    # (overlapping or uneven final-read pages, or a leader log taken as is):
    # checked record by record, never skipped, and deduplicated.
    unsure: set[tuple[str, str, int]]
    # Partitions without a final read -> (leader broker, its HW).
    fallback: dict[tuple, tuple[str, int]]

    def sources_df(self, spark: SparkSession) -> DataFrame:
        return local_rows(spark, self.sources, SOURCES_SCHEMA)

    def records(
        self, spark: SparkSession, history: DataFrame, logs: DataFrame, only: set | None = None
    ) -> DataFrame:
        """Every final record (run, topic, partition, offset, value) as a lazy
        DataFrame over the inputs (of the partitions in ``only``, if given)."""
        polls = final_polls(history)
        if only is not None:
            some = F.broadcast(local_rows(spark, list(only), PARTITIONS))
            polls = polls.join(some, KEY, "left_semi")
            logs = logs.join(some, KEY, "left_semi")
        read = polls.select(*KEY, F.explode("records").alias("r")).select(
            *KEY, F.col("r")[0].alias("offset"), F.col("r")[1].alias("value")
        )
        return self.assemble(spark, read, logs)

    def assemble(self, spark: SparkSession, read: DataFrame, logs: DataFrame) -> DataFrame:
        """The final records from the final read's records (``read``: KEY, offset,
        value) and, for partitions without one, the leader's log up to its HW."""
        if self.fallback:
            upto = local_rows(
                spark, [(*k, b, hw) for k, (b, hw) in self.fallback.items()],
                f"{PARTITIONS}, leader_broker string, leader_hw long",
            )
            from_logs = (
                logs.join(F.broadcast(upto), KEY)
                .filter(
                    (F.col("broker") == F.col("leader_broker"))
                    & (F.col("offset") < F.col("leader_hw"))
                )
                .select(*KEY, "offset", "value")
            )
            read = read.unionByName(from_logs)
        if not self.unsure:
            return read
        # Rare: drop repeated (offset, value) pairs where pages overlap.
        u = local_rows(spark, list(self.unsure), PARTITIONS)
        u = F.broadcast(u.withColumn("unsure", F.lit(True)))
        marked = read.join(u, KEY, "left")
        return (
            marked.filter(F.col("unsure").isNull())
            .drop("unsure")
            .unionByName(marked.filter(F.col("unsure")).drop("unsure").distinct())
        )


def final_polls(history: DataFrame) -> DataFrame:
    return history.filter(
        (F.col("process") == FINAL_PROCESS) & (F.col("f") == "poll") & (F.col("type") == "ok")
    )


def _leaders(states: list[dict[str, Any]]) -> dict[tuple, tuple[str, int]]:
    """(run, topic, partition) -> (broker, hw) of the replica in the leader role with
    the highest leader epoch (then the first broker by name)."""
    best: dict[tuple, Any] = {}
    for s in states:
        if s["role"] != "leader":
            continue
        k = (s["run"], s["topic"], s["partition"])
        epoch = s["leader_epoch"]
        rank = (-(epoch if epoch is not None else -1), s["broker"])
        if k not in best or rank < best[k][0]:
            best[k] = (rank, s["broker"], s["hw"])
    return {k: (b, hw) for k, (_, b, hw) in best.items()}


def final_log(
    spark: SparkSession,
    inputs: Inputs,
    digests: list[Digest],
    pages: list[Any],
) -> FinalLog:
    """Decide where each partition's final log comes from, and its length.

    ``digests`` are checker.facts' (F digests give lengths and counts); ``pages``
    the final read's ok polls from checker.sparse (first/last offset, size)."""
    read_parts: set[tuple] = set()
    unsure: set[tuple] = set()
    ranges: dict[tuple, list[tuple[int, int]]] = {}
    for p in pages:
        k = (p.run, p.topic, p.partition)
        read_parts.add(k)
        if p.n:
            ranges.setdefault(k, []).append((p.first_offset, p.last_offset))
    length: dict[tuple, int] = {}
    count: dict[tuple, int] = {}
    universe: set[tuple] = set()
    for d in digests:
        k = (d.run, d.topic, d.partition)
        universe.add(k)
        if d.src == FINAL:
            if d.uneven:  # a page that does not climb one offset at a time
                unsure.add(k)
            length[k] = max(length.get(k, 0), d.top + 1)
            count[k] = count.get(k, 0) + d.n
    for k, rs in ranges.items():
        rs.sort()
        if any(b[0] <= a[1] for a, b in zip(rs, rs[1:], strict=False)):
            unsure.add(k)

    states = inputs.state_rows  # no job: the driver read them (checker.rundir)
    leaders = _leaders(states)
    fallback = {k: v for k, v in leaders.items() if k not in read_parts}
    unsure |= set(fallback)
    universe |= read_parts | set(leaders)
    universe |= {(s["run"], s["topic"], s["partition"]) for s in states}
    fl = FinalLog([], unsure, fallback)
    if unsure:
        # Rare: count the deduplicated records of these partitions exactly.
        exact = (
            fl.records(spark, inputs.history, inputs.logs, only=unsure)
            .groupBy(*KEY)
            .agg((F.max("offset") + 1).alias("length"), F.count("*").alias("records"))
            .collect()
        )
        for k in unsure:
            length.pop(k, None)
            count.pop(k, None)
        for r in exact:
            k = (r.run, r.topic, r.partition)
            length[k], count[k] = r.length, r.records
    for k in sorted(universe, key=lambda k: (k[0], k[1] or "", k[2] if k[2] is not None else -1)):
        if k in read_parts:
            source, broker = FINAL_READ, None
        elif k in leaders:
            source, broker = LEADER_LOG, leaders[k][0]
        else:
            source, broker = NONE, None
        fl.sources.append(
            {
                "run": k[0],
                "topic": k[1],
                "partition": k[2],
                "source": source,
                "broker": broker,
                "length": int(length.get(k) or 0),
                "records": int(count.get(k) or 0),
            }
        )
    return fl


def with_epochs(final: DataFrame, logs: DataFrame) -> DataFrame:
    """Final records with the epoch the replica logs stamped on them (the highest
    where replicas disagree); the final read itself carries no epochs."""
    epochs = logs.groupBy(*KEY, "offset", "value").agg(F.max("epoch").alias("epoch"))
    return final.join(epochs, [*KEY, "offset", "value"], "left")
