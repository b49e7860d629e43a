"""The ssh backend against real sshd hosts (`isrlab ssh hosts up`: containers of the
offline base with openssh-server, on a Docker network of their own): the shipped
scenarios' verdicts, a chaos run, every fault, partitions as iptables rules, and
nothing left on any host after a run, a failed run, Ctrl-C or a killed harness.

Needs a Docker engine: skipped without one, a failure under ISRLAB_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, TESTS, child_env, docker_or_skip

from harness.backends.admin import try_status
from harness.backends.base import CONTROLLER, ClusterSpec
from harness.backends.hostsfile import load_hosts
from harness.errors import UsageError

pytestmark = pytest.mark.docker

STALL = TESTS / "data" / "stall-partitioned.yaml"  # acked writes, a partition, then hangs
SHIPPED = ["kip101-hw-truncation-loss", "kip101-power-loss-divergence",
           "kip279-unclean-divergence"]
SPEC = ClusterSpec(
    protocol="latest", brokers=["A", "B", "C"],
    topics=[{"name": "t", "partitions": 1, "replicas": [["A", "B", "C"]]}],
    broker_config={"min.insync.replicas": 2}, controller_config={})


def isrlab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, env=child_env(), cwd=ROOT,
                          timeout=timeout)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory) -> Iterator[Path]:
    """A controller host and three broker hosts; removed (and checked gone) after."""
    client = docker_or_skip()
    from harness.backends.ssh_hosts import LABEL_SSHHOSTS, hosts_down, hosts_up

    path = hosts_up(3, tmp_path_factory.mktemp("ssh") / "hosts.yaml", quiet=True)
    names = {h.name for h in (load_hosts(path).controller, *load_hosts(path).brokers)}
    yield path
    assert sorted(hosts_down(path)) == sorted(names)
    left = client.containers.list(all=True, filters={"label": LABEL_SSHHOSTS})
    assert not names & {c.name for c in left}
    client.close()


def _container(name: str):
    import docker

    client = docker.from_env()
    try:
        return client.containers.get(name)
    finally:
        client.close()


def _sh(name: str, script: str) -> str:
    code, out = _container(name).exec_run(["sh", "-c", script])
    assert code == 0, out
    return out.decode()


def leftovers(hosts_path: Path) -> dict[str, list[str]]:
    """Per host: broker/controller processes, isrlab iptables chains, anything under
    the workdir -- all must be empty after a run."""
    found = {}
    for h in (load_hosts(hosts_path).controller, *load_hosts(hosts_path).brokers):
        out = _sh(h.name, "for p in /proc/[0-9]*; do [ ${p#/proc/} = $$ ] && continue;"
                          # a process may exit while read: its error is not a leftover
                          " c=$( { tr '\\0' ' ' < $p/cmdline; } 2>/dev/null);"
                          " case \"$c\" in *broker.server*|*broker.controller*) echo \"proc $c\";;"
                          " esac; done; iptables -w -S | grep ISRLAB || true;"
                          " ls -A /tmp/isrlab 2>/dev/null | sed 's/^/file /'")
        found[h.name] = out.split("\n")[:-1]
    return {k: v for k, v in found.items() if v}


# -- the shipped scenarios and a chaos run, checked in one batch ----------------------


@pytest.fixture(scope="module")
def runs(hosts, tmp_path_factory) -> tuple[dict[str, Any], Path]:
    """The three shipped scenarios under 0.10 and a chaos run with every fault kind, on
    ssh, then one `isrlab check` over them: (its JSON summary, the runs directory)."""
    from harness.chaos.runs import ChaosConfig, chaos_run
    from harness.progress import Progress
    from harness.run.runner import RunOptions, run_scenario
    from harness.scenario.loader import find_scenario, load_scenario
    from nemesis.schedule import parse_faults

    runs_dir = tmp_path_factory.mktemp("ssh-runs")
    options = {"hosts": load_hosts(hosts)}
    quiet = Progress(quiet=True)
    for i, name in enumerate(SHIPPED):
        record = run_scenario(load_scenario(find_scenario(name)), RunOptions(
            protocol="0.10", backend="ssh", seed=i, runs_dir=runs_dir,
            backend_options=options), quiet)
        assert record.error is None, record.error
        assert leftovers(hosts) == {}
    cfg = ChaosConfig(protocol="latest", time_limit=10.0,
                      faults=parse_faults("kill,pause,partition,power-cycle"), rate=300.0)
    # The first seed whose schedule both partitions and takes a broker down.
    for seed in range(100):
        scenario, meta = chaos_run(cfg, seed)
        kinds = {st.kind for st in scenario.steps}
        if "partition" in kinds and kinds & {"kill", "power-cycle"}:
            break
    else:
        raise AssertionError("no seed < 100 partitions and takes a broker down")
    record = run_scenario(scenario, RunOptions(
        protocol="latest", backend="ssh", seed=seed, runs_dir=runs_dir,
        backend_options=options, meta=meta), quiet)
    assert record.error is None, record.error
    assert leftovers(hosts) == {}
    proc = isrlab("check", str(runs_dir), "--json", "--no-report", timeout=600)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout), runs_dir


def test_the_shipped_scenarios_give_their_documented_verdicts_on_ssh(runs):
    summary, _ = runs
    by_scenario = {r["scenario"]: r for r in summary["runs"] if r.get("scenario")}
    assert sorted(by_scenario) == sorted(SHIPPED)
    for name, r in by_scenario.items():
        assert r["verdict"] == "valid", (name, r)
        assert r["missing"] == [] and r["unexpected"] == [], (name, r)
        assert r["found"].get("lost-write", 0) >= 1, (name, r["found"])


def test_a_chaos_run_on_ssh_completes_with_every_fault_kind(runs):
    summary, runs_dir = runs
    (chaos,) = [r for r in summary["runs"] if not r.get("scenario")]
    assert chaos["verdict"] == "valid" and chaos["anomaly_count"] == 0, chaos
    meta = json.loads((Path(chaos["run_dir"]) / "run.json").read_text())
    assert meta["backend"] == "ssh" and meta["status"] == "complete"
    assert {w["kind"] for w in meta["fault_windows"]} >= {"down", "partitioned"}


def test_a_run_directory_of_ssh_has_the_usual_format(runs):
    summary, _ = runs
    run_dir = Path(summary["runs"][0]["run_dir"])
    for f in ("run.json", "history.jsonl", "events.jsonl", "cluster.json"):
        assert (run_dir / f).is_file(), f
    for node in ("A", "B", "C", CONTROLLER):
        assert "isrlab: starting" in (run_dir / "logs" / f"{node}.log").read_text()
    for b in ("A", "B", "C"):
        assert (run_dir / "replicas" / b / "log.jsonl").is_file()
    meta = json.loads((run_dir / "run.json").read_text())
    hosts = json.loads((run_dir / "ssh-hosts.json").read_text())["nodes"]
    assert meta["cluster"]["addresses"]["A"] == f"{hosts['A']['address']}:9092"


# -- the backend itself: every fault ------------------------------------------------


@pytest.fixture
def backend(hosts, tmp_path):
    from harness.backends.ssh import SshBackend

    b = SshBackend(SPEC, tmp_path / "run-ssh", hosts=hosts)
    b.expect({"partition"})
    b.check_addresses()
    (tmp_path / "run-ssh").mkdir()
    yield b
    b.teardown()
    assert leftovers(hosts) == {}


def _wait(what: str, fn, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (value := fn()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def _chain_rules(hosts: Path, node_index: int) -> list[str]:
    name = load_hosts(hosts).brokers[node_index].name
    return [r for r in _sh(name, "iptables -w -S").splitlines() if "ISRLAB" in r]


def test_every_fault_on_ssh_hosts(backend, hosts):
    b = backend
    b.start_controller()
    for n in SPEC.brokers:
        b.start(n)
    assert all(try_status(b.address(n)) for n in b.nodes)
    # pause: the process is frozen (no answer), resume: it answers again
    b.pause("B")
    assert b.is_paused("B") and b.is_running("B")
    assert try_status(b.address("B"), timeout=0.5) is None
    b.resume("B")
    assert not b.is_paused("B") and try_status(b.address("B")) is not None
    # kill: the process is gone, a start brings it back on the same data
    b.kill("C")
    assert not b.is_running("C")
    b.start("C")
    assert try_status(b.address("C")) is not None
    # stop: SIGTERM, a clean exit status
    assert b.stop("C") == 0
    # power cycle: killed, and drop_unsynced ran on its data directory
    b.power_cycle("A")
    assert not b.is_running("A")
    assert isinstance(b.drop_unsynced("A"), dict)
    b.start("A")
    b.start("C")
    # partition: A's host drops what comes from B's and C's address; heal empties it
    b.partition({"A": ["B", "C"]})
    rules = _chain_rules(hosts, 0)
    addr_b = load_hosts(hosts).brokers[1].address
    assert any(f"-s {addr_b}/32 -j DROP" in r for r in rules), rules
    assert _chain_rules(hosts, 1) == []  # B's host has no rule
    b.heal()
    assert [r for r in _chain_rules(hosts, 0) if "DROP" in r] == []
    # a node that exits by itself is seen as not running
    _sh(load_hosts(hosts).brokers[1].name,
        f"kill -9 $(cat /tmp/isrlab/{b.run_id}/pids/B.pid)")
    _wait("B seen dead", lambda: not b.is_running("B"))
    data = b.data_dir("B")
    assert data is not None and any(data.iterdir())


def test_a_user_that_is_not_root_partitions_through_sudo(hosts, tmp_path):
    from harness.backends.ssh import SshBackend

    as_user = _variant(hosts, tmp_path, lambda t: t.replace("user: root", "user: isrlab"))
    b = SshBackend(SPEC, tmp_path / "run-nosudo", hosts=as_user)
    b.expect({"partition"})
    with pytest.raises(UsageError, match=r"\(controller\): the run partitions the network but "
                                         r"iptables does not work there.*sudo: true"):
        b.check_addresses()
    with_sudo = _variant(hosts, tmp_path, lambda t: t.replace(
        "user: root", "user: isrlab\n  sudo: true"), tag="-sudo")
    b = SshBackend(SPEC, tmp_path / "run-sudo", hosts=with_sudo)
    b.expect({"partition"})
    b.check_addresses()
    (tmp_path / "run-sudo").mkdir()
    try:
        b.start_controller()
        for n in SPEC.brokers:
            b.start(n)
        b.partition({"A": ["B"]})
        assert any("-j DROP" in r for r in _chain_rules(hosts, 0))
        b.kill("B")  # a signal to a process of its own user
        b.start("B")
        b.heal()
    finally:
        b.teardown()
    assert leftovers(hosts) == {}
    owners = _sh(load_hosts(hosts).brokers[0].name, "ls -ld /tmp/isrlab 2>&1 || true")
    assert "No such file" in owners  # the workdir went with the run


# -- bad input: one line naming the host, exit 2, nothing started ---------------------


def _connects(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def _variant(hosts: Path, tmp_path: Path, edit, tag: str = "") -> Path:
    """A copy of the hosts file next to it (its key and known_hosts are relative)."""
    text = edit(hosts.read_text())
    out = hosts.parent / f"variant-{tmp_path.name}{tag}.yaml"
    out.write_text(text)
    return out


def _reproduce(hosts_file: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return isrlab("reproduce", "kip101-hw-truncation-loss", "--protocol", "0.10",
                  "--backend", "ssh", "--hosts", str(hosts_file), "--runs-dir",
                  str(tmp_path / "runs"), "--no-server", timeout=120)


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("isrlab: "), proc.stderr
    return lines[0]


def test_an_unreachable_host_is_named(hosts, tmp_path):
    addr = load_hosts(hosts).brokers[2].address
    unused = addr.rsplit(".", 1)[0] + ".250"
    f = _variant(hosts, tmp_path, lambda t: t.replace(f"address: {addr}}}",
                                                       f"address: {unused}, connect_timeout: 2}}"))
    line = _one_error_line(_reproduce(f, tmp_path))
    assert f"broker-2 (broker C): cannot reach {unused}:22" in line
    assert not (tmp_path / "runs").exists() and leftovers(hosts) == {}


def test_a_refused_key_is_named(hosts, tmp_path):
    from harness.backends.ssh_hosts import _keypair

    other = hosts.parent / f"other-{tmp_path.name}.key"
    other.write_bytes(_keypair()[0])
    other.chmod(0o600)
    f = _variant(hosts, tmp_path, lambda t: t.replace("key: hosts.yaml.key", f"key: {other}"))
    line = _one_error_line(_reproduce(f, tmp_path))
    assert "(controller): root@" in line and f"refused key {other}" in line
    assert leftovers(hosts) == {}


def test_an_unknown_host_key_is_refused_unless_accept_new(hosts, tmp_path):
    empty = hosts.parent / f"known-{tmp_path.name}"
    empty.write_text("")
    f = _variant(hosts, tmp_path, lambda t: t.replace("known_hosts: hosts.yaml.known_hosts",
                                                      f"known_hosts: {empty}"))
    line = _one_error_line(isrlab("ssh", "check", "--hosts", str(f)))
    assert "is not in" in line and "host_key_check: accept-new" in line
    g = _variant(hosts, tmp_path, lambda t: t.replace(
        "known_hosts: hosts.yaml.known_hosts",
        f"known_hosts: {empty}\n  host_key_check: accept-new"))
    proc = isrlab("ssh", "check", "--hosts", str(g))
    assert proc.returncode == 0, proc.stderr
    assert len(empty.read_text().splitlines()) == 4  # learnt, as ssh's accept-new does


def test_a_port_in_use_on_a_host_is_named(hosts, tmp_path):
    h = load_hosts(hosts).brokers[0]
    _container(h.name).exec_run(
        ["python3", "-c", "import socket, time; s = socket.socket(); "
         "s.bind(('0.0.0.0', 9555)); s.listen(); time.sleep(60)"], detach=True)
    _wait("the port taken", lambda: _connects(h.address, 9555))
    f = _variant(hosts, tmp_path, lambda t: t.replace(f"address: {h.address}}}",
                                                       f"address: {h.address}, port: 9555}}"))
    try:
        line = _one_error_line(_reproduce(f, tmp_path))
    finally:
        _sh(h.name, "for p in /proc/[0-9]*; do [ ${p#/proc/} = $$ ] && continue; "
                    "grep -q 9555 $p/cmdline 2>/dev/null && kill ${p#/proc/}; done; true")
    assert f"{h.name} (broker A): cannot listen on {h.address}:9555" in line
    assert "in use" in line
    assert leftovers(hosts) == {}


def test_a_host_without_python3_is_named(tmp_path):
    docker_or_skip()
    f = tmp_path / "nopy.yaml"
    up = isrlab("ssh", "hosts", "up", "1", "--out", str(f), "--quiet")
    assert up.returncode == 0, up.stderr
    try:
        h = load_hosts(f).brokers[0]
        _sh(h.name, "mv /usr/bin/python3 /usr/bin/python3.hidden")
        line = _one_error_line(_reproduce_one_broker(f, tmp_path))
        assert f"{h.name} (broker A): no python3 on the host" in line
    finally:
        down = isrlab("ssh", "hosts", "down", "--hosts", str(f))
    assert down.returncode == 0 and down.stdout.count("removed ") == 2, down


def _reproduce_one_broker(hosts_file: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    scenario = tmp_path / "one.yaml"
    scenario.write_text(
        "name: one\ndescription: one broker\ncluster:\n  brokers: [A]\n  topics:\n"
        "    - {name: t, partitions: 1, replicas: [[A]]}\n"
        "expect: {\"0.10\": [], \"0.11\": [], \"2.0\": [], latest: []}\n"
        "steps:\n  - produce: {expect: ok}\n")
    return isrlab("reproduce", str(scenario), "--protocol", "0.10", "--backend", "ssh",
                  "--hosts", str(hosts_file), "--runs-dir", str(tmp_path / "runs"),
                  "--no-server", timeout=120)


# -- a failed run, Ctrl-C and a killed harness leave nothing ----------------------------


def _start_stall(hosts: Path, runs: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "reproduce", str(STALL), "--protocol", "latest",
         "--backend", "ssh", "--hosts", str(hosts), "--runs-dir", str(runs), "--no-server"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=child_env(), cwd=ROOT)


def _until_partitioned(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if "fault window opens: A partitioned" in line:
            return
    raise AssertionError(f"the run ended before its partition ({proc.wait()})")


def test_ctrl_c_during_a_partition_leaves_nothing_on_the_hosts(hosts, tmp_path):
    proc = _start_stall(hosts, tmp_path / "runs")
    try:
        _until_partitioned(proc)
        assert any("ISRLAB" in r for r in _chain_rules(hosts, 0))
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 3
    assert leftovers(hosts) == {}
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "incomplete"
    assert (run_dir / "logs" / "A.log").is_file()


def test_a_failed_run_leaves_nothing_on_the_hosts(hosts, tmp_path):
    scenario = tmp_path / "fails.yaml"
    scenario.write_text(STALL.read_text().replace("timeout: 300", "timeout: 2"))
    proc = isrlab("reproduce", str(scenario), "--protocol", "latest", "--backend", "ssh",
                  "--hosts", str(hosts), "--runs-dir", str(tmp_path / "runs"), "--no-server")
    assert proc.returncode == 3, proc.stderr
    assert leftovers(hosts) == {}


def test_a_killed_harness_is_cleaned_by_ssh_clean_and_collected(hosts, tmp_path):
    proc = _start_stall(hosts, tmp_path / "runs")
    try:
        _until_partitioned(proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (run_dir,) = (tmp_path / "runs").iterdir()
    left = leftovers(hosts)
    # Detached from the SSH sessions, the nodes outlive the harness.
    nodes = [x for v in left.values() for x in v if x.startswith("proc python3 -m broker.")]
    assert len(nodes) == 4, left
    clean = isrlab("ssh", "clean", "--hosts", str(hosts))
    assert clean.returncode == 0, clean.stderr
    assert f"kept run {run_dir.name}'s data, for `isrlab collect" in clean.stdout
    left = leftovers(hosts)
    assert not any(x.startswith(("proc", "-")) for v in left.values() for x in v), left
    collect = isrlab("collect", str(run_dir))
    assert collect.returncode == 0, collect.stderr
    assert leftovers(hosts) == {}
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "crashed"
    for b in ("A", "B", "C"):
        values = [json.loads(x)["value"] for x in
                  (run_dir / "replicas" / b / "log.jsonl").read_text().splitlines()]
        assert values[:5] == [0, 1, 2, 3, 4], b
