"""The sim backend: the same broker and controller cores on a virtual clock, in
this process. A seed fixes the run byte for byte; faults keep their meaning.
(Its verdicts and replica logs against the local backend's: test_e2e_scenarios.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from broker.broker_core import FlushAll, StoreEffect
from broker.log import Record
from broker.partition import AppendRecords, TruncateLog
from broker.sim_cluster import MemoryStore
from contract import FINAL_PROCESS
from harness.progress import Progress
from harness.runner import RunOptions, run_scenario
from harness.scenario import find_scenario, load_scenario

FILES = ["history.jsonl", "events.jsonl", "replicas/A/log.jsonl", "replicas/B/log.jsonl",
         "replicas/B/state.json"]


def _run(tmp: Path, name: str, protocol: str, seed: int) -> Path:
    rec = run_scenario(load_scenario(find_scenario(name)),
                       RunOptions(protocol=protocol, backend="sim", seed=seed, runs_dir=tmp),
                       Progress(quiet=True))
    assert rec.error is None, rec.error
    return rec.run_dir


def test_same_seed_gives_byte_identical_history_events_and_replica_logs(tmp_path):
    a = _run(tmp_path / "a", "kip101-power-loss-divergence", "0.11", seed=7)
    b = _run(tmp_path / "b", "kip101-power-loss-divergence", "0.11", seed=7)
    for f in FILES:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    c = _run(tmp_path / "c", "kip101-power-loss-divergence", "0.11", seed=8)
    # Another seed draws other message latencies: the same steps at other times.
    assert (a / "history.jsonl").read_bytes() != (c / "history.jsonl").read_bytes()


def test_run_takes_virtual_time_not_wall_time(tmp_path):
    """kip101-hw-truncation-loss waits out a 1.5 s session timeout: on the virtual
    clock the history spans it, while the run itself takes far less."""
    run = _run(tmp_path, "kip101-hw-truncation-loss", "0.10", seed=1)
    meta = json.loads((run / "run.json").read_text())
    assert meta["backend"] == "sim" and meta["seed"] == 1 and meta["status"] == "complete"
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert ops[-1]["time"] > 1_500_000_000  # ns of virtual time: past the session timeout
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    trunc = [e for e in events if e["type"] == "truncate" and e["node"] == "B"
             and e["removed_count"]]
    # 0.10: B truncates m1 away to its HW when it follows C.
    assert [(e["rule"], e["from"], e["to"]) for e in trunc] == [("hw", 2, 1)]


def test_power_loss_keeps_flushed_records_and_checkpoints_only():
    store = MemoryStore()
    key = ("t", 0)
    recs = tuple(Record(i, 0, i) for i in range(3))
    store.perform(StoreEffect(key, AppendRecords(recs[:2])))
    store.perform(FlushAll())
    store.perform(StoreEffect(key, AppendRecords(recs[2:])))
    assert store.fsynced_leo(key) == 2
    assert store.power_loss() == {"t-0": 1}
    assert store.part(key).records == list(recs[:2])
    store.perform(StoreEffect(key, TruncateLog(1)))  # a truncation un-syncs what it cut
    store.perform(StoreEffect(key, AppendRecords((Record(1, 1, 9),))))
    assert store.fsynced_leo(key) == 1
    assert store.power_loss() == {"t-0": 1}


@pytest.mark.parametrize(("protocol", "code"), [("0.10", 1), ("0.11", 0)])
def test_reproduce_on_sim_exits_as_on_local(tmp_path, protocol, code):
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "kip101-hw-truncation-loss",
         "--protocol", protocol, "--backend", "sim", "--seed", "3", "--runs-dir",
         str(tmp_path), "--no-server", "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert ("lost-write" in proc.stdout) == (code == 1)
    # A sim run's report shows its fetch-round trace.
    report = Path(next(line for line in proc.stdout.splitlines()
                       if line.startswith("report: ")).removeprefix("report: "))
    html = report.read_text()
    assert "Fetch rounds" in html and "fetch@1" in html


def test_bad_seed_is_a_usage_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "kip101-hw-truncation-loss",
         "--protocol", "0.10", "--backend", "sim", "--seed", "x1", "--runs-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "seed" in proc.stderr and "Traceback" not in proc.stderr


def test_final_read_converges_without_a_broker_that_halted_itself(tmp_path):
    """0.10: B, paused while A lost m1 to a power cycle, halts when it finds the
    leader's log behind its own (handleOffsetOutOfRange). A halted broker stays down
    until an operator acts (a chaos run's heal restarts it, and it may halt again);
    here the final read does not restart it, and B no longer holds the final read
    up: the leader's log is read and the run completes (it timed out before)."""
    text = find_scenario("last-replica-standing-loss").read_text()
    restart = '  - start: B\n    protocols: ["0.10", "0.11", "2.0"]\n  - final-read\n'
    assert restart in text
    path = tmp_path / "halted.yaml"
    path.write_text(text.replace(restart, "  - final-read: {heal: false}\n"))
    rec = run_scenario(load_scenario(path),
                       RunOptions(protocol="0.10", backend="sim", seed=3,
                                  runs_dir=tmp_path / "runs"),
                       Progress(quiet=True))
    assert rec.error is None, rec.error
    meta = json.loads((rec.run_dir / "run.json").read_text())
    assert meta["status"] == "complete"
    events = [json.loads(line) for line in (rec.run_dir / "events.jsonl").read_text().splitlines()]
    b = [e["type"] for e in events if e["node"] == "B"]
    assert "halt" in b and b.count("started") == 1  # down since its halt
    ops = [json.loads(line) for line in (rec.run_dir / "history.jsonl").read_text().splitlines()]
    final = [op for op in ops if op["process"] == FINAL_PROCESS and op["type"] == "ok"]
    assert [op["node"] for op in final] == ["A"]  # read from the leader, B still down
