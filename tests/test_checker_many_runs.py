"""A batch of thousands of runs (a swarm's) checks as one of them does: no plan of
the check grows with the number of runs in the batch (an OR of one condition per
run overflowed the JVM's stack at ~1,000 runs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from checker.api import check_runs
from harness.progress import Progress
from harness.run.runner import RunOptions, run_scenario
from harness.scenario.loader import find_scenario, load_scenario

pytestmark = pytest.mark.spark

RUNS = 2000


def _inputs(run: Path) -> dict:
    return json.loads((run / "check" / "report-inputs.json").read_text())


def test_a_batch_of_2000_small_runs_is_judged_as_each_run_alone(tmp_path: Path) -> None:
    rec = run_scenario(load_scenario(find_scenario("kip101-hw-truncation-loss")),
                       RunOptions(protocol="0.10", backend="sim", seed=1,
                                  runs_dir=tmp_path / "one"),
                       Progress(quiet=True))
    assert rec.error is None
    (alone,) = check_runs([rec.run_dir])
    assert alone.verdict == "valid" and [a["kind"] for a in alone.anomalies] == ["lost-write"]
    trace = _inputs(rec.run_dir)["trace"]
    assert trace["rows"], "a sim run's report has its trace table"
    batch = tmp_path / "batch"
    for i in range(RUNS):
        run = batch / f"run-{i:04d}"
        shutil.copytree(rec.run_dir, run, ignore=shutil.ignore_patterns("check"))
        meta = json.loads((run / "run.json").read_text())
        (run / "run.json").write_text(json.dumps({**meta, "run_id": run.name}))
    results = check_runs([batch])
    assert len(results) == RUNS
    assert {(r.verdict, tuple(a["kind"] for a in r.anomalies)) for r in results} == {
        ("valid", ("lost-write",))}
    for i in (0, RUNS // 2, RUNS - 1):
        assert _inputs(batch / f"run-{i:04d}")["trace"] == trace
