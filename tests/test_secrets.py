"""Secrets in client settings reach the client and are never written (contract.secrets)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, child_env, free_port

from contract.secrets import REDACTED, is_secret, redacted_workload


@pytest.mark.parametrize("key", [
    "sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem",
    "sasl.jaas.config", "sasl.oauthbearer.client.secret", "sasl_plain_password",
    "ssl_password", "sasl_oauth_token_provider"])
def test_secret_settings_are_known_by_name(key: str) -> None:
    assert is_secret(key)


@pytest.mark.parametrize("key", ["acks", "enable.idempotence", "security.protocol",
                                 "sasl.mechanism", "sasl.username", "linger.ms"])
def test_other_settings_are_not_secret(key: str) -> None:
    assert not is_secret(key)


def test_a_workload_is_written_with_its_secrets_redacted() -> None:
    w = {"client": "confluent-kafka", "acks": "all",
         "config": {"sasl.password": "x", "sasl.username": "u", "linger.ms": 5}}
    assert redacted_workload(w) == {**w, "config": {"sasl.password": REDACTED,
                                                    "sasl.username": "u", "linger.ms": 5}}
    assert w["config"]["sasl.password"] == "x"  # what the client gets is untouched
    assert redacted_workload({"acks": 1}) == {"acks": 1}


@pytest.mark.e2e
@pytest.mark.spark
def test_no_artefact_of_a_run_holds_a_secret(tmp_path: Path) -> None:
    """A real client given two secrets (one on the command line, one in a properties
    file, --client-config @FILE) runs and is checked; neither appears in any
    file of the run (run.json, history, events, logs, replicas, the check and its
    report), nor in the command's output or its --json."""
    secrets = ("S3cretPassw0rd", "K3yPassw0rd")
    runs = tmp_path / "runs"
    props = tmp_path / "client.properties"  # the second one from a properties file
    props.write_text(f"# the key's password\nssl.key.password = {secrets[1]}\n")
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "kip101-hw-truncation-loss",
         "--protocol", "latest", "--client", "confluent-kafka",
         "--client-config", f"sasl.password={secrets[0]}",
         "--client-config", f"@{props}",
         "--port", str(free_port()), "--runs-dir", str(runs), "--json"],
        capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=600)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    (run,) = [d for d in runs.iterdir() if d.is_dir()]
    assert json.loads((run / "run.json").read_text())["workload"]["config"] == {
        "sasl.password": REDACTED, "ssl.key.password": REDACTED}
    files = [p for p in runs.rglob("*") if p.is_file()]
    assert any(p.name == "report.html" for p in files)
    for text in (r.stdout, r.stderr, *(p.read_bytes().decode(errors="replace")
                                       for p in files)):
        assert not any(s in text for s in secrets)
