"""The Parquet table of check results, appended to by every batch (trend pages).

Two datasets under the table directory:
  runs/       one row per checked run (verdict, counts per anomaly kind, config; the
              run.json status, and for a run set aside as malformed (verdict
              error) its message)
  anomalies/  one row per listed anomaly (kind, partition, witness JSON, explanation)
Both are partitioned by ``check_date`` so a night's batch is one partition.
``status`` and ``error`` came later than the other columns of ``runs``: read a
table older than them with ``mergeSchema``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from checker.spark import local_rows
from contract import ANOMALY_KINDS

if TYPE_CHECKING:
    from checker.verdict import RunResult

RUNS = T.StructType(
    [
        T.StructField("run_id", T.StringType()),
        T.StructField("run_dir", T.StringType()),
        T.StructField("scenario", T.StringType()),
        T.StructField("protocol", T.StringType()),
        T.StructField("seed", T.StringType()),
        T.StructField("verdict", T.StringType()),
        T.StructField("exit_code", T.IntegerType()),
        T.StructField("expected", T.ArrayType(T.StringType())),
        T.StructField("unexpected", T.ArrayType(T.StringType())),
        T.StructField("missing", T.ArrayType(T.StringType())),
        *[T.StructField(k.replace("-", "_"), T.LongType()) for k in ANOMALY_KINDS],
        T.StructField("ops", T.LongType()),
        T.StructField("status", T.StringType()),
        T.StructField("error", T.StringType()),
        T.StructField("checked_at", T.StringType()),
        T.StructField("check_date", T.StringType()),
    ]
)

ANOMALIES = T.StructType(
    [
        T.StructField("run_id", T.StringType()),
        T.StructField("run_dir", T.StringType()),
        T.StructField("kind", T.StringType()),
        T.StructField("expected", T.BooleanType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("witness", T.StringType()),
        T.StructField("explanation", T.StringType()),
        T.StructField("check_date", T.StringType()),
    ]
)


def write_results(spark: SparkSession, results: Sequence[RunResult], table: Path) -> Path:
    """Append this batch's results to the Parquet table at ``table``."""
    runs, anomalies = [], []
    for r in results:
        s = r.summary
        date = str(s.get("checked_at", ""))[:10]
        found = s.get("found") or {}
        runs.append(
            (
                r.run_id,
                str(r.run_dir),
                r.scenario,
                r.protocol,
                None if s.get("seed") is None else str(s.get("seed")),
                r.verdict,
                r.exit_code,
                r.expected,
                r.unexpected,
                r.missing,
                *[int(found.get(k, 0)) for k in ANOMALY_KINDS],
                (s.get("figures") or {}).get("ops"),
                r.status,
                None if r.error is None else str(r.error),
                s.get("checked_at"),
                date,
            )
        )
        for a in r.anomalies:
            anomalies.append(
                (
                    r.run_id,
                    str(r.run_dir),
                    a["kind"],
                    a["expected"],
                    a["topic"],
                    a["partition"],
                    json.dumps(a["witness"]),
                    a["explanation"],
                    date,
                )
            )
    table = Path(table)
    for name, rows, schema in (("runs", runs, RUNS), ("anomalies", anomalies, ANOMALIES)):
        if rows:
            (
                local_rows(spark, rows, schema)
                .coalesce(1)
                .write.mode("append")
                .partitionBy("check_date")
                .parquet(str(table / name))
            )
    return table
