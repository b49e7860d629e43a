"""Nemesis ops: history op pairs, fault windows, heal-all, and wait_for."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.history import History
from contract.rundir import read_history
from harness.backends import make_backend
from harness.backends.base import ClusterSpec
from harness.errors import RunIncomplete
from harness.run.clock import RunClock
from harness.run.observer import WaitTimeout, wait_for
from nemesis import Cluster, Nemesis


class FakeCluster:
    """A cluster as the nemesis sees it (nemesis.Cluster), no processes behind it."""

    def __init__(self) -> None:
        self.brokers = ["A", "B"]
        self.running = {"A", "B"}
        self.paused: set[str] = set()
        self.calls: list[tuple[str, str]] = []

    def _call(self, f: str, node: str) -> None:
        self.calls.append((f, node))

    def start(self, node: str) -> None:
        if node == "B" and ("fail", "B") in self.calls:
            raise RunIncomplete("B exited with status 1 before it was ready")
        self._call("start", node)
        self.running.add(node)

    def stop(self, node: str) -> int:
        self._call("stop", node)
        self.running.discard(node)
        return 0

    def kill(self, node: str) -> None:
        self._call("kill", node)
        self.running.discard(node)
        self.paused.discard(node)

    def pause(self, node: str) -> None:
        self._call("pause", node)
        self.paused.add(node)

    def resume(self, node: str) -> None:
        self._call("resume", node)
        self.paused.discard(node)

    def power_cycle(self, node: str) -> None:
        self._call("power-cycle", node)
        self.running.discard(node)

    def partition(self, grudge: dict[str, list[str]]) -> None:
        raise NotImplementedError("the fake cluster cannot partition the network")

    def heal(self) -> None:
        raise NotImplementedError("the fake cluster cannot partition the network")

    def delay(self, plan: dict) -> None:
        self._call("delay", ",".join(sorted(plan)))

    def deliver(self) -> None:
        self._call("deliver", "")

    def is_running(self, node: str) -> bool:
        return node in self.running

    def is_paused(self, node: str) -> bool:
        return node in self.paused


def test_backends_and_the_fake_are_clusters(tmp_path: Path) -> None:
    """The harness's backends satisfy what the nemesis declares it needs."""
    spec = ClusterSpec("0.11", ["A", "B"], [])
    assert isinstance(FakeCluster(), Cluster)
    assert isinstance(make_backend("local", spec, tmp_path), Cluster)
    pytest.importorskip("docker")
    from harness.backends.docker import DockerBackend  # constructing it starts nothing

    assert isinstance(DockerBackend(spec, tmp_path / "run-x"), Cluster)
    assert not isinstance(object(), Cluster)


@pytest.fixture
def setup(tmp_path: Path):
    b = FakeCluster()
    h = History(tmp_path / "history.jsonl", RunClock())
    drained: list[str] = []
    return b, h, Nemesis(b, h, before_fault=drained.append), drained


def test_op_pairs_and_windows(setup) -> None:
    b, h, n, drained = setup
    n.invoke("pause", ["A"])
    n.invoke("kill", ["B"])
    n.invoke("start", ["B"])
    n.invoke("kill", ["A"])
    n.invoke("power-cycle", ["B"])
    ops = read_history(h.path.parent)
    assert [(o["process"], o["type"], o["f"], o["value"]) for o in ops[:2]] == [
        ("nemesis", "invoke", "pause", ["A"]), ("nemesis", "info", "pause", ["A"])]
    assert all(o["process"] == "nemesis" for o in ops) and len(ops) == 10
    assert drained == ["B", "A", "B"]  # before every kill/stop/power-cycle
    kinds = [(w.node, w.kind, w.fault, w.end is not None) for w in n.windows]
    assert kinds == [("A", "paused", "pause", True), ("B", "down", "kill", True),
                     ("A", "down", "kill", False), ("B", "down", "power-cycle", False)]


def test_heal_all(setup) -> None:
    b, h, n, _ = setup
    n.invoke("pause", ["A"])
    n.invoke("stop", ["B"])
    ops = n.heal_all()
    assert [(o["f"], o["value"]) for o in ops] == [("resume", ["A"]), ("start", ["B"])]
    assert all(w.end is not None for w in n.windows)


def test_failed_fault_is_recorded_then_raised(setup) -> None:
    b, h, n, _ = setup
    b.calls.append(("fail", "B"))
    n.invoke("kill", ["B"])
    with pytest.raises(RunIncomplete):
        n.invoke("start", ["B"])
    ops = read_history(h.path.parent)
    assert ops[-1]["type"] == "info" and "before it was ready" in ops[-1]["error"]


def test_network_faults_not_on_this_backend(setup) -> None:
    _, h, n, _ = setup
    with pytest.raises(NotImplementedError):
        n.partition({"A": ["B"], "B": ["A"]})
    assert [(o["type"], o["f"], o["value"]) for o in read_history(h.path.parent)] == [
        ("invoke", "partition", {"A": ["B"], "B": ["A"]}),
        ("info", "partition", {"A": ["B"], "B": ["A"]})]
    with pytest.raises(ValueError):
        n.invoke("partition", ["A"])
    with pytest.raises(ValueError):
        n.invoke("explode", ["A"])


def test_partition_and_heal_windows(setup) -> None:
    b, h, n, _ = setup
    b.partition = lambda grudge: b.calls.append(("partition", str(sorted(grudge))))
    b.heal = lambda: b.calls.append(("heal", ""))
    n.partition({"A": ["B"], "B": ["A"]})
    assert [w.kind for w in n.windows] == ["partitioned", "partitioned"]
    ops = n.heal_all()
    assert [o["f"] for o in ops] == ["heal"] and ("heal", "") in b.calls
    assert all(w.end is not None for w in n.windows)


def test_wait_for() -> None:
    state = iter([None, 0, "", "ready"])
    assert wait_for(lambda: next(state), 5, interval=0.001) == "ready"
    with pytest.raises(WaitTimeout, match="waiting for the moon; last seen: 3") as e:
        wait_for(lambda: False, 0.05, what="the moon", last_seen=lambda: 3)
    assert e.value.exit_code == 3
