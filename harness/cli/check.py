"""`isrlab check PATH...`: check run directories with the Spark checker.

Exit status: the verdicts of docs/anomalies.md (0 valid, 1 invalid or not
reproduced, 3 incomplete, 2 a run that could not be read;
checker.verdict.batch_exit_code) -- the CI gate. A run still marked running
whose harness was killed is collected first (harness.run.collect), as `isrlab
collect` does. A run whose check/ cannot be written (a read-only mount) is
refused before Spark starts: one line naming it, exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from checker import client
from checker.errors import CheckerError
from checker.heartbeat import heartbeat
from checker.verdict import batch_exit_code
from contract import CHECK, REPORT_HTML, RUNNING
from contract.rundir import (
    RunDirError,
    RunWriteError,
    discover,
    read_meta,
    require_writable,
    run_status,
)
from harness.cli import batchcheck, flags
from harness.errors import UsageError, one_line
from harness.progress import Progress
from harness.run.collect import collect_crashed, owner_gone
from reports.render import INDEX


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    c = flags.command_parser(
        sub, "check", "check run directories with the Spark checker",
        description="Check run directories (or trees of them) with the Spark checker: "
                    "one line per run saying what happened to the data and whether that "
                    "is what the run documents, a tally, each run's HTML report and the "
                    "batch's index page.",
        example="isrlab check runs/ --junit junit.xml",
        exit_codes="""0  every run as documented
1  a run shows an unexpected anomaly, or a documented one did not reproduce
2  bad input, or a run directory that cannot be read (the others are checked)
3  a run did not finish (judged in part), or interrupted""",
        docs="checker.md, docs/verdicts.md")
    c.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="run directories, or directories holding them")
    flags.add_master_flag(c)
    flags.add_junit_flag(c)
    c.add_argument("--results", type=Path, metavar="DIR",
                   help="append every run's results to this Parquet table (trend pages)")
    c.add_argument("--index", type=Path, metavar="FILE",
                   help="write the batch's index page here (default: PATH/index.html "
                        "when one tree of several runs is checked)")
    c.add_argument("--no-report", action="store_true", help="skip the HTML reports")
    flags.add_output_flags(verbose=True, p=c)
    flags.add_no_server_flag(c)
    return c


def run(args: argparse.Namespace) -> int:
    # Paths may be run directories or trees of them; the checker finds the runs.
    for p in args.paths:
        if not os.path.exists(p):  # os.path's: a name too long for a file is none
            raise UsageError(f"no such run directory: {p}")
    batchcheck.require_master(args.master)  # before a crashed run is collected for nothing
    progress = flags.progress_of(args)
    try:
        run_dirs = discover(list(args.paths))
        for r in run_dirs:  # where the results go, before any work
            if run_status(r) != RUNNING:  # (a crashed run's collect finds it: untouched if alive)
                require_writable(r / CHECK, "the check's results")
        _collect_crashed_runs(run_dirs, progress)
        results = batchcheck.interruptible(client.check, list(args.paths), master=args.master,
                                progress=progress.line, use_server=flags.use_server(args))
    except (CheckerError, RunDirError, RunWriteError) as e:
        print(f"isrlab: {one_line(e)}", file=sys.stderr)
        return e.exit_code
    if not results:
        where = ", ".join(map(str, args.paths))
        raise UsageError(f"no run directory (with run.json) under {where}")
    for r in results:
        if r.error is not None:  # set aside, the rest of the batch checked
            print(f"isrlab: {r.error}", file=sys.stderr)
            # No report: the run was not checked, and an earlier one would not say so.
            (r.run_dir / CHECK / REPORT_HTML).unlink(missing_ok=True)
    batchcheck.say_truncated(results)
    results = [batchcheck.judged(r) for r in results]
    if args.results is not None:
        try:
            client.append_results(results, args.results, master=args.master,
                                  progress=progress.line, use_server=flags.use_server(args))
        except CheckerError as e:
            print(f"isrlab: {one_line(e)}", file=sys.stderr)
            return e.exit_code
    checked = [r for r in results if r.error is None]
    if not args.no_report:
        progress.line(f"rendering {len(checked)} report(s)")
        with heartbeat(progress.line, f"still rendering {len(checked)} report(s)"):
            for r in checked:
                batchcheck.render_report(r.run_dir)
        index = args.index
        if index is None and len(results) > 1 and len(args.paths) == 1 and args.paths[0].is_dir():
            index = args.paths[0] / INDEX
        if index is not None:
            batchcheck.write_index(results, index, progress)
    if args.junit is not None:
        batchcheck.write_junit_or_exit(results, args.junit)
    code = batch_exit_code(r.verdict for r in results)
    if args.json:
        # Each run: the schema's keys over its whole summary.json (figures, checker).
        batchcheck.print_result_json(
            "check", code, [{**r.summary, **batchcheck.run_json(r, r.run_dir)} for r in results])
    else:
        for r in results:
            print(f"{batchcheck.outcome_line(r)}  {r.run_dir}")
            for line in batchcheck.detail_lines(r, args.verbose):
                print(line)
        batchcheck.print_tally(results)
    return code


def _collect_crashed_runs(run_dirs: list[Path], progress: Progress) -> None:
    """Collect every run among run_dirs still marked "running" whose harness is gone
    (harness.run.collect.collect_crashed), saying so on stderr; refuse (UsageError,
    nothing touched) if any of them is still going or cannot be checked from here."""
    # A run.json the checker cannot read is the checker's to report, with its line.
    running = [r for r in run_dirs if run_status(r) == RUNNING]
    for r in running:
        owner_gone(r, read_meta(r))  # all refused before any is touched
    for r in running:
        done = collect_crashed(r, say=lambda m: progress.line(f"  {m}"))
        if done is not None:
            print(f"isrlab: run {r} had crashed ({done.why}): collected its replicas from "
                  "the brokers' data; checking what it recorded", file=sys.stderr)
