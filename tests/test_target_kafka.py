"""`isrlab chaos --target kafka`: the workload and the history-only check on an
existing Kafka cluster -- here a reference cluster reached only through its Kafka
listeners, as if it were someone else's. Bad input is one line, exit 2, nothing
started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import descendants
from test_kafka_listener import start

from checker.historyonly import UNCHECKED

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    # One per test: a run's values start at 0, so a second run into the same topic
    # would find its values there already (each run expects a fresh topic; a
    # shared cluster made the second client's run "duplicate" every value).
    backend = start("latest", tmp_path_factory.mktemp("external"))
    try:
        yield backend
    finally:
        backend.teardown()
        assert descendants(os.getpid()) == []


def chaos(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", "chaos", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_chaos_on_an_existing_cluster(cluster, tmp_path: Path, client: str) -> None:
    runs = tmp_path / "runs"
    extra = [] if client == "confluent-kafka" else ["--client", client]  # the default
    p = chaos("--target", "kafka", "--bootstrap", cluster.kafka_bootstrap(),
              "--time-limit", "6s", "--runs-dir", str(runs), "--rate", "300", *extra)
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = [d for d in runs.glob("*/*") if d.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    assert meta["target"] == "kafka" and meta["bootstrap"] == cluster.kafka_bootstrap()
    assert meta["backend"] == "external" and meta["workload"]["client"] == client
    # No replica log and no events: nothing of the cluster was readable.
    assert not any((run / "replicas").glob("*")) and not (run / "events.jsonl").exists()

    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    acked: dict[int, set[int]] = {0: set(), 1: set()}
    for op in ops:
        if op["f"] == "send" and op["type"] == "ok":
            acked[op["partition"]].add(op["value"])
    assert all(acked.values()), "no acknowledged send on some partition"
    finals = [op for op in ops if op["process"] == "final" and op["type"] == "ok"]
    assert sorted(op["partition"] for op in finals) == [0, 1]  # one per partition
    for op in finals:
        values = [v for _, v in op["records"]]
        assert acked[op["partition"]] <= set(values)  # every acknowledged value
        assert op["hw"] == len(op["records"])  # a fresh topic: offsets 0..hw-1
        assert [o for o, _ in op["records"]] == list(range(op["hw"]))

    summary = json.loads((run / "check" / "summary.json").read_text())
    assert summary["found"] == {} and summary["verdict"] == "valid"
    assert summary["kinds_not_checked"] == UNCHECKED
    assert not set(UNCHECKED) & set(summary["kinds_checked"])
    assert {"lost-write", "duplicate", "nonmonotonic-poll", "poll-skip"} <= \
        set(summary["kinds_checked"])
    report = (run / "check" / "report.html").read_text()
    assert "the replicas agree" not in report  # it saw no replica
    assert "divergence not checked" in report


def test_without_bootstrap_is_refused(tmp_path: Path) -> None:
    p = chaos("--target", "kafka", "--time-limit", "2s", "--runs-dir", str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "--bootstrap" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_faults_without_hosts_are_refused(tmp_path: Path) -> None:
    p = chaos("--target", "kafka", "--bootstrap", "127.0.0.1:9", "--faults", "kill",
              "--time-limit", "2s", "--runs-dir", str(tmp_path))
    assert p.returncode == 2
    assert "faults on an existing cluster need --hosts HOSTS.yaml" in p.stderr
    assert p.stderr.strip().count("\n") == 0 and list(tmp_path.iterdir()) == []


def test_kcat_cannot_read_an_existing_cluster(tmp_path: Path) -> None:
    """isrlab reads an existing cluster's metadata and final read through a Python
    client; kcat is refused in one line naming the ones that can, before any network."""
    p = chaos("--target", "kafka", "--bootstrap", "127.0.0.1:9", "--client", "kcat",
              "--time-limit", "2s", "--runs-dir", str(tmp_path))
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr == ("isrlab: --client kcat with --target kafka: client 'kcat' cannot read "
                        "an existing cluster (metadata); choose one of confluent-kafka, "
                        "kafka-python\n")
    assert list(tmp_path.iterdir()) == []


def test_unreachable_bootstrap_is_refused_in_bounded_time(tmp_path: Path) -> None:
    p = chaos("--target", "kafka", "--bootstrap", "127.0.0.1:9", "--time-limit", "2s",
              "--runs-dir", str(tmp_path), timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().count("\n") == 0 and "nothing was started" in p.stderr
    assert "Traceback" not in p.stderr and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("client", "ssl"), [("confluent-kafka", {"security.protocol": "ssl"}),
                                           ("kafka-python", {"security_protocol": "SSL"})])
def test_the_metadata_probe_speaks_the_clients_security_settings(cluster, client: str,
                                                                 ssl: dict) -> None:
    """The probe that reads an existing cluster's metadata connects as the user's
    settings say: told to speak TLS to this plaintext listener it gets nothing, so a
    SASL/TLS cluster gets its settings too (a producer-only key is left out)."""
    from workloads.kafka_clients import ClusterUnreachable, topic_metadata

    bootstrap = cluster.kafka_bootstrap()
    producer_only = {"enable_idempotence": False} if client == "kafka-python" else {}
    assert topic_metadata(client, bootstrap, "t", producer_only, 10.0).exists
    with pytest.raises(ClusterUnreachable):
        topic_metadata(client, bootstrap, "t", {**producer_only, **ssl}, 3.0)


def test_missing_topic_is_refused(cluster, tmp_path: Path) -> None:
    p = chaos("--target", "kafka", "--bootstrap", cluster.kafka_bootstrap(),
              "--topic", "nope", "--time-limit", "2s", "--runs-dir", str(tmp_path))
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().count("\n") == 0 and "no such topic" in p.stderr
    assert list(tmp_path.iterdir()) == []
