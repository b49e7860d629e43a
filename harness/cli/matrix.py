"""`isrlab matrix`, `isrlab reproduce --variant X | --all-variants`, and the
one-line-per-scenario listing of `isrlab scenarios`.

Registered into harness/cli/__init__.py's parser by `register` and dispatched by
`dispatch` (before cli_chaos: a scenario with variants or figure assertions run
several times is this module's). Every run of a command is checked in ONE Spark
batch (cli_chaos.check_batch: reports and the batch's run list), then each run's
figure assertions are judged (harness.run.assertions) and a failed one makes its
verdict invalid.

`matrix` runs every scenario x variant x protocol version (N runs each), prints
rows of scenarios/variants against columns of versions, each cell `✓` when every
run gave exactly the documented anomalies and passed its assertions, else what
differed (`+kind` found but not expected, `-kind` expected but not found,
`assert FIGURE`, `incomplete`, `error`), writes index.html with the same matrix
linking each run's report, and exits 0 only when every cell matches (1
otherwise, 2 on bad input, 3 when interrupted).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import secrets
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from broker.protocol import VERSIONS
from checker.api import RunResult
from checker.verdict import ERROR, INCOMPLETE, VALID
from contract import ASSERTIONS_JSON, CHECK, PROTOCOLS, REPORT_HTML
from harness.backends import BACKENDS
from harness.cli import checker as cli_checker
from harness.errors import Interrupted, UsageError
from harness.progress import Progress
from harness.run.runner import RunOptions, RunRecord, run_scenario
from harness.scenario.loader import (
    Scenario,
    all_variants,
    find_scenario,
    list_scenarios,
    load_scenario,
)

INDEX = "index.html"
RUNS_INDEX = "runs.html"  # the checker's per-run index page of the batch
OK_MARK = "✓"
DOCKER_PORT_STRIDE = 16  # host ports per docker run: one per node, and room to spare


def register(sub: argparse._SubParsersAction) -> None:
    """Add `matrix`, and `--variant`/`--all-variants` to `reproduce`."""
    from harness.cli import chaos as cli_chaos

    cli = cli_chaos._cli()
    m = sub.add_parser("matrix", help="every scenario x variant x version, checked in one "
                                      "Spark batch, as a matrix of verdicts")
    m.add_argument("--backend", default="local", choices=sorted(BACKENDS))
    m.add_argument("--runs", type=cli_chaos._type(cli_chaos._positive_int), default=1,
                   metavar="N", help="runs per cell (default 1)")
    m.add_argument("--scenario", action="append", metavar="NAME|PATH",
                   help="only these scenarios (repeatable; default: every shipped one)")
    m.add_argument("--protocol", action="append", choices=PROTOCOLS,
                   help=f"only these versions (repeatable; default: {', '.join(VERSIONS)})")
    m.add_argument("--seed", type=cli._seed, default=0,
                   help="run i of a cell uses seed S+i (default 0)")
    m.add_argument("--runs-dir", type=Path, default=Path("runs"))
    m.add_argument("--port", type=cli._port, default=19092,
                   help="the first run's port; with --jobs, job slot k uses PORT + "
                        f"k (local) or PORT + {DOCKER_PORT_STRIDE}k (docker)")
    m.add_argument("--jobs", type=cli_chaos._type(cli_chaos._positive_int), default=1,
                   metavar="N", help="runs at a time (default 1): each run mostly waits on "
                                     "its brokers' timers, so a few fit on one machine")
    cli.add_hosts_flag(m)
    cli_checker.add_no_server_flag(m)
    cli._output_flags(m)

    r = sub.choices["reproduce"]
    g = r.add_mutually_exclusive_group()
    g.add_argument("--variant", metavar="X", help="run this variant of the scenario "
                                                  "(default: the first it declares)")
    g.add_argument("--all-variants", action="store_true",
                   help="run every variant, checked in one batch, one verdict line each")


def dispatch(args: argparse.Namespace) -> int | None:
    if args.command == "matrix":
        return cmd_matrix(args)
    if args.command == "reproduce":
        if args.all_variants:
            return cmd_reproduce_variants(args)
        if getattr(args, "runs", 1) > 1:
            scenario = load_scenario(find_scenario(args.scenario), args.variant)
            if scenario.variants or scenario.assertions:
                return cmd_reproduce_variants(args)
    return None


# -- `isrlab scenarios` ------------------------------------------------------


def expect_line(scenario: Scenario) -> str:
    """Compact expectations per version: `0.10 lost-write · 0.11+ none`."""
    parts: list[str] = []
    last: list[str] | None = None
    for v in VERSIONS:
        kinds = sorted(scenario.expect_for(v))
        if kinds != last:
            parts.append(f"{v}+ {','.join(kinds) or 'none'}")
            last = kinds
    if parts and len(parts) == 1:
        return parts[0].replace(f"{VERSIONS[0]}+ ", "all ")
    # An entry that holds for one version only is written without its +.
    out = []
    for i, p in enumerate(parts):
        v = p.split()[0][:-1]
        nxt = parts[i + 1].split()[0][:-1] if i + 1 < len(parts) else None
        following = VERSIONS[VERSIONS.index(v) + 1] if v != VERSIONS[-1] else None
        out.append(p.replace(f"{v}+", v, 1) if nxt is not None and nxt == following else p)
    return " · ".join(out)


def scenario_lines() -> list[str]:
    out = []
    for s in list_scenarios():
        out.append(f"{s.name}: {s.description}")
        out.append(f"    source: {s.source or '-'}")
        for v in all_variants(s):
            label = f"[{v.variant}] " if v.variant else ""
            asserted = f" · asserts {len(v.assertions)}" if v.assertions else ""
            out.append(f"    {label}expect {expect_line(v)}{asserted}")
    return out


# -- running and judging -----------------------------------------------------


@dataclass
class Cell:
    row: str  # the scenario (or scenario-variant) name
    protocol: str
    records: list[RunRecord] = field(default_factory=list)
    # Per run: (verdict with assertions, found kinds, unexpected, missing, failed assertions)
    outcomes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return bool(self.outcomes) and all(o["verdict"] == VALID for o in self.outcomes)

    def text(self) -> str:
        if self.matches:
            return OK_MARK
        bad = [o for o in self.outcomes if o["verdict"] != VALID]
        diff = _difference(bad[0]) if bad else "not run"
        n = len(self.outcomes)
        return f"{n - len(bad)}/{n} {diff}" if n > 1 else diff


def _difference(o: dict[str, Any]) -> str:
    if o["verdict"] in (INCOMPLETE, ERROR):
        return o["verdict"]
    parts = [f"+{k}" for k in o["unexpected"]] + [f"-{k}" for k in o["missing"]]
    parts += [f"assert {a['figure']}" for a in o["failed_assertions"]]
    return " ".join(parts) or o["verdict"]


def run_cells(rows: list[Scenario], protocols: list[str], runs: int, batch: Path,
              args: argparse.Namespace, progress: Progress) -> list[Cell] | int:
    """Run every row x protocol `runs` times into `batch`, check them in one batch and
    judge the assertions; an exit status instead when interrupted or the checker fails."""
    from harness.cli import chaos as cli_chaos

    stride = DOCKER_PORT_STRIDE if args.backend == "docker" else 1
    jobs = getattr(args, "jobs", 1)
    if args.backend == "ssh" and jobs > 1:
        raise UsageError("--jobs > 1 needs ports of its own per run; the ssh backend takes "
                         "its ports from the hosts file: run the matrix with --jobs 1")
    options_at = {slot: cli_chaos._cli().backend_options(args, port=args.port + slot * stride)
                  for slot in range(jobs)}  # before the first run: a bad --hosts fails now
    cells: list[Cell] = []
    plan: list[tuple[Cell, Scenario, int]] = []
    for s in rows:
        for p in protocols:
            cell = Cell(s.run_name, p)
            cells.append(cell)
            plan += [(cell, s, i) for i in range(runs)]
    total = len(plan)
    records: list[RunRecord | None] = [None] * total
    slots = list(range(jobs))  # free job slots: slot k runs on port + k * stride
    lock = threading.Lock()
    stop = threading.Event()
    # Parallel runs' step lines would interleave: then only the run lines show.
    run_progress = progress if jobs == 1 else Progress(quiet=True)

    def run(n: int) -> None:
        cell, s, i = plan[n]
        if stop.is_set():
            return
        with lock:
            slot = slots.pop()
            progress.line(f"[{n + 1}/{total}] {s.run_name} under {cell.protocol}")
        options = options_at[slot]
        try:
            record = run_scenario(s, RunOptions(
                protocol=cell.protocol, backend=args.backend, seed=(args.seed or 0) + i,
                runs_dir=batch, backend_options=options), run_progress)
        finally:
            with lock:
                slots.append(slot)
        records[n] = record
        if isinstance(record.error, Interrupted):
            stop.set()

    if jobs == 1:
        for n in range(total):
            run(n)
            if stop.is_set():
                break
    else:
        # Ctrl-C reaches this (the main) thread: no new run starts, the runs in
        # flight end as they would, and the batch is left checkable.
        with ThreadPoolExecutor(jobs, thread_name_prefix="isrlab-run") as pool:
            futures = [pool.submit(run, n) for n in range(total)]
            try:
                for f in futures:
                    while not f.done():
                        wait([f], timeout=0.1)
                    f.result()
            except (KeyboardInterrupt, Interrupted):
                stop.set()
    done = [r for r in records if r is not None]
    if stop.is_set():
        print(f"isrlab: interrupted; the runs are in {batch}: "
              f"`isrlab check {batch}` checks them", file=sys.stderr)
        return Interrupted.exit_code
    for (cell, _, _), record in zip(plan, done, strict=True):
        cell.records.append(record)
    results = cli_chaos.check_batch_or_exit([r.run_dir for c in cells for r in c.records],
                                            batch / RUNS_INDEX, progress, batch,
                                            use_server=cli_checker.use_server(args))
    if isinstance(results, int):
        return results
    by_dir = {r.run_dir.resolve(): r for r in results}
    for c in cells:
        for rec in c.records:
            c.outcomes.append(judge(rec, by_dir.get(rec.run_dir.resolve())))
    return cells


def judge(record: RunRecord, result: RunResult | None) -> dict[str, Any]:
    """One run's outcome: its verdict (check_batch judged the figure assertions)."""
    if result is None:
        return {"run_dir": record.run_dir, "verdict": ERROR, "found": [], "unexpected": [],
                "missing": [], "failed_assertions": [], "messages": ["not checked"],
                "anomalies": []}
    messages = list(result.summary.get("assertions_failed") or [])
    failed: list[dict[str, Any]] = []
    path = record.run_dir / CHECK / ASSERTIONS_JSON
    if messages and path.exists():
        failed = [a for a in json.loads(path.read_text())["assertions"] if not a["ok"]]
    return {"run_dir": record.run_dir, "verdict": result.verdict,
            "found": sorted({a["kind"] for a in result.anomalies}),
            "unexpected": result.unexpected, "missing": result.missing,
            "failed_assertions": failed, "messages": messages,
            "anomalies": result.anomalies}


def _new_batch(runs_dir: Path, what: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return runs_dir / f"{stamp}-{what}-{secrets.token_hex(3)}"


# -- matrix ------------------------------------------------------------------


def cmd_matrix(args: argparse.Namespace) -> int:
    names = args.scenario or [s.name for s in list_scenarios()]
    scenarios = [load_scenario(find_scenario(n)) for n in names]  # bad input: exit 2 first
    rows = [v for s in scenarios for v in all_variants(s)]
    protocols = list(dict.fromkeys(args.protocol or VERSIONS))
    progress = Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)
    batch = _new_batch(args.runs_dir, "matrix")
    progress.line(f"matrix: {len(rows)} row(s) x {len(protocols)} version(s) x {args.runs} "
                  f"run(s) on {args.backend}; runs in {batch}")
    cells = run_cells(rows, protocols, args.runs, batch, args, progress)
    if isinstance(cells, int):
        return cells
    index = write_index(cells, rows, protocols, batch / INDEX)
    code = 0 if all(c.matches for c in cells) else 1
    if args.json:
        print(json.dumps({"batch": str(batch), "index": str(index), "exit_code": code,
                          "cells": [{"row": c.row, "protocol": c.protocol, "cell": c.text(),
                                     "runs": [{"run_dir": str(o["run_dir"]),
                                               "verdict": o["verdict"], "found": o["found"],
                                               "assertions": o["messages"]}
                                              for o in c.outcomes]} for c in cells]}))
        return code
    for line in matrix_lines(cells, rows, protocols):
        print(line)
    for c in cells:
        for o in c.outcomes:
            for m in o["messages"]:
                print(f"  {c.row} {c.protocol}: {m}")
    bad = sum(not c.matches for c in cells)
    print(f"matches the catalogue in {len(cells) - bad}/{len(cells)} cell(s)")
    print(f"index: {index}")
    return code


def matrix_lines(cells: list[Cell], rows: list[Scenario], protocols: list[str]) -> list[str]:
    at = {(c.row, c.protocol): c for c in cells}
    names = [r.run_name for r in rows]
    width = max(len(n) for n in names)
    cols = [max(len(p), *(len(at[n, p].text()) for n in names)) for p in protocols]
    out = [" ".join([" " * width, *(p.ljust(w) for p, w in zip(protocols, cols, strict=True))])]
    for n in names:
        out.append(" ".join([n.ljust(width), *(at[n, p].text().ljust(w)
                                               for p, w in zip(protocols, cols, strict=True))]))
    return [line.rstrip() for line in out]


def write_index(cells: list[Cell], rows: list[Scenario], protocols: list[str],
                out: Path) -> Path:
    """The matrix as a page: each cell links every run's report (relative links)."""
    at = {(c.row, c.protocol): c for c in cells}
    out = out.resolve()
    head = "".join(f"<th>{html.escape(p)}</th>" for p in protocols)
    body = []
    for r in rows:
        tds = []
        for p in protocols:
            c = at[r.run_name, p]
            links = []
            for i, o in enumerate(c.outcomes, 1):
                report = Path(o["run_dir"]) / CHECK / REPORT_HTML
                target = report if report.is_file() else Path(o["run_dir"])
                title = html.escape(f"{o['verdict']}: {', '.join(o['found']) or 'no anomaly'}"
                                    + "".join(f"; {m}" for m in o["messages"]), quote=True)
                links.append(f'<a href="{html.escape(os.path.relpath(target, out.parent))}" '
                             f'title="{title}">{i}</a>')
            cls = "ok" if c.matches else "bad"
            tds.append(f'<td class="{cls}">{html.escape(c.text())}<br><small>'
                       f'{" ".join(links)}</small></td>')
        expect = html.escape(expect_line(r))
        body.append(f"<tr><th>{html.escape(r.run_name)}<br><small>{expect}</small></th>"
                    f"{''.join(tds)}</tr>")
    bad = sum(not c.matches for c in cells)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>isrlab matrix</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }}
td.ok {{ background: #e6f4ea; }} td.bad {{ background: #fce8e6; }}
small {{ color: #555; }}
</style></head><body>
<h1>Scenario matrix</h1>
<p>Matches the catalogue in {len(cells) - bad}/{len(cells)} cell(s). A cell is {OK_MARK} when
every run showed exactly the documented anomalies and passed its assertions; otherwise
what differed: +kind found but not expected, -kind expected but not found, assert
FIGURE failed. The numbers link each run's report; <a href="{RUNS_INDEX}">all runs</a>.</p>
<table><tr><th></th>{head}</tr>
{chr(10).join(body)}
</table></body></html>
"""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out


# -- reproduce --all-variants / --runs N with variants or assertions -----------


def cmd_reproduce_variants(args: argparse.Namespace) -> int:
    """The scenario's variants (all, or the one chosen) under one version, N runs
    each, checked in one batch; one verdict line per run."""
    base = load_scenario(find_scenario(args.scenario), args.variant)
    rows = all_variants(base) if args.all_variants else [base]
    if args.base_image:
        raise UsageError("--base-image is not supported with --all-variants or --runs here; "
                         "build the image first (isrlab docker build --base-image IMAGE)")
    progress = Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)
    batch = _new_batch(args.runs_dir, f"{base.name}-{args.protocol}")
    args.seed = args.seed if args.seed is not None else 0
    cells = run_cells(rows, [args.protocol], args.runs, batch, args, progress)
    if isinstance(cells, int):
        return cells
    outcomes = [(c, o) for c in cells for o in c.outcomes]
    if args.json:
        print(json.dumps({"scenario": base.name, "protocol": args.protocol, "batch": str(batch),
                          "runs": [{"variant": c.row, "run_dir": str(o["run_dir"]),
                                    "verdict": o["verdict"], "found": o["found"],
                                    "assertions": o["messages"]} for c, o in outcomes]}))
    else:
        for c, o in outcomes:
            want = next(r for r in rows if r.run_name == c.row).expect_for(args.protocol)
            found = ", ".join(o["found"]) or "no anomaly"
            print(f"{c.row}: verdict {o['verdict']} (found {found}; expected "
                  f"{', '.join(want) or 'no anomaly'})  {o['run_dir']}")
            for m in o["messages"]:
                print(f"  {m}")
        print(f"index: {batch / RUNS_INDEX}")
    # As `reproduce`: 1 for an anomaly or a run not valid, 3 when the only trouble
    # is runs that did not finish or could not be read.
    if any(o["anomalies"] or o["verdict"] not in (VALID, INCOMPLETE, ERROR)
           for _, o in outcomes):
        return 1
    return 3 if any(o["verdict"] != VALID for _, o in outcomes) else 0
