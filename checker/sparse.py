"""The history's few rows, read in one pass and kept: what the per-consumer
ordering checks, the final log's page checks, the fault windows and the poll
figures need.

Sends are nearly all of a history; polls are few but carry many records. This
keeps every poll line -- an ok poll summarised (first and last record, size,
HW, the serving node and leader epoch), with its records only where
checker.facts saw it climb unevenly (a skip, a repeat or a reorder: the only
places an ordering anomaly can start inside a poll) -- every nemesis op, and
every send that did not succeed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.facts import FINAL, READ, Digest
from checker.finallog import KEY, PARTITIONS
from checker.spark import keep, local_rows
from contract import FINAL_PROCESS, NEMESIS_PROCESS


def uneven_sources(digests: list[Digest]) -> set[tuple]:
    """(run, topic, partition, process) of the readers (consumers and the final
    read) with a poll that does not climb one offset at a time."""
    return {
        (d.run, d.topic, d.partition,
         FINAL_PROCESS if d.src == FINAL else d.src[len(READ):])
        for d in digests
        if d.uneven and (d.src == FINAL or d.src.startswith(READ))
    }


def sparse_rows(spark, history: DataFrame, uneven: set[tuple]) -> DataFrame:
    """Poll lines (ok polls summarised), nemesis ops and unsuccessful sends, kept.

    ``uneven``: the readers whose polls keep their records (uneven_sources)."""
    f, typ, proc = F.col("f"), F.col("type"), F.col("process")
    poll = (f == "poll") & (typ == "ok")
    rows = history.filter(
        (f == "poll") | (proc == NEMESIS_PROCESS) | ((f == "send") & typ.isin("fail", "info"))
    )
    if uneven:
        marks = local_rows(
            spark, list(uneven), f"{PARTITIONS}, process string"
        ).withColumn("uneven", F.lit(True))
        rows = rows.join(F.broadcast(marks), [*KEY, "process"], "left")
        keep_records = F.coalesce(F.col("uneven"), F.lit(False))
    else:
        keep_records = F.lit(False)
    n = F.size("records")
    first, last = F.col("records")[0], F.element_at("records", -1)
    return keep(
        rows.select(
            *KEY,
            "index",
            "time",
            "process",
            "type",
            "f",
            "value",
            "nodes",
            "offset",
            "error",
            "hw",
            "node",
            "epoch",
            F.when(poll, n).alias("n"),
            F.when(poll & (n > 0), first[0]).alias("first_offset"),
            F.when(poll & (n > 0), first[1]).alias("first_value"),
            F.when(poll & (n > 0), last[0]).alias("last_offset"),
            F.when(keep_records, F.col("records")).alias("records"),
        )
    )
