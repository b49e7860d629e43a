"""The SSH backend's hosts file: what it resolves to and the FILE:LINE errors for
what is wrong in it (harness/backends/hostsfile.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends.hostsfile import load_hosts
from harness.backends.ssh_run import CHAIN_PREFIX, chain_name
from harness.errors import UsageError
from harness.yamlloc import ScenarioError

GOOD = """\
defaults:
  user: kafka
  key: id_test
  sudo: true
controller: {address: 10.0.0.10, ssh_port: 2222}
brokers:
  - {address: 10.0.0.11}
  - {address: 10.0.0.12, port: 9093, name: b2}
"""


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "id_test").write_text("not read by the parser\n")
    path = tmp_path / "hosts.yaml"
    path.write_text(text)
    return path


def test_a_hosts_file_resolves_defaults_paths_and_the_broker_assignment(tmp_path):
    hf = load_hosts(_write(tmp_path, GOOD))
    assert hf.controller.target == "kafka@10.0.0.10:2222"
    assert hf.controller.sudo is True and hf.controller.port == 9092
    assert hf.controller.key == tmp_path / "id_test"  # relative to the hosts file
    assert hf.brokers[1].port == 9093 and hf.brokers[1].name == "b2"
    hosts = hf.assign(["A", "B"])
    assert hosts["B"].address == "10.0.0.12" and hosts["B"].node == "B"
    assert hosts["B"].label() == "host b2 (broker B)"
    with pytest.raises(UsageError, match="3 brokers .* names 2"):
        hf.assign(["A", "B", "C"])


@pytest.mark.parametrize("text, line, message", [
    (GOOD.replace("{address: 10.0.0.11}", "{adress: 10.0.0.11}"), 7,
     "unknown key 'adress' in brokers[0]; allowed: name, address,"),
    (GOOD.replace("brokers:", "broker:"), 6,
     "unknown key 'broker' in a hosts file; allowed: defaults, controller, brokers; "
     "did you mean 'brokers'?"),
    (GOOD.replace("ssh_port: 2222", "ssh_port: 70000"), 5, "ssh_port must be a TCP port"),
    (GOOD.replace("sudo: true", "sudo: maybe"), 4, "sudo must be true or false"),
    (GOOD.replace("port: 9093, ", "port: 9092, address: 10.0.0.11, ").replace(
        "address: 10.0.0.12, ", ""), 8, "10.0.0.11:9092 is also brokers[0]'s"),
    (GOOD.replace("key: id_test", "key: missing_key"), 5, "key file"),
    # Found by bench/fuzz.py: a RuntimeError and an OSError (file name too long).
    (GOOD.replace("{address: 10.0.0.11}", "{address: 10.0.0.11, key: ~nosuchuser/k}"), 7,
     "brokers[0]: ~nosuchuser/k: no such user's home directory here"),
    (GOOD.replace("key: id_test", "key: " + "k" * 300), 5, "key file"),
    (GOOD.replace("{address: 10.0.0.11}", "{name: x}"), 7, "brokers[0] has no address"),
    (GOOD + "  - {address: 10.0.0.13, host_key_check: maybe}\n", 9, "host_key_check must be"),
    (GOOD.replace("  user: kafka\n", "  user: kafka\n  workdir: /tmp\n"), 3,
     "workdir must be an absolute directory of its own"),
])
def test_a_mistake_in_the_hosts_file_names_its_line(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(ScenarioError) as e:
        load_hosts(path)
    assert e.value.line == line
    assert message in e.value.message


def test_the_cli_reports_a_misspelt_key_on_one_line_with_exit_2(tmp_path):
    path = _write(tmp_path, GOOD.replace("{address: 10.0.0.11}", "{adress: 10.0.0.11}"))
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "kip101-hw-truncation-loss",
         "--protocol", "0.10", "--backend", "ssh", "--hosts", str(path),
         "--runs-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"isrlab: {path}:7: unknown key 'adress' in brokers[0]; "
        "allowed: name, address, ssh_port, user, key, password, sudo, port, python, workdir, "
        "known_hosts, host_key_check, connect_timeout, command_timeout; "
        "did you mean 'address'?"]
    assert not (tmp_path / "runs").exists()


def test_ssh_needs_a_hosts_file_and_hosts_needs_ssh(tmp_path):
    base = [sys.executable, "-m", "harness.cli", "reproduce", "kip101-hw-truncation-loss",
            "--protocol", "0.10", "--runs-dir", str(tmp_path)]
    proc = subprocess.run([*base, "--backend", "ssh"], capture_output=True, text=True)
    assert proc.returncode == 2 and "needs --hosts" in proc.stderr
    proc = subprocess.run([*base, "--hosts", "h.yaml"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--hosts applies to --backend ssh only" in proc.stderr


def test_the_run_chain_is_a_short_iptables_name_of_the_run():
    a, b = chain_name("20261126T075925Z-x-0.10-3dc762"), chain_name("other")
    assert a.startswith(CHAIN_PREFIX) and len(a) <= 28 and a != b
    assert a == chain_name("20261126T075925Z-x-0.10-3dc762")
