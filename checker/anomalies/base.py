"""The shape of one anomaly kind: a Spark detector plus a plain-words explainer.

A detector returns a DataFrame with the columns of DETECTOR_COLUMNS, one row per
anomaly: the run key, the partition, a sort key (to list anomalies in a stable,
meaningful order: usually an offset or an op index) and the witness as a JSON
string. The explainer turns one witness (as a dict) into a paragraph.
Adding a kind = adding a module that defines ``KIND`` and listing it in
checker.anomalies.REGISTRY.

A kind also declares what it reads (``Needs``): checker.facts and checker.scope
derive from the registry's declarations what the digests hash and which rows
the detectors see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checker.context import CheckContext, Known
from checker.facts import EPOCH, OFFSET, VALUE

__all__ = [
    "DETECTOR_COLUMNS", "EPOCH", "OFFSET", "VALUE", "AnomalyKind", "Needs", "plural", "record",
    "rows",
]

DETECTOR_COLUMNS = ("run", "topic", "partition", "sort", "witness")


@dataclass(frozen=True)
class Needs:
    """What a kind reads, declared next to it.

    Outside the offset buckets whose digests disagree, every source holds the
    final log's records, equal in each field some kind ``compares``; a kind
    finds nothing there unless it looks elsewhere, at the rows it declares here.
    """

    # Record fields (OFFSET, VALUE, EPOCH) whose difference between two sources
    # the kind reports: the digests must cover them.
    compares: tuple[str, ...] = ()
    # Matches records by value across offsets: needs every record of each value
    # that a client op's record (an ack or a poll's) in those buckets names.
    by_value: bool = False
    # -> a DataFrame (run, topic, partition, value) of the values it needs every
    # record of, or None. DataFrames, not driver sets: they can be as many as
    # the history's lines (failed sends under a long partition, resends).
    values: Callable[[Known], DataFrame | None] | None = None
    # -> a DataFrame (run, topic, partition, lo, hi) of the final-log offset
    # ranges it looks up, or None.
    final_ranges: Callable[[Known], DataFrame | None] | None = None


@dataclass(frozen=True)
class AnomalyKind:
    name: str
    detect: Callable[[CheckContext], DataFrame]
    explain: Callable[[dict[str, Any]], str]
    needs: Needs = field(default_factory=Needs)


def rows(df: DataFrame, sort: Column, witness: Column) -> DataFrame:
    """Shape a detector's result: witness is a struct column turned into JSON."""
    return df.select(
        "run",
        "topic",
        "partition",
        sort.cast("long").alias("sort"),
        F.to_json(witness, {"ignoreNullFields": "false"}).alias("witness"),
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def record(value: Any, epoch: Any) -> str:
    """How a record is named in explanations: value and (when known) epoch."""
    return f"value {value}" + (f" (epoch {epoch})" if epoch is not None else "")
