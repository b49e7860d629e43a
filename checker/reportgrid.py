"""The report's replica grid computed by the check (checker.gridrows defines it),
per run and partition, so that rendering a report reads neither the replica logs
nor the history.

A small run's inputs -- its log records, acknowledged sends and final reads --
are collected and reduced in the driver; a big run's (history over BIG_RUN_BYTES)
are reduced inside Spark, one partition of one run per group, by the same
Python, so only the few hundred rows a grid shows leave the executors. The
anomalies (lost values, the offsets they name) are the check's listed ones, as
the report lists them.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checker.gridrows import add_ack, anomaly_offsets, partition_rows
from contract import FINAL_PROCESS

# A run with more history than this is reduced in Spark (a Python worker per
# task): below it, collecting its rows costs less than starting the workers.
BIG_RUN_BYTES = 4 << 20
_GRID = "run string, topic string, partition int, grid string"
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


def grids(history: DataFrame, logs: DataFrame, runs: dict[str, int], marked: Marks
          ) -> dict[str, dict[str, dict[str, Any]]]:
    """run -> partition -> its grid (checker.gridrows.partition_rows), for ``runs``
    (URI -> history bytes)."""
    small = sorted(u for u, n in runs.items() if n <= BIG_RUN_BYTES)
    big = sorted(u for u in runs if u not in small)
    out: dict[str, dict[str, dict[str, Any]]] = {u: {} for u in runs}
    if small:
        _collected(history, logs, small, marked, out)
    if big:
        _in_spark(history, logs, big, marked, out)
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


def _in_spark(history: DataFrame, logs: DataFrame, runs: list[str], marked: Marks,
              out: dict[str, dict[str, dict[str, Any]]]) -> None:
    mine = F.col("run").isin(runs)
    cols = ["run", "topic", "partition", "kind", "broker", "offset", "epoch", "value",
            "index", "pos"]
    null = F.lit(None)
    rows = logs.filter(mine).select(
        "run", "topic", "partition", F.lit(0).alias("kind"), "broker", "offset", "epoch",
        "value", null.cast("long").alias("index"), null.cast("int").alias("pos"),
    ).unionByName(_sends(history).filter(mine).select(
        "run", "topic", "partition", F.lit(1).alias("kind"), null.cast("string").alias("broker"),
        "offset", null.cast("long").alias("epoch"), "value", "index",
        null.cast("int").alias("pos"),
    )).unionByName(_finals(history).filter(mine).select(
        "run", "topic", "partition", "index", F.posexplode("records").alias("pos", "rec"),
    ).select(
        "run", "topic", "partition", F.lit(2).alias("kind"), null.cast("string").alias("broker"),
        F.col("rec")[0].alias("offset"), null.cast("long").alias("epoch"),
        F.col("rec")[1].alias("value"), "index", "pos",
    )).select(*cols)
    marked_here = {k: v for k, v in marked.items() if k[0] in runs}

    def one(key: tuple[Any, ...], pdf: pd.DataFrame) -> pd.DataFrame:
        u, topic, partition = key
        part = f"{topic}/{partition}"
        by_broker: dict[str, dict[int, tuple[Any, Any]]] = {}
        acked: dict[int, list[Any]] = {}
        final: dict[int, Any] = {}
        logs_p = pdf[pdf["kind"] == 0]
        for b, off, e, v in zip(logs_p["broker"].tolist(), logs_p["offset"].tolist(),
                                logs_p["epoch"].tolist(), logs_p["value"].tolist(),
                                strict=True):
            by_broker.setdefault(b, {})[int(off)] = (None if pd.isna(e) else int(e), int(v))
        sends = pdf[pdf["kind"] == 1].sort_values("index", kind="stable")
        for off, v in zip(sends["offset"].tolist(), sends["value"].tolist(), strict=True):
            add_ack(acked, int(off), int(v))
        reads = pdf[pdf["kind"] == 2].sort_values(["index", "pos"], kind="stable")
        for off, v in zip(reads["offset"].tolist(), reads["value"].tolist(), strict=True):
            final[int(off)] = None if pd.isna(v) else int(v)
        if not by_broker:
            return pd.DataFrame({"run": [], "topic": [], "partition": [], "grid": []})
        lost, must = marked_here.get((u, part), (set(), set()))
        grid = partition_rows(by_broker, final, acked, lost, must)
        return pd.DataFrame({"run": [u], "topic": [topic], "partition": [partition],
                             "grid": [json.dumps(grid, separators=(",", ":"))]})

    for r in rows.groupBy("run", "topic", "partition").applyInPandas(one, _GRID).collect():
        out[r.run][f"{r.topic}/{r.partition}"] = json.loads(r.grid)
