"""`isrlab swarm`: simulated chaos runs with drawn configurations, spread over Spark
tasks on local[2], checked in one batch; a seed replays its run exactly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from checker.client import check
from harness.chaos.swarm import SwarmSpec, draw_config, simulate
from nemesis.schedule import parse_faults


def _swarm(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    master = [] if "--master" in args else ["--master", "local[2]"]
    return subprocess.run([sys.executable, "-m", "harness.cli", "swarm", *args,
                           "--runs-dir", str(tmp), *master],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_draws_follow_the_seed_and_keep_what_is_pinned():
    spec = SwarmSpec.of("latest", faults=parse_faults("kill,pause"), acks="all",
                        broker_config={"min.insync.replicas": 2})
    a, b = draw_config(spec, 5), draw_config(spec, 5)
    assert a == b  # the seed alone decides
    assert [str(f) for f in a.faults] == ["kill", "pause"] and a.acks == "all"
    assert a.broker_config["min.insync.replicas"] == 2
    drawn = {str(draw_config(SwarmSpec.of("0.10"), s).faults) for s in range(20)}
    assert len(drawn) > 5  # unpinned, the fault mix varies from seed to seed


@pytest.mark.spark
def test_swarm_finds_and_replays(tmp_path):
    # Seeds 10-15 under 0.10: two find a loss (12, 14), four find nothing.
    r = _swarm(tmp_path / "a", "--protocol", "0.10", "--runs", "6", "--seed", "10", "--json")
    assert r.returncode in (0, 1), r.stderr
    out = json.loads(r.stdout)
    assert out["seeds"] == {"first": 10, "count": 6} and len(out["runs"]) == 6
    assert all(row["verdict"] is not None for row in out["runs"]), out["runs"]
    found: dict[str, list[int]] = {}
    for row in out["runs"]:
        for k in row["found"]:
            found.setdefault(k, []).append(row["seed"])
    assert out["finding_seeds"] == found
    assert r.returncode == (1 if found else 0) == out["exit_code"]
    assert Path(out["index"]).is_file()
    # A report for each run that found something; the clean runs are only checked
    # (their summary.json), a render each would cost more than their check.
    for row in out["runs"]:
        out_dir = Path(row["run_dir"]) / "check"
        assert (out_dir / "summary.json").is_file()
        assert (row["report"] is not None) == bool(row["found"]), row
        assert (out_dir / "report.html").is_file() == bool(row["found"])
    assert found and any(not row["found"] for row in out["runs"]), found
    # One seed again, alone, as a swarm task runs it (harness.chaos.swarm.simulate): the
    # same run, byte for byte, and the same finding.
    seed = next(iter(found.values()))[0]
    again = simulate(seed, SwarmSpec.of("0.10"), str(tmp_path / "b"), "b")
    row1 = next(row for row in out["runs"] if row["seed"] == seed)
    run1, run2 = Path(row1["run_dir"]), Path(again["run_dir"])
    assert again["config"] == row1["config"]
    logs = sorted(str(p.relative_to(run1)) for p in run1.glob("replicas/*/log.jsonl"))
    for f in ("history.jsonl", "events.jsonl", *logs):
        assert (run2 / f).read_bytes() == (run1 / f).read_bytes(), f
    (result,) = check([run2])
    assert sorted({a["kind"] for a in result.anomalies}) == sorted(row1["found"])


@pytest.mark.parametrize(("args", "said"), [
    (["--runs", "x"], "'x' is not an integer"),
    (["--runs", "2", "--seed", "-1"], "negative"),
    (["--runs", "2", "--faults", "meteor"], "unknown fault 'meteor'"),
    (["--runs", "2", "--master", "sc://localhost:15002"], "Spark Connect"),
])
def test_bad_input_is_exit_2(tmp_path, args, said):
    r = _swarm(tmp_path, "--protocol", "0.10", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert said in r.stderr and "Traceback" not in r.stderr
