"""Shared fixtures: free ports, and a check that tests leave no process behind."""

from __future__ import annotations

import os
import random
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from harness.backends.ports import address_free

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))

# Tier marks enforced (tests/tiers.py): an unmarked test that starts a broker,
# a container or a JVM fails.
pytest_plugins = ["tiers"]

# `isrlab` subprocesses check through one warm checker server of the suite's own, in
# a private state directory, as a user's commands do (each would otherwise start a
# JVM of its own: ~25 s apiece); it is stopped when the session ends. Checks in the
# test process itself (checker.api) use its own SparkSession. Tests of the server
# (tests/test_checker_server.py) use directories of their own;
# ISRLAB_TEST_CHECKER_SERVER=0 turns the server off for the whole suite.
_SERVER_DIR = tempfile.mkdtemp(prefix="isrlab-test-checker-")
os.environ["ISRLAB_CHECKER_DIR"] = _SERVER_DIR
os.environ["ISRLAB_CHECKER_SERVER"] = os.environ.get("ISRLAB_TEST_CHECKER_SERVER", "1")


def pytest_sessionfinish(session, exitstatus) -> None:
    from checker import client

    if client.status() is not None:
        client.stop()
    shutil.rmtree(_SERVER_DIR, ignore_errors=True)


# The local backend's node addresses: the controller on 127.0.0.1, broker i on
# 127.0.0.(i+2), all on one port (harness.backends.local).
_NODE_HOSTS = [f"127.0.0.{i}" for i in range(1, 10)]


def child_env(**extra: str) -> dict[str, str]:
    """The environment for an `isrlab` (or other Python) child of a test: this
    checkout first on its path, the rest of PYTHONPATH kept (tests/tiers.py's
    spawn watch among it)."""
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, **extra}


def free_port() -> int:
    """A port free on every node address of a local cluster. The kernel picks one
    free on 127.0.0.1 only; a listener an earlier test left on 127.0.0.2 at that
    port would make the next cluster fail with "address in use"."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if all(address_free(f"{h}:{port}") for h in _NODE_HOSTS):
            return port
    raise RuntimeError("no port free on every 127.0.0.x node address")


def descendants(pid: int, spark_too: bool = False) -> list[int]:
    """Every live process whose parent chain reaches pid (from /proc), except the
    Spark driver JVM an earlier checker test may have started in this session
    (it lives as long as the test process, by design) and a checker server a
    command started (with its JVM: it outlives the command, by design) -- unless
    ``spark_too``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            shared = (b"org.apache.spark.deploy.SparkSubmit" in cmdline
                      or b"-m\0checker.server\0" in cmdline)
        except OSError:
            continue
        if fields[0] == "Z" or (shared and not spark_too):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def free_base_port(count: int) -> int:
    """A base port with `count` consecutive ports free on 127.0.0.1 (docker maps
    one host port per node from the base)."""
    # Below the kernel's ephemeral range: there, outgoing connections (a chaos
    # workload's tens of thousands) take every other port, and consecutive free
    # ports are rare.
    low = 20000
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            high = int(f.read().split()[0]) - count
    except (OSError, ValueError, IndexError):
        high = 32000
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(low, max(low + 1, high))
        if all(address_free(f"127.0.0.1:{p}") for p in range(base, base + count)):
            return base
    raise RuntimeError("no free port range")


def skip_unless_required(variable: str, reason: str):
    """Skip for a missing tool -- or fail when CI sets `variable`=1, so a missing
    tool cannot pass as skipped."""
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but {reason}")
    pytest.skip(reason)


def docker_or_skip():
    """A docker client; without an engine the test skips (fails under
    ISRLAB_REQUIRE_DOCKER=1)."""
    from harness.backends.docker_image import DockerUnavailable, docker_client

    try:
        return docker_client()
    except DockerUnavailable as e:
        skip_unless_required("ISRLAB_REQUIRE_DOCKER", str(e))


def kcat_or_skip() -> str:
    """kcat's path; without it the test skips (fails under ISRLAB_REQUIRE_KCAT=1)."""
    from workloads.kafka_clients import KCAT_MISSING

    path = shutil.which("kcat")
    if path is None:
        skip_unless_required("ISRLAB_REQUIRE_KCAT", KCAT_MISSING)
    return path


def docker_leftovers(client, run_id: str | None = None) -> list[str]:
    """Containers, networks and volumes labelled as isrlab's (one run's, or any)."""
    label = {"label": "isrlab.run" if run_id is None else f"isrlab.run={run_id}"}
    return (
        [x.name for x in client.containers.list(all=True, filters=label)]
        + [x.name for x in client.networks.list(filters=label)]
        + [x.name for x in client.volumes.list(filters=label)]
    )


def dead_owner():
    """The owner labels' Owner of a real process that has exited and been reaped:
    what a crashed isrlab leaves recorded on its Docker objects."""
    import subprocess

    from harness.backends.owner import Owner, process_start

    proc = subprocess.Popen(["sleep", "60"])
    try:
        start = process_start(proc.pid) or ""
        assert start, "no start time for a live child"
    finally:
        proc.kill()
        proc.wait()
    return Owner(socket.gethostname(), proc.pid, start, os.readlink("/proc/self/ns/pid"))


@pytest.fixture
def port() -> int:
    return free_port()


# --- checker and report tests (owned by checker/) ------------------------------
# The generated runs are checked in one Spark batch per test session; the fixture
# lives in conftest_spark.py and is made available to every test module here.
from conftest_spark import checked_batch  # noqa: E402, F401
