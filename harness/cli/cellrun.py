"""Scenario x protocol cells, for `isrlab matrix` and `reproduce --all-variants`:
each cell's runs, checked in one batch and judged against the scenario's
`expect`. A cell whose version the scenario's path does not exist in (its
`reachable`) is not run: it is "not reachable", has no verdict and is no
mismatch."""

from __future__ import annotations

import argparse
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from broker.protocol import VERSIONS
from checker.verdict import ERROR, INCOMPLETE, VALID, RunResult
from contract import ASSERTIONS_JSON, CHECK
from contract.rundir import read_json
from harness.backends.ports import MAX_PORT
from harness.cli.batchcheck import check_batch_or_exit, detail_lines, outcome_line, run_json
from harness.cli.flags import backend_options, use_server
from harness.errors import Interrupted, UsageError
from harness.progress import Progress
from harness.run.runner import RunOptions, RunRecord, run_scenario
from harness.scenario.loader import NOT_REACHABLE, Scenario

if TYPE_CHECKING:
    pass

T = TypeVar("T")

# -- scenario x protocol cells (matrix, reproduce --all-variants) --------------

RUNS_INDEX = "runs.html"  # the checker's per-run index page of the batch
OK_MARK = "✓"
DOCKER_PORT_STRIDE = 16  # host ports per docker run: one per node, and room to spare
# Ports per local run: every node's, and a broker's Kafka listener on the next one.
LOCAL_PORT_STRIDE = 2


def expect_line(scenario: Scenario) -> str:
    """Compact expectations per version, in the "X+" form of `expect`:
    `0.10 lost-write · 0.11+ none`; versions outside the scenario's `reachable`
    say so: `0.10+ not reachable · 2.7 lost-write · 3.7+ none`."""
    stretches: list[tuple[str, str]] = []  # (first version, what it expects) of each
    for v in VERSIONS:
        label = _expect_label(scenario, v)
        if not stretches or stretches[-1][1] != label:
            stretches.append((v, label))
    if len(stretches) == 1:
        return f"all {stretches[0][1]}"
    out = []
    for (v, label), nxt in zip(stretches, [*stretches[1:], None], strict=True):
        # An entry that holds for one version only is written without its +.
        one = nxt is not None and VERSIONS.index(nxt[0]) == VERSIONS.index(v) + 1
        out.append(f"{v}{'' if one else '+'} {label}")
    return " · ".join(out)


def _expect_label(scenario: Scenario, protocol: str) -> str:
    if not scenario.reachable_at(protocol):
        return NOT_REACHABLE
    return ",".join(sorted(scenario.expect_for(protocol))) or "none"


@dataclass
class Cell:
    row: str  # the scenario (or scenario-variant) name
    protocol: str
    records: list[RunRecord] = field(default_factory=list)
    # Per run: (verdict with assertions, found kinds, unexpected, missing, failed assertions)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    # Why the cell is not run (the scenario's path does not exist under the
    # version: one line naming both and why); None for a cell that is run.
    not_reachable: str | None = None

    @property
    def matches(self) -> bool:
        return bool(self.outcomes) and all(o["verdict"] == VALID for o in self.outcomes)

    @property
    def mismatch(self) -> bool:
        """A cell that was to be run and did not match; a not reachable one never is."""
        return self.not_reachable is None and not self.matches

    def text(self) -> str:
        if self.not_reachable is not None:
            return NOT_REACHABLE
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


def slot_options(args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    """Each job slot's backend options (slot k runs on --port + k * the backend's
    stride), checked: a --jobs or --hosts that cannot work is UsageError, exit 2.
    Called before the batch's directory is made, so a refused matrix leaves nothing."""
    stride = {"docker": DOCKER_PORT_STRIDE, "local": LOCAL_PORT_STRIDE}.get(args.backend, 1)
    jobs = getattr(args, "jobs", 1)
    if args.backend == "ssh" and jobs > 1:
        raise UsageError("--jobs > 1 needs ports of its own per run; the ssh backend takes "
                         "its ports from the hosts file: run the matrix with --jobs 1")
    last = args.port + (jobs - 1) * stride
    if last > MAX_PORT:  # also bounds the slots made below (--jobs 10^20 took all memory)
        raise UsageError(f"--jobs {jobs} needs ports up to {last} (--port {args.port} and "
                         f"{stride} more per job slot); the last port is {MAX_PORT}")
    return {slot: backend_options(args, port=args.port + slot * stride)
            for slot in range(jobs)}


def run_cells(rows: list[Scenario], protocols: list[str], runs: int, batch: Path,
              args: argparse.Namespace, progress: Progress,
              options_at: dict[int, dict[str, Any]]) -> list[Cell] | int:
    """Run every row x protocol `runs` times into `batch` (job slots and their
    options: slot_options), check them in one batch and judge the assertions; an
    exit status instead when interrupted or the checker fails. A cell the row's
    path does not reach is returned not run (`not_reachable`)."""
    jobs = len(options_at)
    cells: list[Cell] = []
    plan: list[tuple[Cell, Scenario, int]] = []
    for s in rows:
        for p in protocols:
            cell = Cell(s.run_name, p, not_reachable=s.unreachable(p))
            cells.append(cell)
            if cell.not_reachable is None:
                plan += [(cell, s, i) for i in range(runs)]
    if not plan:  # every cell is not reachable: nothing to run or check
        return cells
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
                protocol=cell.protocol, backend=args.backend, seed=args.seed + i,
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
    results = check_batch_or_exit([r.run_dir for c in cells for r in c.records],
                                  batch / RUNS_INDEX, progress, batch,
                                  use_server=use_server(args))
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
                "anomalies": [], "result": None, "result_line": "not checked",
                "details": ["not checked"]}
    messages = list(result.summary.get("assertions_failed") or [])
    failed: list[dict[str, Any]] = []
    if messages:  # check_batch's judgement, just written
        judged, _ = read_json(record.run_dir, f"{CHECK}/{ASSERTIONS_JSON}")
        failed = [a for a in judged["assertions"] if not a["ok"]]
    return {"run_dir": record.run_dir, "verdict": result.verdict,
            "found": sorted({a["kind"] for a in result.anomalies}),
            "unexpected": result.unexpected, "missing": result.missing,
            "failed_assertions": failed, "messages": messages,
            "anomalies": result.anomalies, "result": result,
            "result_line": outcome_line(result),
            "details": [line.strip() for line in detail_lines(result, verbose=True)]}


def outcome_json(cell: Cell, o: dict[str, Any]) -> dict[str, Any]:
    """One run of a cell as --json lists it (batchcheck.run_json): with its variant
    (the row) and its failed assertions."""
    if o["result"] is None:
        return {"run_id": None, "run_dir": str(o["run_dir"]), "scenario": cell.row,
                "protocol": cell.protocol, "seed": None, "verdict": ERROR,
                "data": None, "documentation": None,
                "expected": [], "found": {}, "report": None, "variant": cell.row,
                "assertions": o["messages"]}
    return run_json(o["result"], o["run_dir"], variant=cell.row, assertions=o["messages"])
