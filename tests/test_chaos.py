"""`isrlab chaos` and `isrlab export` as a user meets them (subprocesses, real local
brokers): bad input is one line and exit 2 with nothing started; two short runs
are checked in one Spark batch; Ctrl-C leaves the cluster stopped and the run a
checkable prefix; a run exports as a scenario the loader accepts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, child_env, free_port
from test_cli import isrlab, one_line_error, processes_mentioning

from contract.rundir import read_history
from harness.scenario.loader import load_scenario
from nemesis.schedule import ScheduleSpec, parse_faults, schedule

CHAOS = ["chaos", "--protocol", "0.10", "--time-limit", "10s"]


@pytest.mark.parametrize("args, message", [
    (["--faults", "kill,explode"], "argument --faults: unknown fault 'explode'; known: kill,"),
    (["--faults", "kill:everyone"],
     "argument --faults: unknown target 'everyone' for kill; known: one, leader, minority, all"),
    (["--faults", "halves:leader"], "argument --faults: halves takes no target"),
    (["--time-limit", "sixty"], "argument --time-limit: time limit 'sixty' does not parse"),
    (["--time-limit", "0s"], "argument --time-limit: time limit '0s' must be more than 0"),
    (["--set", "min.insync.replicas=two"],
     "argument --set: 'min.insync.replicas=two': 'two' is not an integer"),
    (["--set", "min.insync.replica=2"],
     "argument --set: 'min.insync.replica=2': unknown broker or controller config key"),
    (["--set", "unclean.leader.election.enable=1"],
     "must be true or false"),
    (["--runs", "0"], "argument --runs: 0 is not >= 1"),
    (["--set", "eligible.leader.replicas.version=2"], "must be 0 or 1, got 2"),
])
def test_bad_input_is_one_line_and_starts_nothing(tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    runs = tmp_path / "runs"
    line = one_line_error(isrlab(*CHAOS, *args, "--runs-dir", str(runs)))
    assert line.startswith("isrlab: error: ") and message in line, line
    assert not runs.exists()


def test_a_setting_its_release_lacks_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    """A key every release knows, with a value this release does not have (the
    KIP-966 switch under 0.10): refused once the release is known, before a run."""
    runs = tmp_path / "runs"
    line = one_line_error(isrlab(*CHAOS, "--set", "eligible.leader.replicas.version=1",
                                 "--runs-dir", str(runs)))
    assert line == ("isrlab: protocol 0.10: controller config 'eligible.leader.replicas.version'"
                    " 1 needs protocol 4.0 or later (KIP-966), not 0.10"), line
    assert not runs.exists()


def test_reproduce_runs_must_be_positive(tmp_path: Path) -> None:
    line = one_line_error(isrlab("reproduce", "kip101-hw-truncation-loss", "--protocol",
                                 "0.10", "--runs", "0"))
    assert "argument --runs: 0 is not >= 1" in line


@pytest.mark.spark
@pytest.mark.e2e
def test_two_runs_checked_in_one_batch_and_exported(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    r = isrlab("chaos", "--protocol", "0.10", "--time-limit", "6s", "--runs", "2",
               "--seed", "11", "--faults", "kill,power-cycle", "--runs-dir", str(runs),
               "--port", str(free_port()), "--rate", "100", "--json")
    assert r.returncode in (0, 1), (r.returncode, r.stderr[-3000:])
    out = json.loads(r.stdout)
    assert out["seed"] == 11 and len(out["runs"]) == 2
    # Exit status: 1 exactly when a run shows an anomaly.
    assert r.returncode == (1 if any(x["found"] for x in out["runs"]) else 0)
    assert r.stderr.count("starting Spark for 2 run(s)") == 1  # one batch
    assert "status: run 1/2 · " in r.stderr and "ops/s" in r.stderr
    batch = Path(out["batch"])
    assert (batch / "index.html").is_file() and Path(out["index"]) == batch / "index.html"
    spec = ScheduleSpec(parse_faults("kill,power-cycle"), ["A", "B", "C"],
                        [("t", 0), ("t", 1), ("t", 2)], 6.0, 3.0, 4.0, 2.0,
                        overlap=0.5, gap=3.0)  # half 0.10's 6 s session timeout
    for i, run in enumerate(out["runs"]):
        d = Path(run["run_dir"])
        assert d.parent == batch and run["report"] and Path(run["report"]).is_file()
        meta = json.loads((d / "run.json").read_text())
        assert meta["status"] == "complete" and meta["seed"] == 11 + i
        assert meta["scenario"] is None and meta["expect"] == []
        # The schedule the seed gives, recorded whole, with its parameters.
        assert meta["chaos"]["schedule"] == schedule(spec, 11 + i)
        assert meta["chaos"]["faults"] == ["kill", "power-cycle"]
        assert meta["chaos"]["run"] == i + 1 and meta["chaos"]["runs"] == 2
        assert meta["nemesis"][-1]["kind"] == "final-read"
        ops = read_history(d)
        sends = [o for o in ops if o["f"] == "send" and o["type"] == "ok"]
        assert {o["process"] for o in sends} <= set(range(100, 104))
        assert {o["partition"] for o in sends} == {0, 1, 2}
        assert len({o["value"] for o in sends}) == len(sends)  # unique values
        assert {o["process"] for o in ops if o["f"] == "poll"} >= {2, 3, 4, "final"}
        nemesis = [o for o in ops if o["process"] == "nemesis" and o["type"] == "info"]
        assert nemesis and {o["f"] for o in nemesis} <= {"kill", "power-cycle", "start"}
        summary = json.loads((d / "check" / "summary.json").read_text())
        assert summary["verdict"] in ("valid", "invalid")

    # Export the first run; the loader accepts it, faults at the times they happened.
    first = Path(out["runs"][0]["run_dir"])
    yaml_file = tmp_path / "found.yaml"
    e = isrlab("export", str(first), "--out", str(yaml_file))
    assert e.returncode == 0, e.stderr
    assert f"isrlab reproduce {yaml_file} --protocol 0.10 --runs 20" in e.stdout
    scenario = load_scenario(yaml_file)
    assert scenario.expect["0.10"] == sorted(out["runs"][0]["found"])
    assert scenario.expect["latest"] == []
    assert scenario.workload["producers"] == 4 and scenario.workload["seed"] == 11
    kinds = [s.kind for s in scenario.steps]
    assert kinds[-1] == "final-read"
    faults = [s for s in scenario.steps if s.kind in ("kill", "power-cycle", "start")]
    hist = [o for o in read_history(first)
            if o["process"] == "nemesis" and o["type"] == "invoke"]
    assert [(s.kind, s.args["nodes"]) for s in faults] == [(o["f"], o["value"]) for o in hist]
    untils = [s.args["until"] for s in scenario.steps if s.kind == "sleep"]
    assert untils == sorted(untils)


@pytest.mark.e2e
def test_interrupt_stops_the_cluster_and_keeps_a_checkable_prefix(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "chaos", "--protocol", "latest",
         "--time-limit", "60s", "--runs", "3", "--seed", "5", "--runs-dir", str(runs),
         "--port", str(free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "status: run 1/3" in line:  # the workload is going
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, (out, err)
    assert "interrupted during run 1/3" in err and "isrlab check" in err
    assert "Traceback" not in err
    assert processes_mentioning(str(tmp_path)) == []
    (run_dir,) = [p for p in runs.glob("*/*") if p.is_dir()]
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "incomplete" and "interrupted" in meta["error"]
    assert read_history(run_dir)  # a readable prefix
    assert (run_dir / "replicas").is_dir()


def test_the_recovery_progress_lines_say_what_was_recovered_never_none(tmp_path: Path) -> None:
    """A partition's recovery is a `heal`, which has no value: the line says what it
    did, and no progress line of the run prints "None" (it once read "recovered:
    heal None")."""
    import io

    from harness.chaos.runs import ChaosConfig, chaos_run
    from harness.progress import Progress
    from harness.run.runner import RunOptions, run_scenario

    cfg = ChaosConfig(protocol="latest", time_limit=8.0, faults=parse_faults("isolate"),
                      producers=1, consumers=1, rate=50.0)
    scenario, meta = chaos_run(cfg, 3)
    out = io.StringIO()
    rec = run_scenario(scenario, RunOptions(protocol="latest", backend="sim", seed=3,
                                            runs_dir=tmp_path, meta=meta), Progress(out))
    text = out.getvalue()
    assert rec.error is None, text
    assert "recovered: heal (every link restored, held messages delivered)" in text, text
    assert "None" not in text, text
