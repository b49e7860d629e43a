"""Public entry point: check run directories, write check/*.json, return verdicts.

All runs given (or found under the given trees) are checked together: each input
file type is read by one Spark scan and every anomaly kind is one DataFrame
query over all runs, so a night of hundreds of runs costs a handful of jobs.

A malformed run (a contract.rundir.RunDirError: bad run.json or state.json, a missing file, a bad
line in a history, log or events file) does not stop the batch: it is set aside
with the verdict ``error`` and its message, and the others are checked.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
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
from checker.anomalies.base import AnomalyKind
from checker.anomalies.observations import consumer_steps
from checker.context import CheckContext, Known
from checker.finallog import FINAL_READ, KEY, final_log, final_polls, with_epochs
from checker.heartbeat import Phases
from checker.historyonly import unchecked
from checker.junit import write_junit  # re-exported: `isrlab check --junit` looks here
from checker.load import load_inputs
from checker.output import write_check
from checker.reportevents import add_event_inputs, scan_files
from checker.reporthistory import history_inputs
from checker.reportinputs import report_inputs, write_report_inputs
from checker.rundir import RunDir, read_rundir
from checker.sends import send_ops
from checker.spark import (
    check_master,
    get_session,
    master_of,
    one_check,
    shuffle_partitions,
)
from checker.sparse import sparse_rows, uneven_sources
from checker.verdict import ERROR, EXIT_CODES, RunResult, decide, with_words
from contract import UNFINISHED
from contract.rundir import RunDirError, discover, readable_meta

__all__ = ["RunResult", "check_runs", "write_junit"]

# Anomalies listed per run and kind; the rest are counted (summary.json) only.
MAX_LISTED = 200
# A small batch's kinds run side by side (_kinds_side_by_side), beside the figures: two
# threads for the kinds did as well as three and better than five on the 2-core
# machine.
KIND_THREADS = 2


def _listed(df: DataFrame) -> DataFrame:
    """Anomaly rows numbered per run and kind (``n``, in listing order), with their
    ``total``; the first MAX_LISTED of each."""
    w = Window.partitionBy("run", "kind")
    ordered = w.orderBy("sort", "topic", "partition", "witness")
    return (
        df.withColumn("n", F.row_number().over(ordered))
        .withColumn("total", F.count("*").over(w))
        .filter(F.col("n") <= MAX_LISTED)
    )


def _detected(kind: AnomalyKind, ctx: CheckContext) -> DataFrame:
    return kind.detect(ctx).withColumn("kind", F.lit(kind.name))


def _kinds_union(ctx: CheckContext) -> list[Any]:
    """Every kind's anomaly rows, for a batch: the kinds' union as one query (one
    plan, its stages scheduled together)."""
    return _listed(reduce(DataFrame.unionByName, [_detected(k, ctx) for k in REGISTRY])).collect()


def _kinds_side_by_side(ctx: CheckContext, pool: ThreadPoolExecutor) -> list[Any]:
    """Every kind's anomaly rows, for a small batch: one query per kind, from the
    pool's threads. A small check's time is planning and starting jobs, and these
    then overlap (a cold JVM's first check of a scenario run: the kinds ~4.1 ->
    ~3.1 s); a 300-run swarm batch is slower so (bench/README.md)."""
    found = pool.map(lambda k: _listed(_detected(k, ctx)).collect(), REGISTRY)
    return [row for rows in found for row in rows]


def _notes(rd: RunDir, sources: list[dict[str, Any]], unjudged: list[str]) -> list[str]:
    notes = []
    if rd.status in UNFINISHED:
        notes.append(
            f"run.json: the run did not finish (status {rd.status}"
            + (f": {' '.join(str(rd.meta['error']).split())}" if rd.meta.get("error") else "")
            + "); the recorded prefix was checked"
            + (f", and {', '.join(unjudged)}, expected but not seen in it, not judged"
               if unjudged else "")
        )
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
    for t in rd.torn:
        notes.append(
            f"{t.file}: last line {t.line} is truncated (interrupted write); "
            "checked the complete lines before it"
        )
    if not rd.has_events:
        notes.append("events.jsonl is missing; event-based figures are unavailable")
    for kind, why in unchecked(rd.meta).items():
        notes.append(f"{kind} not checked: {why}")
    return notes


def _result(
    rd: RunDir,
    rows: list[Any],
    sources: list[dict[str, Any]],
    figs: dict[str, Any],
    master: str,
    spark_version: str,
    shuffle_partitions: int,
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
    v = decide(totals, expect, rd.scenario, rd.status)
    summary = {
        "run_id": rd.run_id,
        "run_dir": str(rd.path),
        "scenario": rd.scenario,
        "protocol": rd.protocol,
        "seed": rd.meta.get("seed"),
        "status": rd.status,
        "verdict": v.verdict,
        "exit_code": v.exit_code,
        "expected": expect,
        "found": totals,
        "unexpected": v.unexpected,
        "missing": v.missing,
        "unjudged": v.unjudged,
        "anomaly_count": sum(totals.values()),
        "anomalies_listed": len(anomalies),
        # A history-only run (checker.historyonly) leaves some kinds unchecked:
        # named, never counted as "none found".
        "kinds_checked": [k.name for k in REGISTRY if k.name not in unchecked(rd.meta)],
        "kinds_not_checked": unchecked(rd.meta),
        "final_log": sources,
        "final_log_fallback": any(s["source"] != FINAL_READ for s in sources),
        "truncated": [t.as_dict() for t in rd.torn],
        "figures": figs,
        "notes": _notes(rd, sources, v.unjudged),
        "checked_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "checker": {"spark": spark_version, "master": master,
                    "shuffle_partitions": shuffle_partitions},
    }
    summary = with_words(summary)  # `data` and `documentation`: the verdict in words
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
        status=rd.status,
        unjudged=v.unjudged,
    )


def _error_result(path: Path, err: RunDirError, meta: dict[str, Any]) -> RunResult:
    """The result of a run set aside as malformed: verdict ``error``, its
    check/summary.json saying why (and no anomalies), so that no earlier result
    stands for it."""
    def text(key: str) -> str | None:
        v = meta.get(key)
        return v if isinstance(v, str) else None

    expect = meta.get("expect")
    expect = [k for k in expect if isinstance(k, str)] if isinstance(expect, list) else []
    run_id = text("run_id") or path.name
    summary = {
        "run_id": run_id,
        "run_dir": str(path),
        "scenario": text("scenario"),
        "protocol": text("protocol"),
        "seed": meta.get("seed"),
        "status": text("status"),
        "verdict": ERROR,
        "exit_code": EXIT_CODES[ERROR],
        "error": str(err),
        "error_file": err.file,
        "error_line": err.line,
        "expected": expect,
        "found": {},
        "unexpected": [],
        "missing": [],
        "unjudged": [],
        "anomaly_count": 0,
        "anomalies_listed": 0,
        "truncated": [],
        "figures": {},
        "notes": [str(err)],
        "checked_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    summary = with_words(summary)
    write_check(path, [], summary)
    return RunResult(
        run_id=run_id, run_dir=path, verdict=ERROR, anomalies=[], expected=expect,
        exit_code=EXIT_CODES[ERROR], scenario=summary["scenario"],
        protocol=summary["protocol"], summary=summary, status=summary["status"], error=err,
    )


def check_runs(
    paths: list[Path],
    master: str | None = None,
    progress: Callable[[str], None] | None = None,
    prune: bool | None = None,
) -> list[RunResult]:
    """Check every run directory in ``paths`` (run dirs or trees of them).

    Writes ``check/anomalies.json`` and ``check/summary.json`` in each run and
    returns one RunResult per run, in path order. A run that cannot be read (a
    contract.rundir.RunDirError: naming run, file and line) gets the verdict
    ``error`` with that error (RunResult.error) and the others are checked;
    RunDirError is raised only for a path that holds no run at all, and
    SparkMasterError for a master that is malformed or does not answer (before
    any run is read). ``prune`` forces the digest
    comparison of checker.scope on (True) or off (False); by default the size
    decides.
    """
    say = progress or (lambda _msg: None)
    run_paths = discover([Path(p) for p in paths])
    if not run_paths:
        return []
    check_master(master)  # at once, not after reading a night of runs
    runs: dict[str, RunDir] = {}
    bad: dict[str, RunDirError] = {}
    for p in run_paths:
        try:
            rd = read_rundir(p)
        except RunDirError as e:
            bad[str(p)] = e
            continue
        runs[rd.key] = rd
    spark: SparkSession | None = None
    job = _Job()
    if runs:
        # Each phase's line, then `still ...` every few seconds while it lasts.
        with Phases(say) as phases:
            spark, job = _check(runs, master, phases, prune)
        bad.update(job.bad)
    say("writing results")
    results = []
    for p in run_paths:
        key = str(p)
        if key in bad:
            meta = runs[key].meta if key in runs else readable_meta(p)
            results.append(_error_result(p, bad[key], meta))
        else:
            assert spark is not None
            results.append(_result(runs[key], job.found[key], job.sources[key],
                                   job.figures.get(key, {}), master_of(spark),
                                   spark.version,
                                   int(spark.conf.get("spark.sql.shuffle.partitions"))))
            write_report_inputs(runs[key].path, job.report_inputs.get(key),
                                results[-1].summary["checked_at"])
    return results


@dataclass
class _Job:
    """What the Spark job found, per run key: anomaly rows, final-log sources,
    figures; and the runs it set aside for a bad line (checker.load)."""

    found: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    sources: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    figures: dict[str, Any] = field(default_factory=dict)
    bad: dict[str, RunDirError] = field(default_factory=dict)
    # the report's inputs (checker.reportinputs), per run key
    report_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)


def _check(runs: dict[str, RunDir], master: str | None, say: Callable[[str], None],
           prune: bool | None) -> tuple[SparkSession, _Job]:
    """The one Spark job over every readable run."""
    say(f"starting Spark for {len(runs)} run(s)")
    spark = get_session(master)
    scans = scan_files(runs)  # the events and traces, read beside the Spark job
    history_bytes = sum(rd.history_bytes for rd in runs.values())
    bits = scope_mod.bucket_bits(history_bytes)
    with one_check(spark, history_bytes) as small:
        inputs, facts = load_inputs(spark, runs, say, bits, COMPARED)
        if len(inputs.bad) == len(runs):
            return spark, _Job(bad=inputs.bad)
        good = {k: rd for k, rd in runs.items() if k not in inputs.bad}
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
                             sum(rd.history_bytes for rd in good.values()), bits)
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
        def figures_of_runs() -> tuple[dict[str, Any], dict[str, Any]]:
            """The figures, then the reports' inputs (checker.reportinputs)."""
            return (figures.run_figures(sparse, windows, sends, inputs.events, sc),
                    add_event_inputs(inputs.history, inputs.run_keys, good, scans, report_inputs(
                        spark, inputs.history, sends, sparse, inputs.last_events)))

        if small:
            say(f"checking {len(REGISTRY)} anomaly kinds and computing figures")
            with ThreadPoolExecutor(KIND_THREADS + 1, thread_name_prefix="isrlab-check") as pool:
                # The figures need nothing the kinds find: their queries run beside them.
                figs_job = pool.submit(figures_of_runs)
                found = _kinds_side_by_side(ctx, pool)
                figs, reports_in = figs_job.result()
        else:
            say(f"checking {len(REGISTRY)} anomaly kinds")
            with shuffle_partitions(spark, 1 if sc.small else None):
                found = _kinds_union(ctx)
            say("computing figures and reducing the history for the reports")
            figs, reports_in = figures_of_runs()
        say("picking the history lines and replica rows the reports show")
        for u, more in history_inputs(inputs, sparse, found, good, facts.digests,
                                      bits).items():
            reports_in.setdefault(u, {}).update(more)
    key_of = inputs.run_keys
    job = _Job(bad=inputs.bad)
    for r in found:
        job.found[key_of[r.run]].append(r)
    for s in final.sources:
        d = dict(s)
        job.sources[key_of[d.pop("run")]].append(d)
    job.figures = {key_of[k]: v for k, v in figs.items()}
    # A run set aside as malformed (inputs.bad) has no key and gets no report inputs.
    job.report_inputs = {key_of[k]: v for k, v in reports_in.items() if k in key_of}
    return spark, job
