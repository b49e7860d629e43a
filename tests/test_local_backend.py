"""Local backend process lifecycle with the real broker and controller: start,
every fault, partitions, readiness errors, and that nothing survives teardown."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
from conftest import alive, descendants

from broker.wire import Connection
from contract.history import History
from contract.rundir import read_history
from harness.backends import make_backend
from harness.backends.base import CONTROLLER, ClusterSpec
from harness.errors import RunIncomplete, UsageError
from harness.run.clock import RunClock
from workloads.client import ClusterClient
from workloads.consumer import Consumer

SPEC = ClusterSpec(protocol="0.11", brokers=["A", "B"],
                   topics=[{"name": "t", "partitions": 1, "replicas": [["A", "B"]]}])

pytestmark = pytest.mark.e2e  # starts real broker processes


def status(addr: str) -> dict:
    with Connection(addr, timeout=2) as c:
        return c.request({"type": "status"})


@pytest.fixture
def backend(tmp_path: Path, port: int):
    b = make_backend("local", SPEC, tmp_path, port=port)
    yield b
    b.teardown()
    assert descendants(os.getpid()) == []


def test_addresses(backend) -> None:
    port = backend.port
    assert backend.address(CONTROLLER) == f"127.0.0.1:{port}"
    assert backend.address("A") == f"127.0.0.2:{port}"
    assert backend.address("B") == f"127.0.0.3:{port}"
    with pytest.raises(UsageError):
        backend.address("Z")


def test_start_fault_cycle_and_teardown(backend, tmp_path: Path) -> None:
    backend.check_addresses()
    backend.start_controller()
    backend.start("A")
    backend.start("B")
    assert status(backend.address("A"))["node"] == "A"
    assert status(backend.address(CONTROLLER))["live"] == ["A", "B"]
    assert (tmp_path / "logs" / "A.log").is_file()
    assert (tmp_path / "data" / "A").is_dir()

    pid_a = backend.pid("A")
    backend.pause("A")
    assert backend.is_paused("A") and backend.is_running("A")
    with pytest.raises(OSError), socket.create_connection(("127.0.0.2", backend.port), 2) as s:
        s.settimeout(0.3)
        s.sendall(b'{"type":"status"}\n')
        if not s.recv(10):
            raise OSError("closed")
    backend.resume("A")
    assert status(backend.address("A"))["node"] == "A"

    backend.kill("A")
    assert not backend.is_running("A") and not alive(pid_a)
    backend.start("A")
    assert backend.pid("A") != pid_a
    assert backend.stop("B") == 0  # clean shutdown on SIGTERM
    assert not backend.is_running("B")
    with pytest.raises(RunIncomplete):
        backend.kill("B")  # not running
    backend.start("B")

    # A paused process still stops cleanly (SIGCONT before SIGTERM).
    backend.pause("B")
    assert backend.stop("B") == 0

    backend.pause("A")  # teardown must handle a paused process too
    backend.teardown()
    backend.teardown()  # idempotent
    assert not any(backend.is_running(n) for n in backend.nodes)


def test_port_in_use_is_config_error(backend) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.3", backend.port))
        s.listen()
        with pytest.raises(UsageError, match="address in use: 127.0.0.3"):
            backend.check_addresses()


@pytest.mark.parametrize("name", ["local", "docker"])
def test_ports_outside_1_to_65535_are_config_errors(tmp_path: Path, name: str) -> None:
    # Refused when the backend is made, before any process, engine or address is touched.
    for port in (0, 70000):
        with pytest.raises(UsageError, match="outside 1..65535"):
            make_backend(name, SPEC, tmp_path / f"{name}-{port}", port=port)
    # The local backend needs two (each node's, a broker's Kafka listener on the
    # next); the docker backend one per node (controller, A, B) and one per broker.
    needs = {"local": 65534, "docker": 65531}[name]
    assert make_backend(name, SPEC, tmp_path / name, port=needs).port == needs
    if name == "docker":
        with pytest.raises(UsageError, match=r"ports 65534\.\.65538, outside 1\.\.65535; "
                                             r"give --port 1\.\.65531"):
            make_backend(name, SPEC, tmp_path / "docker-high", port=65534)


def test_early_exit_reports_log_tail(backend, tmp_path: Path) -> None:
    backend.start_controller()
    # A corrupt HW checkpoint: the broker dies at start-up, as Kafka's would.
    backend.data_dir("A").mkdir(parents=True)
    (backend.data_dir("A") / "replication-offset-checkpoint").write_text("{not json\n")
    with pytest.raises(RunIncomplete, match="A exited") as e:
        backend.start("A")
    assert "Error" in str(e.value)  # the log's tail names the failure
    assert not backend.is_running("A")


def test_bad_config_exit_is_config_error(tmp_path: Path, port: int) -> None:
    spec = ClusterSpec(protocol="0.11", brokers=["A"],
                       topics=[{"name": "t", "partitions": 1, "replicas": [["A"]]}])
    # ClusterSpec refuses a bad key itself; past it (a config written by hand), the
    # controller process's own check must still end in a usage error.
    object.__setattr__(spec, "controller_config", {"no.such.key": 1})
    b = make_backend("local", spec, tmp_path, port=port)
    try:
        with pytest.raises(UsageError, match="no.such.key"):
            b.start_controller()
    finally:
        b.teardown()


def _produce(backend, node: str, value: int) -> dict:
    with Connection(backend.address(node), timeout=5) as c:
        return c.request({"type": "produce", "topic": "t", "partition": 0, "value": value,
                          "acks": 1, "timeout_ms": 2000})


def test_power_cycle_loses_exactly_the_unsynced_records(backend) -> None:
    backend.start_controller()
    backend.start("A")
    backend.start("B")
    leader = _wait_leader(backend)
    assert _produce(backend, leader, 1)["error"] is None
    with Connection(backend.address(leader), timeout=5) as c:
        assert c.request({"type": "flush"})["error"] is None
    # A consumer's poll of the real broker records the leader epoch that served it.
    history = History(backend.run_dir / "history.jsonl", RunClock())
    client = ClusterClient(lambda: {n: backend.address(n) for n in ("A", "B")})
    op = Consumer(client, history, 1, "t", 0).poll()
    history.close()
    epoch = status(backend.address(leader))["partitions"][0]["leader_epoch"]
    assert (op["type"], op["node"], op["epoch"]) == ("ok", leader, epoch)
    assert read_history(backend.run_dir)[-1]["epoch"] == epoch
    assert _produce(backend, leader, 2)["error"] is None  # written, not fsynced
    backend.kill("B")  # B must not serve the records back after the power cycle
    backend.power_cycle(leader)
    assert not backend.is_running(leader)
    from broker.storage import read_offline

    (part,) = read_offline(backend.data_dir(leader))["partitions"]
    assert [r[2] for r in part["records"]] == [1]


def _wait_leader(backend) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        (p,) = status(backend.address(CONTROLLER))["partitions"]
        leader = p["leader"]
        if leader and status(backend.address(leader))["partitions"][0]["role"] == "leader":
            return leader
        time.sleep(0.05)
    raise AssertionError("no leader within 10 s")


def test_partition_uses_net_block_and_survives_restart(backend) -> None:
    backend.start_controller()
    backend.start("A")
    backend.start("B")
    backend.partition({"A": ["B", CONTROLLER], "B": ["A"], CONTROLLER: ["A"]})
    assert status(backend.address("A"))["blocked"] == ["B", "controller"]
    assert status(backend.address(CONTROLLER))["blocked"] == ["A"]
    backend.kill("A")
    backend.start("A")  # a restarted process is still cut off
    assert status(backend.address("A"))["blocked"] == ["B", "controller"]
    backend.heal()
    assert all(status(backend.address(n))["blocked"] == [] for n in backend.nodes)


def test_partition_naming_an_unknown_node_changes_nothing(backend) -> None:
    backend.start_controller()
    backend.start("A")
    with pytest.raises(UsageError, match="unknown node 'Z' in partition"):
        backend.partition({"A": ["Z"]})
    assert status(backend.address("A"))["blocked"] == []


def test_acks_0_produce_gets_no_answer_and_an_error_closes_the_connection(backend) -> None:
    """Kafka 0.10.2.0 KafkaApis.handleProduceRequest (KAFKA-955): acks 0 is never answered; on an
    error (here a produce to the follower) the broker closes the connection. The
    producer records such a send ok, without an offset, once it is written."""
    backend.start_controller()
    backend.start("A")
    backend.start("B")
    leader = _wait_leader(backend)
    follower = "B" if leader == "A" else "A"

    def raw(node: str, value: int) -> bytes:
        host, port = backend.address(node).split(":")
        with socket.create_connection((host, int(port)), 2) as s:
            s.settimeout(1.0)
            s.sendall(b'{"type":"produce","topic":"t","partition":0,"acks":0,"value":%d}\n'
                      % value)
            try:
                return s.recv(100)  # b"" = closed by the broker
            except TimeoutError:
                return b"no answer"

    assert raw(leader, 7) == b"no answer"
    assert raw(follower, 8) == b""
    history = History(backend.run_dir / "history.jsonl", RunClock())
    client = ClusterClient(lambda: {n: backend.address(n) for n in ("A", "B")})
    from workloads.producer import Producer

    op = Producer(client, history, 0, acks=0).send("t", 0, 9)
    history.close()
    assert op["type"] == "ok" and "offset" not in op and op["acks"] == 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with Connection(backend.address(leader), timeout=2) as c:
            values = [r[2] for r in c.request({"type": "dump-log", "topic": "t",
                                               "partition": 0})["records"]]
        if 9 in values:
            break
        time.sleep(0.05)
    assert values == [7, 9], "the follower's acks-0 produce appended nothing"
