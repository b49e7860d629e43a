"""Checking runs from the CLI: the interrupt-safe Spark check, a batch of runs
checked in ONE Spark job (checker.client.check) with each run's figure assertions
judged into its verdict (harness.run.assertions), each run's report, the batch's
index page, and the exit codes of a batch."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import sys
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from checker import client
from checker.errors import CheckerError
from checker.heartbeat import heartbeat
from checker.junit import write_junit
from checker.output import write_check
from checker.spark import check_master, task_slices
from checker.verdict import (
    ERROR,
    EXIT_CODES,
    INCOMPLETE,
    VALID,
    RunResult,
    outcome_of,
    tally,
    tally_line,
    with_words,
)
from contract import CHECK, REPORT_HTML
from contract.rundir import RunDirError, RunWriteError
from harness.errors import Interrupted, UsageError, one_line
from harness.progress import Progress
from harness.run import assertions
from harness.run.runner import RunRecord
from reports.render import render_index, render_run

if TYPE_CHECKING:
    from pyspark import SparkContext

T = TypeVar("T")

# -- the interrupt-safe check ----------------------------------------------------


class CheckInterrupted(Interrupted):
    """SIGINT/SIGTERM/SIGHUP while the checker ran (exit 3, "isrlab: interrupted")."""

    def __init__(self) -> None:
        super().__init__("interrupted")


abandoned = threading.Event()  # set once a check thread is left running


def interruptible(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs) -- the Spark check -- run in a worker thread while this,
    the main thread, waits; an interrupt raises CheckInterrupted here at once.

    Why a thread: PySpark's SparkContext, created on the main thread, replaces the
    SIGINT handler with one that calls into the JVM from inside the handler, and
    py4j logs the call it interrupts (~48 lines of traceback) before the
    KeyboardInterrupt arrives. Created on another thread, it leaves ours in place,
    and nothing of the check's has to be unwound: main() exits without it."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
            box["error"] = e

    worker = threading.Thread(target=target, name="isrlab-check", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except (KeyboardInterrupt, Interrupted):
        abandoned.set()
        logging.disable(logging.CRITICAL)  # py4j's complaints, as the JVM goes
        raise CheckInterrupted() from None
    if "error" in box:
        raise box["error"]
    return box["value"]


# -- the Spark master -------------------------------------------------------------


def require_master(master: str | None = None) -> str:
    """The Spark master a command will check on (``master``, else
    ISRLAB_SPARK_MASTER, else local[2]), validated before the command starts
    anything -- a cluster, a run or batch directory, a Spark JVM: a malformed one,
    one that does not answer, or one that answers but is no Spark standalone
    master is a UsageError (one line, exit 2) within seconds (check_master)."""
    try:
        return check_master(master)
    except CheckerError as e:
        raise UsageError(one_line(e)) from None


# -- checked runs: verdicts, reports, output -------------------------------------


def judged(result: RunResult) -> RunResult:
    """The run's scenario figure assertions judged into its verdict (a failed one
    makes it invalid, its messages in summary `assertions_failed`); every command
    that checks runs does this before it renders their reports. A run whose
    run.json or summary.json cannot be read for it is set aside (set_aside)."""
    if result.error is not None:
        return result
    try:
        verdict, failed = assertions.judge(result.run_dir, result.verdict)
    except RunDirError as e:
        return set_aside(result, e)
    if not failed:
        return result
    return dataclasses.replace(result, verdict=verdict, exit_code=max(result.exit_code, 1),
                               summary=with_words({**result.summary, "verdict": verdict,
                                                   "assertions_failed": failed}))


def set_aside(result: RunResult, err: RunDirError) -> RunResult:
    """A checked run that turned out malformed after the check (its assertions or
    summary.json unreadable): verdict `error`, as the checker gives a run it sets
    aside -- one line on stderr, check/summary.json saying why, no anomalies and
    no report -- so that the rest of the batch goes on."""
    print(f"isrlab: {err}", file=sys.stderr)
    summary = {**result.summary, "verdict": ERROR, "exit_code": EXIT_CODES[ERROR],
               "error": str(err), "error_file": err.file, "error_line": err.line,
               "found": {}, "unexpected": [], "missing": [], "anomaly_count": 0,
               "anomalies_listed": 0, "notes": [str(err)]}
    summary = with_words(summary)
    write_check(result.run_dir, [], summary)
    (result.run_dir / CHECK / REPORT_HTML).unlink(missing_ok=True)
    return dataclasses.replace(result, verdict=ERROR, exit_code=EXIT_CODES[ERROR], error=err,
                               anomalies=[], unexpected=[], missing=[], unjudged=[],
                               summary=summary)


def say_truncated(results: list[RunResult]) -> None:
    """One line on stderr per history, log or events file whose last line was cut
    off (an interrupted write): the checker skipped that line."""
    for r in results:
        for t in r.summary.get("truncated") or []:
            print(f"isrlab: run {r.run_dir}: {t['file']} line {t['line']} is cut off (an "
                  "interrupted write); checked the lines before it", file=sys.stderr)


def render_report(run_dir: Path) -> Path | None:
    """The HTML report; a failing renderer costs the report, not the verdict."""
    why = try_render(str(run_dir))
    if why is not None:
        print(f"isrlab: {why}", file=sys.stderr)
        return None
    return run_dir / CHECK / REPORT_HTML


def try_render(run_dir: str) -> str | None:
    """Render one run's report; None, or why it could not be (one line). A Spark task
    of render_reports, so it takes and returns plain values."""
    try:
        render_run(Path(run_dir))
    except Exception as e:  # noqa: BLE001 -- reported on one line, the verdict stands
        return f"no report for {run_dir}: {one_line(e)}"
    return None


def render_reports(run_dirs: list[Path], sc: SparkContext | None = None) -> None:
    """Every run's report: with ``sc``, as Spark tasks (a swarm's thousands of
    reports spread over its cores or its cluster, which hold its runs on shared
    storage); without, one after the other here."""
    if sc is None or len(run_dirs) < 2:
        for d in run_dirs:
            render_report(d)
        return
    dirs = [str(d) for d in run_dirs]
    for why in sc.parallelize(dirs, task_slices(sc, len(dirs))).map(try_render).collect():
        if why is not None:
            print(f"isrlab: {why}", file=sys.stderr)


def report_of(r: RunResult) -> str | None:
    """The run's report, if it has one."""
    p = r.run_dir / CHECK / REPORT_HTML
    return str(p) if p.exists() else None


def anomaly_line(a: Any) -> str:
    if isinstance(a, dict):
        kind = a.get("kind") or a.get("type") or "anomaly"
        text = a.get("explanation") or a.get("summary") or ""
        return f"{kind}: {text}".rstrip(": ")
    return str(a)


def print_json(summary: dict[str, Any]) -> None:
    print(json.dumps(summary, default=str))


# -- the one --json schema (docs/json.md) ------------------------------------------


def run_json(r: RunResult | None, run_dir: Path | str, **extra: Any) -> dict[str, Any]:
    """One run as every command's --json lists it (docs/json.md): its directory,
    scenario, protocol, seed, the verdict value and its words, the kinds it
    expects and found, its report; `extra` adds a command's own fields (variant,
    config, ...). ``r`` None: a run that was not checked (``extra`` says why)."""
    s = r.summary if r is not None else {}
    return {"run_id": s.get("run_id"), "run_dir": str(run_dir), "scenario": s.get("scenario"),
            "protocol": s.get("protocol"), "seed": s.get("seed"),
            "verdict": s.get("verdict"), "data": s.get("data"),
            "documentation": s.get("documentation"), "expected": list(s.get("expected") or []),
            "found": dict(s.get("found") or {}),
            "report": report_of(r) if r is not None else None, **extra}


def print_result_json(command: str, exit_code: int, runs: list[dict[str, Any]],
                      seed: int | None = None, **extra: Any) -> None:
    """The --json object of reproduce, check, chaos, swarm and matrix: the same
    top-level keys for each (command, exit_code, seed, runs, tally), then the
    command's own."""
    print_json({"command": command, "exit_code": exit_code, "seed": seed, "runs": runs,
                "tally": tally([r for r in runs if r.get("verdict") is not None]), **extra})


def outcome_line(r: RunResult) -> str:
    """`data lost (lost-write) — reproduced as documented` (checker.verdict.outcome)."""
    return outcome_of(r.summary).line(r.summary.get("found") or {})


def detail_lines(r: RunResult, verbose: bool) -> list[str]:
    """What a person needs under a run's outcome line: why it was not judged in
    full, its failed assertions, and with ``verbose`` every anomaly's explanation
    (else the report has them)."""
    out = []
    if r.verdict == INCOMPLETE:
        out.append(f"  the run did not finish (status {r.status}): only what it recorded "
                   "was checked")
    if verbose:
        out += [f"  {anomaly_line(a)}" for a in r.anomalies]
    out += [f"  {m}" for m in r.summary.get("assertions_failed") or []]
    if r.unjudged:
        out.append(f"  not judged: {', '.join(r.unjudged)} (expected; not in what the "
                   "run recorded)")
    return out


def print_tally(results: list[RunResult]) -> None:
    print(tally_line(tally([r.summary for r in results])))


# -- a batch of runs -----------------------------------------------------------


STATUS_EVERY = 5.0  # seconds between status lines during a chaos run


def random_seed() -> int:
    """A seed when none is given (printed, so that the runs can be made again)."""
    return int.from_bytes(os.urandom(3), "big")


def stamp() -> str:
    """Now, as a batch's name starts: 20250101T120000Z."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def new_batch(runs_dir: Path, what: str) -> Path:
    """A batch's directory under runs_dir: <time>-<what>-<hex>."""
    return runs_dir / f"{stamp()}-{what}-{secrets.token_hex(3)}"


def check_batch(run_dirs: list[Path], index: Path, progress: Progress, *,
                master: str | None = None, junit: Path | None = None,
                results: Path | None = None, use_server: bool | None = None,
                reports_for_findings: bool = False,
                render_on: SparkContext | None = None) -> list[RunResult]:
    """Check `run_dirs` in one Spark batch (each run's figure assertions judged into
    its verdict); each run's report (``reports_for_findings``: only the runs that
    show an anomaly or are not valid -- a swarm's thousands of clean runs each
    cost a render; `isrlab check RUN_DIR` renders one later; ``render_on``: as tasks
    of that Spark context), the index page, JUnit.
    Raises CheckerError (its exit status) or CheckInterrupted."""
    out = interruptible(client.check, run_dirs, master=master, progress=progress.line,
                        use_server=use_server)
    for r in out:
        if r.error is not None:
            print(f"isrlab: {r.error}", file=sys.stderr)
    say_truncated(out)
    out = [judged(r) for r in out]
    if results is not None:
        client.append_results(out, results, master=master, progress=progress.line,
                              use_server=use_server)
    shown = [r for r in out if r.error is None
             and (not reports_for_findings or r.anomalies or r.verdict != VALID)]
    progress.line(f"rendering {len(shown)} report(s)")
    with heartbeat(progress.line, f"still rendering {len(shown)} report(s)"):
        render_reports([r.run_dir for r in shown], render_on)
    write_index(out, index, progress)
    if junit is not None:
        write_junit_or_exit(out, junit)
    return out


def write_index(results: list[RunResult], index: Path, progress: Progress) -> None:
    """The batch's index page; one that does not fit on the disk costs the page, not
    the verdicts (one line on stderr, as for a report)."""
    try:
        progress.line(f"index: {render_index([r.summary for r in results], index)}")
    except OSError as e:
        print(f"isrlab: no index page: {RunWriteError(index, 'the index page', e)}",
              file=sys.stderr)


def write_junit_or_exit(results: list[RunResult], path: Path) -> None:
    """The JUnit report asked for; RunWriteError (one line, exit 2) if it cannot be
    written."""
    try:
        write_junit(results, path)
    except OSError as e:
        raise RunWriteError(path, "the JUnit report", e, exit_code=2) from None


def check_batch_or_exit(run_dirs: list[Path], index: Path, progress: Progress,
                        again: Path | None = None, **kwargs: Any) -> list[RunResult] | int:
    """check_batch with its progress line; on a checker failure or an interrupt, the
    exit status after saying why on stderr (and, with `again`, how to check the
    runs, which are complete)."""
    progress.line(f"checking {len(run_dirs)} run(s) in one Spark batch")
    try:
        return check_batch(run_dirs, index, progress, **kwargs)
    except CheckerError as e:
        print(f"isrlab: checker: {one_line(e)}", file=sys.stderr)
        return e.exit_code
    except Interrupted as e:
        print(f"isrlab: {e}" + (f"; `isrlab check {again}` checks the runs" if again else ""),
              file=sys.stderr)
        return e.exit_code


def chaos_exit_code(results: list[RunResult], records: list[RunRecord]) -> int:
    """1 if any run shows an anomaly; else 3 if one did not complete or could not be
    checked; else 0."""
    if any(r.anomalies for r in results):
        return 1
    if any(r.error is not None for r in records) or any(r.verdict != VALID for r in results):
        return 3
    return 0


def reproduced_exit_code(outcomes: Iterable[tuple[Any, str]]) -> int:
    """A scenario's batch of runs, as `reproduce` judges one: 1 for any anomaly or a
    run not valid, but 3 when the only trouble is runs that did not finish or could
    not be read; `outcomes`: each run's (anomalies, verdict)."""
    outcomes = list(outcomes)
    if any(anomalies or verdict not in (VALID, INCOMPLETE, ERROR)
           for anomalies, verdict in outcomes):
        return 1
    return 3 if any(verdict != VALID for _, verdict in outcomes) else 0
