"""`isrlab shrink`: a simulated chaos run's loss in fewer faults and operations,
written as a scenario that replays it exactly on the simulator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from harness.chaos.shrink import Candidate, compressed, packages_of, without_chunks


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200)


SCHEDULE = [{"at": 1.0, "f": "kill", "nodes": ["A"]}, {"at": 2.0, "f": "recover"},
            {"at": 5.0, "f": "pause", "nodes": ["B"]}, {"at": 5.5, "f": "kill", "nodes": ["C"]},
            {"at": 7.0, "f": "recover"}, {"at": 9.0, "f": "recover"},
            {"at": 10.0, "f": "final-read"}]


def test_packages_and_candidates():
    pk = packages_of(SCHEDULE)
    assert [[op["f"] for op in p] for p in pk] == [["kill", "recover"],
                                                   ["pause", "kill", "recover"]]
    c = Candidate(pk, 10.0, 2, 1, "start")
    assert [x.what for x in without_chunks(c, 1)] == ["without package 1 of 2",
                                                      "without package 2 of 2"]
    assert without_chunks(c, 1)[0].schedule()[-2:] == [{"at": 8.0, "f": "recover"},
                                                        {"at": 9.0, "f": "final-read"}]
    (short,) = compressed(c)
    assert [op["at"] for p in short.packages for op in p] == [1.0, 2.0, 3.0, 3.5, 5.0]


@pytest.mark.spark
def test_shrinks_a_found_loss_and_the_scenario_replays_it(tmp_path):
    # Every broker power-cycled at once, nothing fsynced (flush.messages null): what
    # was acknowledged is gone from every replica. Pauses around it change nothing.
    r = _cli("chaos", "--backend", "sim", "--protocol", "0.10", "--faults",
             "power-cycle:all,pause", "--time-limit", "12s", "--rate", "20", "--batch", "1",
             "--producers", "2", "--partitions", "1", "--interval", "2", "--runs", "1",
             "--seed", "11", "--runs-dir", str(tmp_path / "runs"), "--json")
    out = json.loads(r.stdout)
    found = [x for x in out["runs"] if "lost-write" in x["found"]]
    assert found, out["runs"]
    run = Path(found[0]["run_dir"])
    meta = json.loads((run / "run.json").read_text())
    before = len(packages_of(meta["chaos"]["schedule"]))
    yaml_out = tmp_path / "shrunk.yaml"
    s = _cli("shrink", str(run), "--kind", "lost-write", "--out", str(yaml_out), "--quiet")
    assert s.returncode == 0, s.stdout + s.stderr
    shrunk = Path(next(x for x in s.stdout.splitlines() if x.startswith("run: "))[5:])
    smeta = json.loads((shrunk / "run.json").read_text())
    after = len(packages_of(smeta["chaos"]["schedule"]))
    ops = [sum(1 for x in open(d / "history.jsonl") if '"type":"invoke"' in x)
           for d in (run, shrunk)]
    assert after <= before and ops[1] < ops[0], (before, after, ops)
    # The scenario replays the shrunk run on the simulator, byte for byte.
    again = _cli("reproduce", str(yaml_out), "--protocol", "0.10", "--backend", "sim",
                 "--seed", str(meta["seed"]), "--runs-dir", str(tmp_path / "again"), "--json")
    (summary,) = json.loads(again.stdout.strip().splitlines()[-1])["runs"]
    assert "lost-write" in {a["kind"] for a in summary["anomalies"]}
    assert (Path(summary["run_dir"]) / "history.jsonl").read_bytes() == \
        (shrunk / "history.jsonl").read_bytes()


def test_shrink_refuses_a_run_that_is_not_a_sim_chaos_run(tmp_path):
    r = _cli("shrink", str(ROOT / "tests" / "data"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
