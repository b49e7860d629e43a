"""A target's hosts file (`isrlab chaos --target kafka --hosts`): what it resolves to,
its FILE:LINE errors, and the faults refused before anything starts
(harness/backends/kafka_target_hosts.py, harness/chaos/kafka_target.py). No cluster needed:
all of it is said before the bootstrap is asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends.kafka_target_hosts import KAFKA_DEFAULTS, READY_TIMEOUT, load_target_hosts
from harness.yamlloc import ScenarioError

ROOT = Path(__file__).resolve().parent.parent
GOOD = """\
defaults:
  user: kafka
  sudo: true
  kafka:
    start: systemctl start kafka
brokers:
  - {address: 10.0.0.11, node_id: 1}
  - address: 10.0.0.12
    node_id: 2
    kafka: {kill: /opt/kill-kafka.sh, ready_timeout: 90}
"""
NO_START = """\
brokers:
  - {address: 10.0.0.11, node_id: 1}
  - {address: 10.0.0.12, node_id: 2}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "target.yaml"
    path.write_text(text)
    return path


def test_a_target_hosts_file_resolves_defaults_and_commands(tmp_path: Path) -> None:
    th = load_target_hosts(_write(tmp_path, GOOD))
    assert list(th.brokers) == ["1", "2"]
    one, two = th.brokers["1"], th.brokers["2"]
    assert one.host.target == "kafka@10.0.0.11:22" and one.host.sudo
    assert one.host.label() == "host 10.0.0.11 (broker 1)"
    assert one.commands["start"] == two.commands["start"] == "systemctl start kafka"
    assert one.commands["kill"] == KAFKA_DEFAULTS["kill"] and "kill" in one.defaulted
    assert two.commands["kill"] == "/opt/kill-kafka.sh" and "kill" not in two.defaulted
    assert one.ready_timeout == READY_TIMEOUT and two.ready_timeout == 90
    assert "start" not in one.defaulted and one.line == 7 and two.line == 8
    th.require({"kill", "stop", "pause"})
    th.match(["1", "2"])


@pytest.mark.parametrize("text, line, message", [
    (GOOD.replace("node_id: 1}", "nodeid: 1}"), 7, "did you mean 'node_id'?"),
    (GOOD.replace("{address: 10.0.0.11, node_id: 1}", "{address: 10.0.0.11}"), 7,
     "brokers[0] has no node_id"),
    (GOOD.replace("node_id: 2", "node_id: 1"), 9, "node_id 1 is also brokers[0]'s"),
    (GOOD.replace("kill: /opt", "kil: /opt"), 10,
     "unknown key 'kil' in brokers[1]: kafka"),
    (GOOD.replace("ready_timeout: 90", "ready_timeout: -1"), 10,
     "ready_timeout -1 must be more than 0"),
    (GOOD.replace("  sudo: true", "  port: 9092"), 3,
     "unknown key 'port' in defaults"),
    ("controller: {address: 10.0.0.10}\n" + GOOD, 1, "has no controller"),
    (GOOD.replace("  user: kafka", "  node_id: 3"), 2, "defaults cannot set node_id"),
])
def test_mistakes_are_file_line_errors(tmp_path: Path, text: str, line: int,
                                       message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError) as e:
        load_target_hosts(path)
    assert str(e.value).startswith(f"{path}:{line}: "), str(e.value)
    assert message in str(e.value)


def test_start_is_required_by_the_faults_that_take_a_broker_down(tmp_path: Path) -> None:
    path = _write(tmp_path, NO_START)
    th = load_target_hosts(path)
    th.require({"pause"})  # pause and resume have their defaults
    for fault in ("kill", "stop", "flip"):
        with pytest.raises(ScenarioError, match=rf"^{path}:2: broker 1: no kafka.start"):
            th.require({fault})


def test_the_file_names_exactly_the_clusters_brokers(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    th = load_target_hosts(path)
    with pytest.raises(ScenarioError, match=rf"^{path}:8: node_id 2 is no broker"):
        th.match(["1", "3"])
    with pytest.raises(ScenarioError, match="broker\\(s\\) 3 have no entry"):
        th.match(["1", "2", "3"])


def chaos(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", "chaos", "--target", "kafka",
                           "--bootstrap", "127.0.0.1:9", "--time-limit", "2s", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_faults_without_hosts_are_refused(tmp_path: Path) -> None:
    p = chaos("--faults", "kill", "--runs-dir", str(tmp_path))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "faults on an existing cluster need --hosts" in p.stderr
    assert p.stderr.strip().count("\n") == 0 and list(tmp_path.iterdir()) == []


def test_a_hosts_file_without_start_is_refused_for_kill(tmp_path: Path) -> None:
    path = _write(tmp_path, NO_START)
    p = chaos("--faults", "kill", "--hosts", str(path), "--runs-dir", str(tmp_path / "runs"))
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith(f"isrlab: {path}:2: broker 1: no kafka.start command"), p.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("faults, message", [
    ("power-cycle", "cannot drop"),
    ("kill,power-cycle:leader", "cannot drop"),
    ("partition", "partitions are refused on an existing cluster"),
    ("isolate", "partitions are refused on an existing cluster"),
])
def test_power_cycle_and_partitions_are_refused(tmp_path: Path, faults: str,
                                                message: str) -> None:
    path = _write(tmp_path, GOOD)
    p = chaos("--faults", faults, "--hosts", str(path), "--runs-dir", str(tmp_path / "runs"))
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr and p.stderr.strip().count("\n") == 0
    assert not (tmp_path / "runs").exists()
