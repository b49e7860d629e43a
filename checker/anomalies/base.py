"""The shape of one anomaly kind: a Spark detector plus a plain-words explainer.

A detector returns a DataFrame with the columns of DETECTOR_COLUMNS, one row per
anomaly: the run key, the partition, a sort key (to list anomalies in a stable,
meaningful order: usually an offset or an op index) and the witness as a JSON
string. The explainer turns one witness (as a dict) into a paragraph.
Adding a kind = adding a module that defines ``KIND`` and listing it in
checker.anomalies.REGISTRY.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checker.context import CheckContext

DETECTOR_COLUMNS = ("run", "topic", "partition", "sort", "witness")


@dataclass(frozen=True)
class AnomalyKind:
    name: str
    detect: Callable[[CheckContext], DataFrame]
    explain: Callable[[dict[str, Any]], str]


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
