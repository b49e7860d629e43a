"""The report's replica grid computed by the check (checker.gridrows defines it),
per run and partition, so that rendering a report reads neither the replica logs
nor the history.

A small run's inputs -- its log records, acknowledged sends and final reads --
are collected and reduced in the driver. A big run's (history over BIG_RUN_BYTES)
are not collected: a few aggregations in Spark give each partition's Shape (its
top offset, epochs, where the replicas differ -- looked for only in the offset
buckets whose log digests differ -- where lost values sit, the ghosts), the
driver plans the rows as for a small run, and the records at the planned
offsets, a few thousand a partition, are fetched. The anomalies (lost values,
the offsets they name) are the check's listed ones, as the report lists them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checker.facts import LOG, Digest
from checker.gridrows import (
    EDGE,
    MAX_GHOSTS,
    Plan,
    Shape,
    add_ack,
    anomaly_offsets,
    grid,
    marked_needed,
    partition_rows,
    plan,
)
from checker.spark import local_rows
from contract import FINAL_PROCESS

# A run with more history than this has its grid shaped and fetched in Spark
# (seven small jobs); below it, collecting its rows whole takes three and little
# memory. checker.reportevents uses the same bound for its Spark paths.
BIG_RUN_BYTES = 4 << 20
# (run, "topic/partition") -> the values lost there, the offsets the anomalies name
Marks = dict[tuple[str, str], tuple[set[Any], set[int]]]


def marks(anomalies: list[dict[str, Any]]) -> dict[str, tuple[set[Any], set[int]]]:
    """partition -> (the lost writes' values, the offsets the anomalies name), as
    reports.grid.build reads them from anomalies.json."""
    out: dict[str, tuple[set[Any], set[int]]] = {}
    for a in anomalies:
        lost, must = out.setdefault(f"{a.get('topic')}/{a.get('partition')}", (set(), set()))
        w = a.get("witness")
        if a["kind"] == "lost-write":
            lost.add(w.get("value"))
        elif a["kind"] == "divergence":
            must.update(o["offset"] for o in w["offsets"])
        must.update(anomaly_offsets(w))
    return out


def _sends(history: DataFrame) -> DataFrame:
    return history.filter((F.col("f") == "send") & (F.col("type") == "ok")
                          & F.col("offset").isNotNull())


def _finals(history: DataFrame) -> DataFrame:
    return history.filter((F.col("process") == FINAL_PROCESS) & (F.col("f") == "poll")
                          & (F.col("type") == "ok"))


def grids(history: DataFrame, sparse: DataFrame, logs: DataFrame, runs: dict[str, int],
          marked: Marks,
          candidates: set[tuple[str, str, int, int]], bits: int
          ) -> dict[str, dict[str, dict[str, Any]]]:
    """run -> partition -> its grid (checker.gridrows.partition_rows), for ``runs``
    (URI -> history bytes); ``sparse``: checker.sparse's rows; ``candidates``:
    differing_buckets of the log digests, offset buckets of 2**``bits``."""
    small = sorted(u for u, n in runs.items() if n <= BIG_RUN_BYTES)
    big = sorted(u for u in runs if u not in small)
    out: dict[str, dict[str, dict[str, Any]]] = {u: {} for u in runs}
    if small:
        _collected(history, logs, small, marked, out)
    if big:
        _in_spark(history, sparse, logs, big, marked, candidates, bits, out)
    return out


def _collected(history: DataFrame, logs: DataFrame, runs: list[str], marked: Marks,
               out: dict[str, dict[str, dict[str, Any]]]) -> None:
    mine = F.col("run").isin(runs)
    by_part: dict[tuple[str, str], dict[str, dict[int, tuple[Any, Any]]]] = {}
    for r in logs.filter(mine).select("run", "broker", "topic", "partition", "offset",
                                      "epoch", "value").collect():
        by_part.setdefault((r.run, f"{r.topic}/{r.partition}"), {}).setdefault(
            r.broker, {})[r.offset] = (r.epoch, r.value)
    acked: dict[tuple[str, str], dict[int, list[Any]]] = {}
    for r in sorted(_sends(history).filter(mine).select(
            "run", "topic", "partition", "offset", "value", "index").collect(),
            key=lambda r: r["index"]):
        add_ack(acked.setdefault((r.run, f"{r.topic}/{r.partition}"), {}), r.offset, r.value)
    finals: dict[tuple[str, str], dict[int, Any]] = {}
    for r in sorted(_finals(history).filter(mine).select(
            "run", "topic", "partition", "records", "index").collect(), key=lambda r: r["index"]):
        final = finals.setdefault((r.run, f"{r.topic}/{r.partition}"), {})
        for off, val in r.records or []:
            final[int(off)] = val
    for (u, part), by_broker in by_part.items():
        lost, must = marked.get((u, part), (set(), set()))
        out[u][part] = partition_rows(by_broker, finals.get((u, part), {}),
                                      acked.get((u, part), {}), lost, must)


def differing_buckets(digests: Iterable[Digest]) -> set[tuple[str, str, int, int]]:
    """(run, topic, partition, bucket) where two replicas' logs may hold different
    records at an offset: their digests differ (checker.facts). A bucket only one
    replica has, or where every replica's digest is the same, has no marked row.
    Without the epoch in the log digests (no anomaly kind compares it) every
    bucket two replicas have is a candidate."""
    by: dict[tuple[str, str, int, int], list[tuple[Any, ...]]] = {}
    for d in digests:
        if d.src.startswith(LOG) and d.bucket is not None:
            by.setdefault((d.run, d.topic, d.partition, d.bucket), []).append(
                (d.n, d.lo, d.hi, d.xlo, d.xhi))
    return {k for k, ds in by.items()
            if len(ds) > 1 and (len(set(ds)) > 1 or any(x[3] is None for x in ds))}


def _small_df(history: DataFrame, rows: list[tuple[Any, ...]], schema: str) -> DataFrame:
    """A table of the driver's ``rows``, to be broadcast into a join."""
    return F.broadcast(local_rows(history.sparkSession, rows, schema))


def _marks_of(marked: Marks, k: tuple[str, str, int]) -> tuple[set[Any], set[int]]:
    """The (lost values, anomaly offsets) of a (run, topic, partition)."""
    return marked.get((k[0], f"{k[1]}/{k[2]}"), (set(), set()))


def _topic_partition(part: str) -> list[tuple[str, int]]:
    """A "topic/partition" key as [(topic, partition)]; [] for one without a
    partition number (a topic has no '/': Kafka's names are [a-zA-Z0-9._-])."""
    topic, _, n = part.rpartition("/")
    return [(topic, int(n))] if n.isdigit() else []


_KEY = ["run", "topic", "partition"]
_PART = "run string, topic string, partition int"


def _in_spark(history: DataFrame, sparse: DataFrame, logs: DataFrame, runs: list[str],
              marked: Marks, candidates: set[tuple[str, str, int, int]], bits: int,
              out: dict[str, dict[str, dict[str, Any]]]) -> None:
    """A big run's grids: a few aggregations in Spark give each partition's Shape,
    the driver plans its rows (checker.gridrows.plan) and one join per input fetches
    the records at the planned offsets -- a few thousand per partition. Two passes
    over the history, four over the logs (the smaller input)."""
    mine = F.col("run").isin(runs)
    lg = logs.filter(mine)
    off = F.col("offset")
    lost_rows = [(u, *tp, v, True) for (u, part), (lost, _) in marked.items() if u in runs
                 for tp in _topic_partition(part)
                 for v in lost if isinstance(v, int) and not isinstance(v, bool)]
    lostv = _small_df(history, lost_rows, _PART + ", value long, lost boolean")
    # One pass over the logs: each broker's top offset per epoch, and the offsets
    # where a lost value sits (a group of its own per such offset).
    at_lost = F.lit(None).cast("long")
    shaped = lg
    if lost_rows:
        shaped = lg.join(lostv, [*_KEY, "value"], "left")
        at_lost = F.when(F.col("lost").isNotNull() & (off >= 0), off)
    parts: dict[tuple[str, str, int], list[Any]] = {}  # -> [top, epochs, brokers]
    lost_here: dict[tuple[str, str, int], set[int]] = {}
    for r in (shaped.groupBy(*_KEY, "broker", "epoch", at_lost.alias("lost_at"))
              .agg(F.max(off).alias("top")).collect()):
        k = (r.run, r.topic, r.partition)
        p = parts.setdefault(k, [-1, set(), set()])
        p[0] = max(p[0], r.top)
        p[2].add(r.broker)
        if r.epoch is not None and r.top >= 0:
            p[1].add(r.epoch)
        if r.lost_at is not None:
            lost_here.setdefault(k, set()).add(r.lost_at)
    if not parts:
        return
    # The final read's highest offset, from checker.sparse's summaries: a poll's last
    # record's, or where it does not climb evenly its records' (kept there).
    highest = F.coalesce(F.array_max(F.transform("records", lambda rec: rec[0])),
                         F.col("last_offset"))
    for r in _finals(sparse).filter(mine).groupBy(*_KEY).agg(F.max(highest)).collect():
        p = parts.get((r[0], r[1], r[2]))
        if p is not None and r[3] is not None:
            p[0] = max(p[0], r[3])
    tops = _small_df(history, [(*k, p[0]) for k, p in parts.items()], _PART + ", top long")
    by_part = Window.partitionBy(*_KEY)
    lost_at: dict[tuple[str, str, int], set[int]] = {}
    ghosts: dict[tuple[str, str, int], list[int]] = {}
    # The acknowledged sends of a lost value, and the ghosts: one pass.
    ghost = off > F.col("top")
    for r in (_sends(history).filter(mine).join(tops, _KEY).join(lostv, [*_KEY, "value"], "left")
              .filter(F.col("lost").isNotNull() | ghost)
              .select(*_KEY, "offset", F.col("lost").isNotNull().alias("lost"),
                      ghost.alias("ghost"))
              .distinct()
              .withColumn("k", F.row_number().over(by_part.orderBy(F.col("ghost").desc(), off)))
              .filter(F.col("lost") | (F.col("ghost") & (F.col("k") <= MAX_GHOSTS))).collect()):
        k = (r.run, r.topic, r.partition)
        if r.lost:
            lost_at.setdefault(k, set()).add(r.offset)
        if r.ghost and r.k <= MAX_GHOSTS:
            ghosts.setdefault(k, []).append(r.offset)
    differ: dict[tuple[str, str, int], set[int]] = {}
    cand = [c for c in candidates if c[:3] in parts]
    if cand:
        need = marked_needed(max((len(v) for v in lost_here.values()), default=0))
        for r in (lg.filter(off >= 0).withColumn("bucket", F.shiftright(off, bits))
                  .join(_small_df(history, cand, _PART + ", bucket long"),
                        [*_KEY, "bucket"], "left_semi")
                  .groupBy(*_KEY, "offset")
                  .agg(F.size(F.collect_set(F.struct("epoch", "value"))).alias("records"))
                  .filter(F.col("records") > 1)
                  .withColumn("lo", F.row_number().over(by_part.orderBy("offset")))
                  .withColumn("hi", F.row_number().over(by_part.orderBy(off.desc())))
                  .filter((F.col("lo") <= need) | (F.col("hi") <= EDGE))
                  .select(*_KEY, "offset").collect()):
            differ.setdefault((r.run, r.topic, r.partition), set()).add(r.offset)
    plans: dict[tuple[str, str, int], tuple[Shape, Plan]] = {}
    for k, (top, epochs, brokers) in parts.items():
        s = Shape(sorted(brokers), top, epochs, differ.get(k, set()), lost_here.get(k, set()),
                  lost_at.get(k, set()), sorted(ghosts.get(k, [])))
        plans[k] = (s, plan(s, _marks_of(marked, k)[1]))
    _fetch(history, lg, runs, plans, out)


def _fetch(history: DataFrame, lg: DataFrame, runs: list[str],
           plans: dict[tuple[str, str, int], tuple[Shape, Plan]],
           out: dict[str, dict[str, dict[str, Any]]]) -> None:
    """The records at the planned offsets (a join with them: one pass over the logs,
    one over the history for the sends and the final reads), and the grids."""
    at = [*_KEY, "offset"]
    want = _small_df(history, [(*k, o) for k, (s, p) in plans.items() for o in p.offsets(s)],
                     _PART + ", offset long")
    rec: dict[tuple[str, str, int], dict[str, dict[int, tuple[Any, Any]]]] = {}
    for r in lg.join(want, at, "left_semi").select(*at, "broker", "epoch", "value").collect():
        rec.setdefault((r.run, r.topic, r.partition), {}).setdefault(
            r.broker, {})[r.offset] = (r.epoch, r.value)
    f, typ = F.col("f"), F.col("type")
    send = (f == "send") & (typ == "ok") & F.col("offset").isNotNull()
    final = (F.col("process") == FINAL_PROCESS) & (f == "poll") & (typ == "ok")
    # A send is one [offset, value] at position 0; a final read, its records.
    hist = (history.filter(F.col("run").isin(runs) & (send | final))
            .select(*_KEY, "index", send.alias("send"),
                    F.posexplode(F.when(send, F.array(F.array("offset", "value")))
                                 .otherwise(F.col("records"))).alias("pos", "rec"))
            .select(*_KEY, "index", "send", "pos", F.col("rec")[0].alias("offset"),
                    F.col("rec")[1].alias("value"))
            .join(want, at, "left_semi").collect())
    acked: dict[tuple[str, str, int], dict[int, list[Any]]] = {}
    finals: dict[tuple[str, str, int], dict[int, Any]] = {}
    for r in sorted(hist, key=lambda r: (r["index"], r.pos)):
        k = (r.run, r.topic, r.partition)
        if r.send:
            add_ack(acked.setdefault(k, {}), r.offset, r.value)
        else:
            finals.setdefault(k, {})[r.offset] = r.value
    for k, (s, p) in plans.items():
        out[k[0]][f"{k[1]}/{k[2]}"] = grid(s, p, rec.get(k, {}), finals.get(k, {}),
                                           acked.get(k, {}))
