"""Public entry point: check run directories, write check/*.json, return verdicts.

All runs given (or found under the given trees) are checked together: each input
file type is read by one Spark scan and every anomaly kind is one DataFrame
query over all runs, so a night of hundreds of runs costs a handful of jobs.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checker import figures
from checker import scope as scope_mod
from checker.anomalies import (
    BY_NAME,
    BY_VALUE,
    COMPARED,
    REGISTRY,
    needed_final_ranges,
    needed_values,
)
from checker.anomalies.observations import consumer_steps
from checker.context import CheckContext, Known
from checker.finallog import FINAL_READ, KEY, final_log, final_polls, with_epochs
from checker.junit import write_junit  # re-exported: `isrlab check --junit` looks here
from checker.load import load_inputs
from checker.output import write_check
from checker.results import write_results
from checker.rundir import RunDir, discover, read_rundir
from checker.sends import send_ops
from checker.spark import get_session, release, shuffle_partitions
from checker.sparse import sparse_rows, uneven_sources
from checker.verdict import decide

__all__ = ["RunResult", "check_runs", "write_junit"]

# Anomalies listed per run and kind; the rest are counted (summary.json) only.
MAX_LISTED = 200


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    verdict: str
    anomalies: list[dict[str, Any]]
    expected: list[str]
    exit_code: int
    scenario: str | None = None
    protocol: str | None = None
    unexpected: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def _detect_all(ctx: CheckContext) -> DataFrame:
    parts = [k.detect(ctx).withColumn("kind", F.lit(k.name)) for k in REGISTRY]
    df = reduce(DataFrame.unionByName, parts)
    w = Window.partitionBy("run", "kind")
    ordered = w.orderBy("sort", "topic", "partition", "witness")
    return (
        df.withColumn("n", F.row_number().over(ordered))
        .withColumn("total", F.count("*").over(w))
        .filter(F.col("n") <= MAX_LISTED)
    )


def _notes(rd: RunDir, sources: list[dict[str, Any]]) -> list[str]:
    notes = []
    for s in sources:
        tp = f"{s['topic']}/{s['partition']}"
        if s["source"] == "none":
            notes.append(
                f"{tp}: no final read and no replica in the leader role; its final "
                "committed log is unknown, so lost-write was not checked for it"
            )
        elif s["source"] != FINAL_READ:
            notes.append(
                f"{tp}: no final read recorded (interrupted run?); final committed log "
                f"taken from leader {s['broker']}'s log up to its HW ({s['length']} offsets)"
            )
    for t in rd.truncations:
        notes.append(
            f"{t.file}: last line {t.line} is truncated (interrupted write); "
            "checked the complete lines before it"
        )
    if not rd.has_events:
        notes.append("events.jsonl is missing; event-based figures are unavailable")
    return notes


def _result(
    rd: RunDir,
    rows: list[Any],
    sources: list[dict[str, Any]],
    figs: dict[str, Any],
    master: str,
    spark_version: str,
) -> RunResult:
    expect = rd.expect
    anomalies: list[dict[str, Any]] = []
    totals: dict[str, int] = {}
    for r in sorted(rows, key=lambda r: (REGISTRY.index(BY_NAME[r.kind]), r.n)):
        witness = json.loads(r.witness)
        totals[r.kind] = int(r.total)
        anomalies.append(
            {
                "kind": r.kind,
                "expected": r.kind in expect,
                "topic": r.topic,
                "partition": r.partition,
                "witness": witness,
                "explanation": BY_NAME[r.kind].explain(witness),
            }
        )
    v = decide(totals, expect, rd.scenario)
    summary = {
        "run_id": rd.run_id,
        "run_dir": str(rd.path),
        "scenario": rd.scenario,
        "protocol": rd.protocol,
        "seed": rd.meta.get("seed"),
        "verdict": v.verdict,
        "exit_code": v.exit_code,
        "expected": expect,
        "found": totals,
        "unexpected": v.unexpected,
        "missing": v.missing,
        "anomaly_count": sum(totals.values()),
        "anomalies_listed": len(anomalies),
        "kinds_checked": [k.name for k in REGISTRY],
        "final_log": sources,
        "final_log_fallback": any(s["source"] != FINAL_READ for s in sources),
        "truncated": [t.as_dict() for t in rd.truncations],
        "figures": figs,
        "notes": _notes(rd, sources),
        "checked_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "checker": {"spark": spark_version, "master": master},
    }
    write_check(rd.path, anomalies, summary)
    return RunResult(
        run_id=rd.run_id,
        run_dir=rd.path,
        verdict=v.verdict,
        anomalies=anomalies,
        expected=expect,
        exit_code=v.exit_code,
        scenario=rd.scenario,
        protocol=rd.protocol,
        unexpected=v.unexpected,
        missing=v.missing,
        summary=summary,
    )


def check_runs(
    paths: list[Path],
    master: str | None = None,
    progress: Callable[[str], None] | None = None,
    results_table: Path | None = None,
    prune: bool | None = None,
) -> list[RunResult]:
    """Check every run directory in ``paths`` (run dirs or trees of them).

    Writes ``check/anomalies.json`` and ``check/summary.json`` in each run and
    returns one RunResult per run, in path order. Raises checker.errors.RunDirError
    (exit 2) for a run that cannot be read; nothing is written in that case.
    With ``results_table``, the batch's results are also appended to that Parquet
    table (checker.results). ``prune`` forces the digest comparison of
    checker.scope on (True) or off (False); by default the size decides.
    """
    say = progress or (lambda _msg: None)
    run_paths = discover([Path(p) for p in paths])
    runs = {rd.key: rd for rd in (read_rundir(p) for p in run_paths)}
    if not runs:
        return []
    say(f"starting Spark for {len(runs)} run(s)")
    spark = get_session(master)
    try:
        inputs, facts = load_inputs(spark, runs, say, scope_mod.BUCKET_BITS, COMPARED)
        say("summarising polls, faults and failed sends")
        sparse = sparse_rows(spark, inputs.history, uneven_sources(facts.digests))
        windows = figures.faults(sparse)
        say("pairing sends with their completions")
        sends = send_ops(spark, inputs.history, windows)
        pages = final_polls(sparse).select(*KEY, "n", "first_offset", "last_offset").collect()
        say("building the final committed logs")
        final = final_log(spark, inputs, facts.digests, pages)
        steps = consumer_steps(sparse)
        known = Known(spark, sparse, sends, steps, final)
        sc = scope_mod.scope(spark, inputs, facts, final, BY_VALUE, needed_values(known),
                             needed_final_ranges(known), prune,
                             sum(rd.history_bytes for rd in runs.values()))
        if sc.pruned:
            say(f"digests: {sc.suspect:,} of {sc.buckets:,} offset buckets need a "
                "record-by-record check")
        ctx = CheckContext(
            spark,
            inputs,
            sc,
            sparse,
            steps,
            sc.narrow(with_epochs(sc.final, sc.logs).cache()),
            final.sources_df(spark),
        )
        say(f"checking {len(REGISTRY)} anomaly kinds")
        with shuffle_partitions(spark, 1 if sc.small else None):
            found = _detect_all(ctx).collect()
        say("computing figures")
        figs = figures.run_figures(sparse, windows, sends, inputs.events, sc)
    finally:
        release(spark)
    key_of = inputs.run_keys
    by_run: dict[str, list[Any]] = defaultdict(list)
    for r in found:
        by_run[key_of[r.run]].append(r)
    src_by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in final.sources:
        d = dict(s)
        src_by_run[key_of[d.pop("run")]].append(d)
    figs = {key_of[k]: v for k, v in figs.items()}
    say("writing results")
    master_used = spark.sparkContext.master
    results = [
        _result(rd, by_run[key], src_by_run[key], figs.get(key, {}), master_used, spark.version)
        for key, rd in runs.items()
    ]
    if results_table is not None:
        say(f"appending results to {results_table}")
        write_results(spark, results, Path(results_table))
    return results
