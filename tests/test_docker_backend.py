"""The docker backend against the real broker image: lifecycle, every fault,
partitions through iptables, configuration errors, and no leftovers.

Needs a Docker engine: skipped without one, a failure under ISRLAB_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker.client
import pytest
from conftest import docker_leftovers, docker_or_skip, free_base_port

from harness.backends.admin import request, try_status
from harness.backends.base import CONTROLLER, ClusterSpec
from harness.errors import UsageError

pytestmark = pytest.mark.docker

SPEC = ClusterSpec(
    protocol="latest",
    brokers=["A", "B", "C"],
    topics=[{"name": "t", "partitions": 1, "replicas": [["A", "B", "C"]]}],
    broker_config={"min.insync.replicas": 2, "replica.lag.time.max.ms": 2000},
    controller_config={"broker.session.timeout.ms": 2000},
)


@pytest.fixture(scope="module")
def client() -> Iterator[docker.client.DockerClient]:
    c = docker_or_skip()
    yield c
    c.close()


@pytest.fixture
def backend(client, tmp_path: Path):
    from harness.backends.docker import DockerBackend

    run_dir = tmp_path / f"run-{os.getpid()}-{time.monotonic_ns()}"
    b = DockerBackend(SPEC, run_dir, port=free_base_port(7), quiet=True)
    yield b
    b.teardown()
    assert docker_leftovers(client, b.run_id) == []


def _wait(what: str, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _part(b, node: str) -> dict[str, Any] | None:
    st = try_status(b.address(node))
    return st["partitions"][0] if st and st.get("partitions") else None


def _controller_view(b) -> dict[str, Any] | None:
    st = try_status(b.address(CONTROLLER))
    return st["partitions"][0] if st and st.get("partitions") else None


def _produce(b, node: str, value: int, timeout_ms: int = 3000) -> dict[str, Any]:
    msg = {"type": "produce", "topic": "t", "partition": 0, "value": value, "acks": "all",
           "timeout_ms": timeout_ms}
    return request(b.address(node), msg, timeout=timeout_ms / 1000 + 5)


def _log(b, node: str) -> list[int]:
    reply = request(b.address(node), {"type": "dump-log", "topic": "t", "partition": 0})
    return [r[2] for r in reply["records"]]


def _start_cluster(b) -> str:
    b.check_addresses()
    b.start_controller()
    for n in SPEC.brokers:
        b.start(n)
    view = _wait("a leader with a full ISR",
                 lambda: (v := _controller_view(b)) and v["leader"] and len(v["isr"]) == 3 and v)
    leader = view["leader"]
    _wait("every replica to know the leader",
          lambda: all((p := _part(b, n)) and p["leader"] == leader for n in SPEC.brokers)
          and _part(b, leader)["role"] == "leader")
    return leader


def test_lifecycle_and_process_faults(backend, client):
    b = backend
    leader = _start_cluster(b)
    assert b.address("A").startswith("127.0.0.1:")
    assert b.listen_address("A") == "broker-a:9092"
    for v in range(1, 4):
        assert _produce(b, leader, v)["error"] is None

    # kill keeps the files: the node restarts with its log.
    follower = next(n for n in SPEC.brokers if n != leader)
    before = _log(b, follower)
    b.kill(follower)
    assert not b.is_running(follower)
    data = b.data_dir(follower)
    assert data is not None and (data / "t-0" / "log.jsonl").exists()
    b.start(follower)
    assert _log(b, follower)[: len(before)] == before

    # pause: the process is frozen, the container still exists.
    b.pause(follower)
    assert b.is_running(follower) and b.is_paused(follower)
    assert try_status(b.address(follower), timeout=0.5) is None
    b.resume(follower)
    assert not b.is_paused(follower)
    assert try_status(b.address(follower)) is not None

    # power-cycle: down afterwards, and unsynced bytes are gone (never more than it had).
    b.power_cycle(follower)
    assert not b.is_running(follower)
    b.start(follower)
    assert len(_log(b, follower)) <= 3
    assert b.stop(follower) == 0  # clean SIGTERM shutdown
    b.teardown()
    assert (b.run_dir / "logs" / f"{follower}.log").read_text().strip()
    assert (b.run_dir / "logs" / "controller.log").exists()


def test_partitioned_leader_loses_leadership_and_nothing_acked_is_lost(backend):
    b = backend
    leader = _start_cluster(b)
    acked = []
    for v in range(1, 6):
        assert _produce(b, leader, v)["error"] is None
        acked.append(v)

    others = [n for n in b.nodes if n != leader]
    b.partition({leader: others, **{n: [leader] for n in others}})

    # The isolated leader cannot reach min.insync.replicas: its write is not acked.
    reply = _produce(b, leader, 100, timeout_ms=3000)
    assert reply["error"] is not None, reply

    view = _wait("the controller to elect a new leader",
                 lambda: (v := _controller_view(b)) and v["leader"] not in (None, leader) and v)
    new = view["leader"]
    for v in range(6, 9):
        reply = _wait(f"an acked write to {new}",
                      lambda v=v: (r := _produce(b, new, v)) and r["error"] is None and r)
        acked.append(v)

    b.heal()
    _wait(f"{leader} to follow {new} and catch up",
          lambda: (p := _part(b, leader)) and p["role"] == "follower" and p["leader"] == new
          and p["leo"] == _part(b, new)["leo"])
    final = _log(b, new)
    assert set(acked) <= set(final)
    assert 100 not in final
    assert _log(b, leader) == final


def _reachable(b, src: str, dst: str) -> bool:
    """Can src open a TCP connection to dst over the run's network?"""
    probe = (
        "import socket, sys\n"
        "try:\n"
        f"    socket.create_connection(({b.alias(dst)!r}, 9092), timeout=1).close()\n"
        "except OSError:\n"
        "    sys.exit(1)\n"
    )
    return b.container(src).exec_run(["python3", "-c", probe]).exit_code == 0


def test_bridge_partition_cuts_exactly_the_grudge_links(backend):
    b = backend
    _start_cluster(b)
    pairs = [(x, y) for x in b.nodes for y in b.nodes if x != y]
    assert all(_reachable(b, x, y) for x, y in pairs)
    # A bridge: A and C cannot hear each other, B and the controller hear everyone.
    b.partition({"A": ["C"], "C": ["A"]})
    cut = {("A", "C"), ("C", "A")}
    assert {(x, y) for x, y in pairs if not _reachable(b, x, y)} == cut
    b.heal()
    assert all(_reachable(b, x, y) for x, y in pairs)


def test_partition_applies_to_a_node_restarted_during_it(backend):
    b = backend
    _start_cluster(b)
    b.partition({"A": [CONTROLLER], CONTROLLER: ["A"]})
    b.kill("A")
    # Restarted inside the partition: it must still not reach the controller,
    # so it never becomes ready in the controller's eyes.
    b.start("A")
    container = b.container("A")
    out = container.exec_run(["iptables", "-S", "ISRLAB"]).output.decode()
    assert "-j DROP" in out
    time.sleep(3)
    assert "A" not in try_status(b.address(CONTROLLER))["live"]
    b.heal()
    _wait("A back at the controller", lambda: "A" in try_status(b.address(CONTROLLER))["live"])


def test_taken_port_is_a_config_error_and_nothing_is_created(client, tmp_path: Path):
    from harness.backends.docker import DockerBackend

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        taken = s.getsockname()[1]
        b = DockerBackend(SPEC, tmp_path / "run-port-clash", port=taken, quiet=True)
        with pytest.raises(UsageError, match="address in use"):
            b.check_addresses()
        b.teardown()
    assert docker_leftovers(client, b.run_id) == []


def test_network_clash_is_a_config_error(client, tmp_path: Path):
    from harness.backends.docker import DockerBackend

    b = DockerBackend(SPEC, tmp_path / "run-net-clash", port=free_base_port(7), quiet=True)
    squatter = client.networks.create(b.prefix, labels={"isrlab.test": "squatter"})
    try:
        b.check_addresses()
        with pytest.raises(UsageError, match="network clash"):
            b.start_controller()
    finally:
        b.teardown()
        squatter.remove()
    assert docker_leftovers(client, b.run_id) == []


@pytest.mark.parametrize("what", ["network", "volume", "container"])
def test_an_interrupt_while_the_engine_creates_waits_for_it_and_leaves_nothing(
        client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """Ctrl-C that lands while the engine creates the run's network, a volume or a
    container -- a real SIGINT, sent as the request goes out -- is raised once the
    engine has answered (the object is the harness's to remove), never in the middle
    (the engine would go on creating what the teardown already looked for): the
    teardown then leaves nothing."""
    import signal

    from harness.backends import reaper
    from harness.backends.docker import DockerBackend

    reaper.install_signal_handlers()
    monkeypatch.setattr(reaper, "_signalled", False)
    b = DockerBackend(SPEC, tmp_path / f"run-{os.getpid()}-{time.monotonic_ns()}",
                      port=free_base_port(7), quiet=True)
    api = b._prepare().api
    create = {"network": "create_network", "volume": "create_volume",
              "container": "create_container"}[what]
    answered = []

    def interrupted(*args: Any, **kw: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        out = getattr(type(api), create)(api, *args, **kw)
        answered.append(out)
        return out

    monkeypatch.setattr(api, create, interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            b.start_controller()
        assert len(answered) == 1  # the engine's answer came back before the interrupt
    finally:
        b.teardown()
    assert docker_leftovers(client, b.run_id) == []
