"""The sim backend: the same broker and controller cores on a virtual clock, in
this process. A seed fixes the run byte for byte; faults keep their meaning.
(Its verdicts and replica logs against the local backend's: test_e2e_scenarios.)"""

from __future__ import annotations

import html as html_lib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from broker.broker_core import FlushAll, StoreEffect
from broker.log import Record
from broker.partition import AppendRecords, TruncateLog
from broker.sim_cluster import MemoryStore, Network
from contract import FINAL_PROCESS
from harness.progress import Progress
from harness.run.runner import RunOptions, run_scenario
from harness.scenario.loader import find_scenario, load_scenario
from nemesis.schedule import parse_faults
from reports.trace import LEGEND

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


@pytest.mark.spark
@pytest.mark.parametrize(("protocol", "code"), [("0.10", 1), ("0.11", 0)])
def test_reproduce_on_sim_exits_as_on_local(tmp_path, protocol, code):
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "kip101-hw-truncation-loss",
         "--protocol", protocol, "--backend", "sim", "--seed", "3", "--runs-dir",
         str(tmp_path), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert ("lost-write" in proc.stdout) == (code == 1)
    # A sim run's report shows its fetch-round trace.
    report = Path(next(line for line in proc.stdout.splitlines()
                       if line.startswith("report: ")).removeprefix("report: "))
    html = report.read_text()
    assert "Fetch rounds and protocol events" in html and "fetches from offset 1" in html
    # ... the same rows as `isrlab trace`, with the legend.
    trace = html[html.index('<section id="trace">'):]
    trace = html_lib.unescape(trace[:trace.index("</section>")])
    for legend in LEGEND:
        assert legend in trace
    if code == 1:
        assert "B truncates to offset 1 by rule hw (to its own HW, asking no one), removing " \
               "offset 1" in trace
    else:
        # A valid run's story says what kept m1: B did not truncate to its HW.
        story = html_lib.unescape(
            html[html.index('<section id="story">'):html.index("<h2>Replica logs</h2>")])
        assert 'data-kind="kept" data-node="B"' in story
        assert "It does not truncate to its HW, as 0.10's rule hw would" in story
        assert "from Kafka 0.11.0 a follower truncates only to the end offset the leader " \
               "answers to OffsetsForLeaderEpoch (KIP-101)" in story


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
    restart = '  - start: B\n    before: "2.1"\n  - final-read\n'
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


# -- message loss and duplication (broker.sim_cluster.Network) -------------------------

# latest, acks all, min.insync.replicas 2, unclean election off: nothing acknowledged
# may be lost, whatever the network does (no power cycles: docs/sim.md#swarm).
SAFE = dict(protocol="latest", acks="all", faults=parse_faults("kill,pause,isolate"),
            broker_config={"min.insync.replicas": 2, "unclean.leader.election.enable": False},
            time_limit=20.0)


def _sim(tmp: Path, seed: int, **net: float) -> Path:
    from harness.chaos.swarm import SwarmSpec, simulate

    out = simulate(seed, SwarmSpec.of(**SAFE, network=Network(**net)), str(tmp), "net")
    assert out["error"] is None, out["error"]
    return Path(out["run_dir"])


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes()
            for p in sorted([run / "history.jsonl", run / "events.jsonl",
                             *run.glob("replicas/*/log.jsonl")])}


@pytest.mark.spark
def test_lost_and_duplicated_messages_are_seeded_and_lose_nothing_acked_under_latest(
        tmp_path):
    from checker.client import check

    plain = _sim(tmp_path / "plain", 3)
    zero = _sim(tmp_path / "zero", 3, loss=0.0, duplicate=0.0)
    # No message faults asked for: not one random number more, the same run.
    assert _files(zero) == _files(plain)
    assert "network" not in json.loads((plain / "run.json").read_text())

    lossy = _sim(tmp_path / "lossy", 3, loss=0.05)
    again = _sim(tmp_path / "again", 3, loss=0.05)
    assert _files(lossy) == _files(again)  # replayed byte for byte
    assert json.loads((lossy / "run.json").read_text())["network"] == {
        "loss": 0.05, "duplicate": 0.0}
    lost = [e for e in _lines(lossy / "events.jsonl") if e["type"] == "net-lost"]
    assert {e["direction"] for e in lost} == {"in", "out"}
    # Clients' requests, the brokers' fetches, the controller's heartbeats: all lose some.
    assert "client" in {e["peer"] for e in lost}
    assert {"controller", "A"} <= {e["node"] for e in lost}
    # A lost produce or its lost answer: the producer cannot know (Jepsen's info).
    def unknown(run: Path) -> int:
        return sum(1 for o in _lines(run / "history.jsonl")
                   if o["f"] == "send" and o["type"] == "info")
    assert unknown(lossy) > unknown(plain)

    dup = _sim(tmp_path / "dup", 3, duplicate=0.05)
    assert any(e["type"] == "net-duplicated" and e["request"] == "produce"
               for e in _lines(dup / "events.jsonl"))
    values = [r["value"] for r in _lines(dup / "replicas" / "A" / "log.jsonl")]
    assert len(values) > len(set(values))  # a produce handled twice appends twice

    results = {r.run_dir.resolve(): r for r in check([plain, lossy, dup])}
    kinds = {run: {a["kind"] for a in results[run.resolve()].anomalies}
             for run in (plain, lossy, dup)}
    assert kinds[plain] == set() and kinds[lossy] == set(), kinds
    # No idempotent producer is modelled: a resent produce is a duplicate record.
    assert kinds[dup] == {"duplicate"}, kinds
    # The report's story names the resend as each duplicate's cause.
    from reports import story
    from reports.rundata import load

    st, _ = story.build(load(dup))
    assert st.causes and st.uncaused == []
    assert all(c.kind == "duplicate" and "resend" in c.kinds and c.explained
               for c in st.causes)
    resent = [ln.text for ln in st.lines if ln.kind == "resend"]
    assert resent and all("a second time" in t and "KIP-98" in t for t in resent), resent


def test_the_final_read_outlasts_a_lossy_network(tmp_path):
    """1 % of messages lost, latest, safe settings. Seed 4: a page of the final read is
    lost and asked again. Seed 105: the leader moves while t/1 is read (NOT_LEADER):
    the read is recorded as failed, the partition converges again and is read anew.
    Both runs complete (before, each ended incomplete at the final read)."""
    from harness.chaos.swarm import SwarmSpec, simulate

    safe = {k: v for k, v in SAFE.items() if k not in ("faults", "time_limit")}
    lossy = Network(loss=0.01)
    cases = {4: SwarmSpec.of(**safe, faults=parse_faults("kill,pause,isolate"),
                             time_limit=20.0, network=lossy),
             105: SwarmSpec.of(**safe, faults=parse_faults(
                 "kill,stop,pause,isolate,halves,cut-controller"), network=lossy)}
    final = {}
    for seed, spec in cases.items():
        out = simulate(seed, spec, str(tmp_path), "final")
        run = Path(out["run_dir"])
        assert out["error"] is None, out["error"]
        final[seed] = [o for o in _lines(run / "history.jsonl") if o["process"] == FINAL_PROCESS]
        t0 = final[seed][0]["time"]
        if seed == 4:
            assert any(e["type"] == "net-lost" and e["request"] == "fetch" and e["time"] >= t0
                       for e in _lines(run / "events.jsonl"))
    assert [o["type"] for o in final[4]] == ["invoke", "ok"] * 2
    assert [(o["type"], o["partition"], o.get("error")) for o in final[105]] == [
        ("invoke", 0, None), ("ok", 0, None), ("invoke", 1, None),
        ("fail", 1, "NOT_LEADER_OR_FOLLOWER"), ("invoke", 1, None), ("ok", 1, None)]


SIM_CHAOS = ["chaos", "--protocol", "0.10", "--time-limit", "5s", "--backend", "sim"]


@pytest.mark.parametrize(("args", "said"), [
    ([*SIM_CHAOS, "--net-loss", "1"], "not a probability in [0, 1)"),
    ([*SIM_CHAOS, "--net-duplicate", "x"], "'x' is not a number"),
    (["chaos", "--protocol", "0.10", "--time-limit", "5s", "--net-loss", "0.1"],
     "apply to --backend sim only"),
    (["reproduce", "kip101-hw-truncation-loss", "--protocol", "0.10", "--net-duplicate",
      "0.1"], "apply to --backend sim only"),
    (["swarm", "--protocol", "0.10", "--runs", "1", "--net-loss", "-0.1"],
     "not a probability in [0, 1)"),
])
def test_bad_network_flags_are_usage_errors(tmp_path, args, said):
    r = subprocess.run([sys.executable, "-m", "harness.cli", *args, "--runs-dir", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and said in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []
