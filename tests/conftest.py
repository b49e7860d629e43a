"""Shared fixtures: free ports, and a check that tests leave no process behind."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))


def free_port() -> int:
    """A port free on 127.0.0.1 (and, on loopback, in practice on 127.0.0.x too)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every live process whose parent chain reaches pid (from /proc), except the
    Spark driver JVM an earlier checker test may have started in this session
    (it lives as long as the test process, by design)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                spark = b"org.apache.spark.deploy.SparkSubmit" in f.read()
        except OSError:
            continue
        if fields[0] == "Z" or spark:
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
    for _ in range(50):
        base = free_port()
        if base + count >= 65535:
            continue
        try:
            for p in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port range")


def docker_or_skip():
    """A docker client; without an engine the test skips -- or fails when
    ISRLAB_REQUIRE_DOCKER=1 (CI), so a missing engine cannot pass as skipped."""
    from harness.docker_image import DockerUnavailable, docker_client

    try:
        return docker_client()
    except DockerUnavailable as e:
        if os.environ.get("ISRLAB_REQUIRE_DOCKER") == "1":
            pytest.fail(f"ISRLAB_REQUIRE_DOCKER=1 but {e}")
        pytest.skip(str(e))


def docker_leftovers(client, run_id: str | None = None) -> list[str]:
    """Containers, networks and volumes labelled as isrlab's (one run's, or any)."""
    label = {"label": "isrlab.run" if run_id is None else f"isrlab.run={run_id}"}
    return (
        [x.name for x in client.containers.list(all=True, filters=label)]
        + [x.name for x in client.networks.list(filters=label)]
        + [x.name for x in client.volumes.list(filters=label)]
    )


@pytest.fixture
def port() -> int:
    return free_port()


# --- checker and report tests (owned by checker/) ------------------------------
# The generated runs are checked in one Spark batch per test session; the fixture
# lives in conftest_spark.py and is made available to every test module here.
from conftest_spark import checked_batch  # noqa: E402, F401
