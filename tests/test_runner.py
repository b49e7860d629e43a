"""The runner end to end on the real broker: run directory contents, steps,
events, timeouts, and no process left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import TESTS, descendants

from contract.rundir import read_history
from harness.progress import Progress
from harness.run.runner import RunOptions, run_scenario
from harness.scenario.loader import load_scenario

pytestmark = pytest.mark.e2e  # starts real broker processes


def _run(name: str, tmp_path: Path, port: int):
    scenario = load_scenario(TESTS / "data" / name)
    opts = RunOptions(protocol="0.11", seed=7, runs_dir=tmp_path / "runs",
                      backend_options={"port": port})
    record = run_scenario(scenario, opts, Progress(quiet=True))
    assert descendants(os.getpid()) == []
    return record


def test_complete_run_writes_run_directory(tmp_path: Path, port: int) -> None:
    record = _run("single-broker.yaml", tmp_path, port)
    assert record.error is None, record.error
    d = record.run_dir
    meta = json.loads((d / "run.json").read_text())
    assert meta["format_version"] == 1 and meta["status"] == "complete"
    assert meta["protocol"] == "0.11" and meta["seed"] == 7 and meta["expect"] == []
    assert meta["ended_at"] and meta["cluster"]["brokers"] == ["A"]
    assert meta["labels"] == {"m0": [0], "m3": [3]}
    assert [s["kind"] for s in meta["nemesis"]][:3] == ["produce", "produce", "wait"]
    assert [w["kind"] for w in meta["fault_windows"]] == ["paused", "down"]

    ops = read_history(d)
    assert [o["index"] for o in ops] == list(range(len(ops)))
    assert all(ops[i]["time"] <= ops[i + 1]["time"] for i in range(len(ops) - 1))
    sends = [o for o in ops if o["f"] == "send" and o["type"] == "ok"]
    # A kill keeps what was written (only power-cycle loses un-fsynced bytes).
    assert [(o["value"], o["offset"]) for o in sends] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert sends[0]["label"] == "m0" and sends[0]["acks"] == "all"
    nem = [(o["type"], o["f"], o["value"]) for o in ops if o["process"] == "nemesis"]
    assert nem[:2] == [("invoke", "pause", ["A"]), ("info", "pause", ["A"])]
    assert ("info", "kill", ["A"]) in nem
    final = [o for o in ops if o["process"] == "final"]
    assert [o["type"] for o in final] == ["invoke", "ok"]
    assert final[1]["records"] == [[0, 0], [1, 1], [2, 2], [3, 3]] and final[1]["hw"] == 4
    assert final[0]["offset"] == 0
    polls = [o for o in ops if o["process"] == 1 and o["type"] == "ok"]
    assert polls[0]["records"] == [[0, 0], [1, 1], [2, 2]]

    events = [json.loads(line) for line in (d / "events.jsonl").read_text().splitlines()]
    started = [e for e in events if e["type"] == "started"]
    # Two incarnations of A plus the controller: the cursor restarted after the kill.
    assert sorted(e["node"] for e in started) == ["A", "A", "controller"]
    assert all(isinstance(e["time"], int) and e["time"] > 0 for e in events)

    log = [json.loads(line) for line in (d / "replicas" / "A" / "log.jsonl").read_text()
           .splitlines()]
    assert [(r["offset"], r["value"]) for r in log] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    epochs = [r["epoch"] for r in log]
    assert epochs == sorted(epochs) and epochs[0] == 0
    state = json.loads((d / "replicas" / "A" / "state.json").read_text())
    assert state["node"] == "A" and state["partitions"][0]["leo"] == 4
    assert (d / "logs" / "A.log").exists() and (d / "logs" / "controller.log").exists()


def test_wait_timeout_is_incomplete_run(tmp_path: Path, port: int) -> None:
    record = _run("hang.yaml", tmp_path, port)
    assert record.error is not None and record.error.exit_code == 3
    msg = str(record.error)
    assert "hang.yaml:10: step 2" in msg and "timed out after 2s" in msg
    meta = json.loads((record.run_dir / "run.json").read_text())
    assert meta["status"] == "incomplete" and meta["ended_at"]
    # B was paused: it is collected from its data directory.
    state = json.loads((record.run_dir / "replicas" / "B" / "state.json").read_text())
    assert state["source"] == "data-dir"
