"""Local backend process lifecycle against the stub broker: start, faults,
readiness errors, and that nothing survives teardown."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from conftest import alive, descendants

from broker.wire import Connection
from harness.backends import make_backend
from harness.backends.base import CONTROLLER, ClusterSpec
from harness.errors import ConfigError, RunIncomplete

SPEC = ClusterSpec(protocol="0.11", brokers=["A", "B"],
                   topics=[{"name": "t", "partitions": 1, "replicas": [["A", "B"]]}])


def status(addr: str) -> dict:
    with Connection(addr, timeout=2) as c:
        return c.request({"type": "status"})


@pytest.fixture
def backend(tmp_path: Path, stub_options: dict):
    b = make_backend("local", SPEC, tmp_path, **stub_options)
    yield b
    b.teardown()
    assert descendants(os.getpid()) == []


def test_addresses(backend) -> None:
    port = backend.port
    assert backend.address(CONTROLLER) == f"127.0.0.1:{port}"
    assert backend.address("A") == f"127.0.0.2:{port}"
    assert backend.address("B") == f"127.0.0.3:{port}"
    with pytest.raises(ConfigError):
        backend.address("Z")


def test_start_fault_cycle_and_teardown(backend, tmp_path: Path) -> None:
    backend.check_addresses()
    backend.start_controller()
    backend.start("A")
    backend.start("B")
    assert status(backend.address("A"))["node"] == "A"
    assert status(backend.address(CONTROLLER))["live"] == ["A", "B"]
    assert (tmp_path / "logs" / "A.log").read_text().count("listening") == 1
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
        with pytest.raises(ConfigError, match="address in use: 127.0.0.3"):
            backend.check_addresses()


def test_early_exit_reports_log_tail(backend, monkeypatch) -> None:
    backend.start_controller()
    monkeypatch.setenv("STUB_CRASH", "A")
    with pytest.raises(RunIncomplete, match="simulated crash at startup"):
        backend.start("A")
    assert not backend.is_running("A")


def test_bad_config_exit_is_config_error(backend, monkeypatch) -> None:
    monkeypatch.setenv("STUB_FAIL_CONFIG", "controller")
    with pytest.raises(ConfigError, match="unknown broker config key"):
        backend.start_controller()


def test_power_cycle_needs_storage(backend, monkeypatch) -> None:
    """power_cycle = kill + broker.storage.drop_unsynced(data_dir); the node stays down."""
    import sys
    import types

    calls = []
    fake = types.ModuleType("broker.storage")
    fake.drop_unsynced = lambda d: calls.append(Path(d))
    monkeypatch.setitem(sys.modules, "broker.storage", fake)
    backend.start_controller()
    backend.start("A")
    backend.power_cycle("A")
    assert not backend.is_running("A")
    assert calls == [backend.data_dir("A")]


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
