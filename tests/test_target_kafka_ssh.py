"""`isrlab chaos --target kafka --hosts`: process faults on an existing cluster
through SSH. The cluster is a reference cluster the ssh backend runs on sshd
containers (`isrlab ssh hosts up`); the chaos run sees it only as a Kafka
cluster (its Kafka listeners) and a target hosts file whose `kafka:` commands
signal and restart each broker's process on its host, as an operator's would.

Needs a Docker engine: skipped without one, a failure under ISRLAB_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, docker_or_skip

from checker.historyonly import UNCHECKED
from harness.backends.admin import try_status
from harness.backends.base import ClusterSpec
from harness.backends.hostsfile import load_hosts
from workloads.kafka_clients import topic_metadata

pytestmark = pytest.mark.docker

BROKERS = ["A", "B", "C"]
SPEC = ClusterSpec(
    protocol="latest", brokers=BROKERS,
    topics=[{"name": "t", "partitions": 1, "replicas": [BROKERS]}],
    broker_config={"min.insync.replicas": 2}, controller_config={})


@pytest.fixture(scope="module")
def hosts(tmp_path_factory) -> Iterator[Path]:
    """A controller host and three broker hosts, shared by the module's tests."""
    client = docker_or_skip()
    from harness.backends.ssh_hosts import hosts_down, hosts_up

    path = hosts_up(3, tmp_path_factory.mktemp("ssh") / "hosts.yaml", quiet=True)
    try:
        yield path
    finally:
        hosts_down(path)
        client.close()


@pytest.fixture
def cluster(hosts, tmp_path_factory) -> Iterator:
    """A fresh reference cluster on the hosts (a run's values start at 0: a second
    run into the same topic would find them there), leaders and ISR settled."""
    from harness.backends.ssh import SshBackend

    backend = SshBackend(SPEC, tmp_path_factory.mktemp("ref") / "ref-run",
                         hosts=load_hosts(hosts))
    try:
        backend.check_addresses()
        backend.start_controller()
        for b in BROKERS:
            backend.start(b)
        deadline = time.monotonic() + 30
        while True:
            md = topic_metadata("confluent-kafka", backend.kafka_bootstrap(), "t", {}, 5.0)
            if md.exists and md.leaders.get(0) is not None:
                break
            assert time.monotonic() < deadline, "no leader of t/0 within 30 s"
            time.sleep(0.2)
        yield backend
    finally:
        backend.teardown()


def target_hosts(backend, hosts: Path, out: Path) -> Path:
    """The target hosts file of the reference cluster: broker X (Kafka id i) on its
    host, its kafka: commands signalling the pid the ssh backend's run-node.sh
    records and starting it as the ssh backend does."""
    hf = load_hosts(hosts)
    lines = ["defaults:", "  user: root", f"  key: {hf.brokers[0].key}",
             f"  known_hosts: {hf.brokers[0].known_hosts}", "brokers:"]
    for i, b in enumerate(BROKERS):
        rdir = backend.rdir(b)
        pid = f"$(cat {rdir}/pids/{b}.pid)"
        gone = f"while [ ! -s {rdir}/pids/{b}.exit ]; do sleep 0.05; done"
        commands = {
            "kill": f"kill -KILL {pid}; {gone}",
            "stop": f"kill -CONT {pid}; kill -TERM {pid}; {gone}",
            "pause": f"kill -STOP {pid}",
            "resume": f"kill -CONT {pid}",
            "start": backend.start_script(b),
        }
        lines += [f"  - name: {hf.brokers[i].name}", f"    address: {hf.brokers[i].address}",
                  f"    node_id: {i}", "    kafka:"]
        lines += [f"      {k}: {json.dumps(v)}" for k, v in commands.items()]
    out.write_text("\n".join(lines) + "\n")
    return out


def chaos(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", "chaos", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def broker_state(backend, b: str) -> str:
    """The broker process's state letter on its host (R/S: running, T: stopped)."""
    rdir = backend.rdir(b)
    _, out = backend._remote(b).run(
        f"p=$(cat {shlex.quote(rdir)}/pids/{b}.pid); "
        "[ -s " + shlex.quote(f"{rdir}/pids/{b}.exit") + " ] && echo exited || "
        "sed 's/.*) //' /proc/$p/stat | cut -c1")
    return out.strip()


def test_kill_and_pause_on_an_existing_cluster_through_ssh(cluster, hosts, tmp_path: Path):
    target = target_hosts(cluster, hosts, tmp_path / "target.yaml")
    runs = tmp_path / "runs"
    p = chaos("--target", "kafka", "--bootstrap", cluster.kafka_bootstrap(),
              "--hosts", str(target), "--faults", "kill,pause", "--time-limit", "15s",
              "--seed", "1", "--client", "confluent-kafka",
              "--client-config", "enable.idempotence=true", "--rate", "300",
              "--runs-dir", str(runs))
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = [d for d in runs.glob("*/*") if d.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    assert meta["target"] == "kafka" and meta["target_hosts"] == str(target.resolve())
    assert meta["status"] == "complete"
    windows = meta["fault_windows"]
    assert windows and {w["node"] for w in windows} <= {"0", "1", "2"}
    assert {w["fault"] for w in windows} <= {"kill", "pause"}
    assert all(w["end"] is not None for w in windows)  # every one recovered in the run
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    nemesis = [op for op in ops if op["process"] == "nemesis" and op["type"] == "info"]
    assert {op["f"] for op in nemesis} >= {w["fault"] for w in windows}
    assert not any(op.get("error") for op in nemesis)
    # Nothing left faulted on the user's cluster: every broker running, not frozen.
    for b in BROKERS:
        assert broker_state(cluster, b) in ("R", "S"), b
        assert try_status(cluster.address(b), timeout=2.0) is not None, b
    summary = json.loads((run / "check" / "summary.json").read_text())
    assert summary["found"] == {} and summary["verdict"] == "valid"
    assert summary["kinds_not_checked"] == UNCHECKED


def test_an_unreachable_host_is_refused_before_the_run(cluster, hosts, tmp_path: Path):
    target = target_hosts(cluster, hosts, tmp_path / "target.yaml")
    # Nothing listens on port 2 of the first broker's host: refused at once.
    target.write_text(target.read_text().replace("  - name:", "  - ssh_port: 2\n    name:", 1))
    p = chaos("--target", "kafka", "--bootstrap", cluster.kafka_bootstrap(),
              "--hosts", str(target), "--faults", "kill", "--time-limit", "5s",
              "--runs-dir", str(tmp_path / "runs"))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "cannot reach" in p.stderr and "Traceback" not in p.stderr
    for b in BROKERS:
        assert broker_state(cluster, b) in ("R", "S"), b


def test_ctrl_c_during_a_fault_leaves_no_broker_faulted(cluster, hosts, tmp_path: Path):
    import signal

    target = target_hosts(cluster, hosts, tmp_path / "target.yaml")
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "chaos", "--target", "kafka",
         "--bootstrap", cluster.kafka_bootstrap(), "--hosts", str(target),
         "--faults", "pause:all", "--interval", "1s", "--duration", "30s",
         "--time-limit", "20s", "--rate", "100", "--runs-dir", str(tmp_path / "runs")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if "fault window opens" in line and len(
                    [x for x in seen if "fault window opens" in x]) == len(BROKERS):
                break
        assert [b for b in BROKERS if broker_state(cluster, b) != "T"] == [], seen
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(seen) + rest
    assert proc.returncode == 3, out
    assert "recovered: resume 0, resume 1, resume 2" in out, out
    for b in BROKERS:
        assert broker_state(cluster, b) in ("R", "S"), b
        assert try_status(cluster.address(b), timeout=2.0) is not None, b
