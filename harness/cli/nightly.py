"""`isrlab nightly CONFIG.yaml`: one night of a configured chaos matrix
(harness.chaos.nightly), checked in one batch, with JUnit, the night's index and
the trend page.

Exit status: 1 for an anomaly a row does not allow, 3 for a run that did not
complete or could not be checked, 0 otherwise; 2 for a bad config, before
anything starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from checker.verdict import VALID
from harness.chaos import nightly
from harness.chaos.runs import chaos_run
from harness.cli import batchcheck, flags
from harness.errors import HarnessError, Interrupted
from harness.run.runner import RunOptions, RunRecord, run_scenario
from reports.render import INDEX


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    n = flags.command_parser(
        sub, "nightly", "a configured chaos matrix: one night, checked in one "
                        "batch, JUnit, the night's index and the trend page",
        description="Run one night of a configured chaos matrix (cells of version, "
                    "backend and fault mix), check it in one batch, write JUnit, the "
                    "night's index and the trend page over the nights.",
        example="isrlab nightly nightly/night.yaml --results nights/",
        exit_codes="""0  no run shows an anomaly its cell does not allow
1  a run does
2  bad input, before anything starts
3  a run could not complete or be checked, or interrupted""",
        docs="nightly.md")
    n.add_argument("config", type=Path, metavar="CONFIG.yaml",
                   help="the night's configuration (docs/nightly.md)")
    n.add_argument("--results", type=Path, required=True, metavar="DIR",
                   help="the nights, the Parquet results table and trend.html live here")
    flags.add_port_flag(n)
    flags.add_hosts_flag(n)
    flags.add_master_flag(n)
    flags.add_no_server_flag(n)
    flags.add_output_flags(n)
    return n


def run(args: argparse.Namespace) -> int:
    """One night of the configured matrix; exit 1 for an anomaly a row does not
    allow, 3 for a run that did not complete or could not be checked."""
    night_cfg = nightly.load_config(args.config)  # FILE:LINE errors: exit 2, nothing started
    batchcheck.require_master(args.master)  # before the first cell, not after the last
    seed = night_cfg.seed if night_cfg.seed is not None else batchcheck.random_seed()
    night = nightly.night_id()
    night_dir = args.results / "nights" / night
    progress = flags.progress_of(args)
    total = sum(c.runs for c in night_cfg.cells)
    progress.line(f"nightly {night}: {len(night_cfg.cells)} cell(s), {total} run(s), seed "
                  f"{seed}; in {night_dir}")
    records: list[tuple[nightly.Cell, RunRecord]] = []
    interrupted: HarnessError | None = None
    done = 0
    # Every backend's options before the first run: a missing --hosts fails now.
    options_of = {b: flags.backend_options(args, backend=b)
                  for b in sorted({c.backend for c in night_cfg.cells})}
    for cell in night_cfg.cells:
        options = options_of[cell.backend]
        for i in range(cell.runs):
            done += 1
            scenario, meta = chaos_run(cell.config, seed + i)
            meta["chaos"].update(batch=night, run=i + 1, runs=cell.runs, cell=cell.name,
                                 row=cell.row, sets=cell.sets, allow=cell.allow)
            record = run_scenario(scenario, RunOptions(
                protocol=cell.protocol, backend=cell.backend, seed=seed + i,
                runs_dir=night_dir / cell.name, backend_options=options, meta=meta,
                status_every=batchcheck.STATUS_EVERY, status_prefix=f"{cell.name} run {i + 1}/"
                f"{cell.runs} ({done}/{total})", time_limit=cell.config.time_limit), progress)
            records.append((cell, record))
            if isinstance(record.error, Interrupted):
                interrupted = record.error
                break
            if record.error is not None:
                progress.line(f"{cell.name} run {i + 1} did not complete: {record.error}")
        if interrupted is not None:
            break
    if interrupted is not None:
        print(f"isrlab: interrupted; the night's runs are in {night_dir}: `isrlab check "
              f"{night_dir}` checks them", file=sys.stderr)
        return interrupted.exit_code
    results = batchcheck.check_batch_or_exit([r.run_dir for _, r in records], night_dir / INDEX,
                                  progress, night_dir, master=args.master,
                                  junit=night_dir / "junit.xml",
                                  results=args.results / "results",
                                  use_server=flags.use_server(args))
    if isinstance(results, int):
        return results
    by_dir = {r.run_dir.resolve(): r for r in results}
    runs_meta = []
    bad = 0
    for cell, record in records:
        r = by_dir.get(record.run_dir.resolve())
        found = (r.summary.get("found") or {}) if r is not None else {}
        not_allowed = sorted(k for k in found if k not in cell.allow)
        bad += bool(not_allowed)
        runs_meta.append({
            "run_id": record.run_id, "run_dir": str(record.run_dir), "row": cell.row,
            "cell": cell.name, "protocol": cell.protocol, "faults": cell.faults,
            "acks": cell.acks, "set": cell.set_name, "sets": cell.sets,
            "backend": cell.backend, "allow": cell.allow,
            "verdict": r.verdict if r is not None else None, "found": found,
            "not_allowed": not_allowed,
            "detection_s": nightly.detection_times(record.run_dir) if found else {},
            "throughput": nightly.throughput(r.summary) if r is not None else None,
            "report": batchcheck.report_of(r) if r is not None else None})
        if not args.json:
            kinds = ", ".join(f"{k} ×{n}" for k, n in found.items())
            mark = f" NOT ALLOWED: {', '.join(not_allowed)}" if not_allowed else ""
            print(f"{cell.name} seed {r.summary.get('seed') if r else '?'}: "
                  f"{r.verdict if r else 'not checked'}{': ' + kinds if kinds else ''}{mark}")
    meta_out = {"night": night, "config": str(args.config), "seed": seed,
                "index": str(night_dir / INDEX), "junit": str(night_dir / "junit.xml"),
                "runs": runs_meta}
    (night_dir / "night.json").write_text(json.dumps(meta_out, indent=1, default=str),
                                          encoding="utf-8")
    from reports.trend import render_trend  # pandas: only the nightly needs it

    trend_page = render_trend(args.results)
    if bad:
        code = 1
    elif any(r.error is not None for _, r in records) or any(
            x.verdict not in (VALID, "invalid") for x in results):
        code = 3
    else:
        code = 0
    if args.json:
        batchcheck.print_json({"night": night, "seed": seed, "index": str(night_dir / INDEX),
                    "junit": str(night_dir / "junit.xml"), "trend": str(trend_page),
                    "runs": runs_meta, "exit_code": code})
    else:
        print(f"night: {night_dir / INDEX}\ntrend: {trend_page}\n"
              f"{bad} of {len(records)} run(s) show an anomaly their row does not allow")
    return code
