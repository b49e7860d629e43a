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
    """Every live process whose parent chain reaches pid (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
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


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def stub_options(port: int) -> dict:
    return {"port": port, "controller_module": "stub_broker", "broker_module": "stub_broker",
            "extra_pythonpath": [str(TESTS)], "start_timeout": 10.0}


# --- checker and report tests (owned by checker/) ------------------------------
# The generated runs are checked in one Spark batch per test session; the fixture
# lives in conftest_spark.py and is made available to every test module here.
from conftest_spark import checked_batch  # noqa: E402, F401
