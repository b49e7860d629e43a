"""Every event a node writes before its process ends reaches events.jsonl, whoever
ended it: a 0.10 follower that halts itself (ReplicaFetcherThread.handleOffsetOutOfRange,
unclean election off) -- its `halt`, then the `flush` and `hw-checkpoint` of its
controlled shutdown -- on the local, sim and docker backends (ssh reads its host's
log file the same way; its tests need sshd hosts), and the shutdown of a process
stopped and restarted between two polls of the events collector (real brokers)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import descendants, docker_leftovers, docker_or_skip, free_base_port, free_port

from broker.process import logged_events
from harness.backends import make_backend
from harness.backends.base import ClusterSpec
from harness.progress import Progress
from harness.run.clock import RunClock
from harness.run.event_collector import EventsCollector
from harness.run.runner import RunOptions, run_scenario
from harness.scenario.loader import SCENARIO_DIR, load_scenario

SCENARIO = SCENARIO_DIR / "last-replica-standing-loss.yaml"


def events_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def incarnations(events: list[dict], node: str) -> list[list[dict]]:
    """`node`'s events, one list per incarnation, in the order they started."""
    out: dict[str, list[dict]] = {}
    for ev in events:
        if ev["node"] == node:
            out.setdefault(ev["incarnation"], []).append(ev)
    return sorted(out.values(), key=lambda evs: evs[0]["time"])


def assert_halt_collected(run_dir: Path) -> None:
    """B's first incarnation ends with its halt, its shutdown's flush and
    hw-checkpoint, every event of it there once (seq 0..n without a gap)."""
    first, *rest = incarnations(events_of(run_dir), "B")
    assert rest, "B was restarted after its halt"
    assert [ev["seq"] for ev in first] == list(range(len(first)))
    types = [ev["type"] for ev in first]
    assert "halt" in types, types
    after = types[types.index("halt") + 1:]
    assert "flush" in after and "hw-checkpoint" in after, types
    halt = first[types.index("halt")]
    assert halt["reason"] == "offset-out-of-range" and halt["leader_leo"] < halt["leo"]


def run(backend: str, tmp_path: Path, options: dict) -> Path:
    rec = run_scenario(load_scenario(SCENARIO),
                       RunOptions(protocol="0.10", backend=backend, seed=1,
                                  runs_dir=tmp_path / "runs", backend_options=options),
                       Progress(quiet=True))
    # The scenario waits on B's `halt` event: without it the run ends incomplete.
    assert rec.error is None, rec.error
    return rec.run_dir


@pytest.mark.e2e
def test_halted_broker_events_reach_the_run_local(tmp_path: Path) -> None:
    assert_halt_collected(run("local", tmp_path, {"port": free_port()}))
    assert descendants(os.getpid()) == []


def test_halted_broker_events_reach_the_run_sim(tmp_path: Path) -> None:
    assert_halt_collected(run("sim", tmp_path, {}))


@pytest.mark.docker
@pytest.mark.e2e
def test_halted_broker_events_reach_the_run_docker(tmp_path: Path) -> None:
    client = docker_or_skip()
    run_dir = run("docker", tmp_path, {"port": free_base_port(3), "quiet": True})
    assert_halt_collected(run_dir)
    assert docker_leftovers(client, run_dir.name) == []
    client.close()


@pytest.mark.e2e
def test_shutdown_between_two_polls_is_read_from_the_log(tmp_path: Path) -> None:
    """A broker stopped (its controlled shutdown writes flush and hw-checkpoint
    after it stops answering) and started again before the collector looks: the
    collector, finding a new incarnation, reads the rest of the old one from the
    log first. Then one stopped for good: read once its process is gone."""
    spec = ClusterSpec(protocol="0.11", brokers=["A"],
                       topics=[{"name": "t", "partitions": 1, "replicas": [["A"]]}])
    backend = make_backend("local", spec, tmp_path, port=free_port())
    collector = EventsCollector(backend, RunClock(), tmp_path / "events.jsonl")  # no thread
    try:
        backend.start_controller()
        backend.start("A")
        collector.drain("A")
        backend.stop("A")
        backend.start("A")
        collector.drain("A")
        backend.stop("A")
        collector.drain("A")
    finally:
        collector.stop()
        backend.teardown()
    first, second = incarnations(events_of(tmp_path), "A")
    for inc in (first, second):
        types = [ev["type"] for ev in inc]
        assert [ev["seq"] for ev in inc] == list(range(len(inc)))
        assert types[0] == "started" and types[-2:] == ["flush", "hw-checkpoint"], types
    assert descendants(os.getpid()) == []


def test_logged_events_reads_one_incarnation_of_an_appended_log() -> None:
    """The log holds every incarnation, appended (and the harness's own lines): one
    incarnation's events are those between its line and the next incarnation's; a
    line cut off by a crash is skipped; an incarnation the log does not name: None."""
    def ev(seq: int, type_: str) -> str:
        return (f'2026-01-01 00:00:00,000 broker-A INFO event {{"seq":{seq},"time":1,'
                f'"node":"A","type":"{type_}"}}')
    log = "\n".join([
        "--- isrlab: starting A at 1.0 ---",
        "2026-01-01 00:00:00,000 broker-A INFO incarnation aaa",
        ev(0, "started"), ev(1, "halt"),
        "2026-01-01 00:00:00,000 broker-A CRITICAL exiting: leader B's LEO 1 is below",
        ev(2, "flush"), ev(3, "hw-checkpoint"),
        "--- isrlab: starting A at 2.0 ---",
        "2026-01-01 00:00:00,000 broker-A INFO incarnation bbb",
        ev(0, "started"),
        '2026-01-01 00:00:00,000 broker-A INFO event {"seq":1,"time":1,"node":"A","ty',
    ])
    assert [e["type"] for e in logged_events(log, "aaa")] == [
        "started", "halt", "flush", "hw-checkpoint"]
    assert [e["seq"] for e in logged_events(log, "bbb")] == [0]
    assert logged_events(log, "ccc") is None
