"""Test tiers, enforced: a test that starts a broker process, a Docker container
(any Docker engine call) or a JVM (Spark, the checker server) must carry the
matching mark -- `e2e`, `docker`, `spark` -- so that
`-m "not spark and not e2e and not docker"` is a fast tier that starts none.

How it sees: an audit hook in this process, and the same hook in every Python
process a test starts (`spawnwatch/sitecustomize.py`, on PYTHONPATH), append each
process started and each Unix socket connected to the current test's spawn log
(a child's Docker engine calls only where its command line names docker: a local
run that names a port's holder asks the engine and starts nothing);
after each phase (setup, call, teardown) the log is classified here and an
unmarked test that needed a mark fails, naming what it started. Broker processes
run with `-I -S` (no site), so what a broker itself starts is not seen -- they
start nothing."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest

SPAWNWATCH = Path(__file__).resolve().parent / "spawnwatch"
TIER_MARKS = ("e2e", "docker", "spark")
_DIR = tempfile.mkdtemp(prefix="isrlab-test-spawns-")
_LOG_ENV = "ISRLAB_TEST_SPAWN_LOG"

os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(SPAWNWATCH), *filter(None, [os.environ.get("PYTHONPATH")])])
# The children's own line format, loaded by path: this process may have a
# sitecustomize of its own (Debian's Python has one).
_spec = importlib.util.spec_from_file_location("isrlab_spawnwatch",
                                               SPAWNWATCH / "sitecustomize.py")
assert _spec is not None and _spec.loader is not None
_watch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_watch)
spawn_line = _watch.spawn_line


def needs(line: str) -> str | None:
    """The mark a spawn-log line calls for (None: starts nothing heavy)."""
    kind, _, what = line.partition(" ")
    words = what.split()
    if kind == "connect":
        if what.endswith("docker.sock") and os.path.exists(what):  # (not: "no engine")
            return "docker"
        if what.endswith("/server.sock"):  # the checker server: a JVM's work
            return "spark"
        return None
    if kind != "exec" or not words:
        return None
    if any(w in ("broker.server", "broker.controller") for w in words):
        return "e2e"
    if Path(words[0]).name == "docker":
        return "docker"
    if (Path(words[0]).name == "java" or any("spark-submit" in w for w in words)
            or "checker.server" in words):
        return "spark"
    return None


def violations(lines: list[str], marks: set[str]) -> dict[str, str]:
    """Mark -> the first line that needs it, for a test with none of the tier marks
    (a marked test is out of the fast tier already, whichever mark it carries)."""
    if marks & set(TIER_MARKS):
        return {}
    out: dict[str, str] = {}
    for line in lines:
        mark = needs(line)
        if mark is not None:
            out.setdefault(mark, line)
    return out


def spawned() -> list[str]:
    """The current test's spawn log so far (its processes and its children's): for
    a test of "nothing is started" that asserts it by what was started, not by
    how long it took."""
    try:
        return Path(os.environ[_LOG_ENV]).read_text().splitlines()
    except (KeyError, OSError):
        return []


def _hook(event: str, args: tuple) -> None:
    log = os.environ.get(_LOG_ENV)
    line = spawn_line(event, args) if log else None
    if line is not None:
        with open(log, "a") as f:
            f.write(line + "\n")


sys.addaudithook(_hook)


def _take(item: pytest.Item) -> list[str]:
    path = Path(_DIR) / f"{abs(hash(item.nodeid))}.log"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    path.unlink(missing_ok=True)
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    os.environ[_LOG_ENV] = str(Path(_DIR) / f"{abs(hash(item.nodeid))}.log")
    try:
        return (yield)
    finally:
        os.environ.pop(_LOG_ENV, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    report = yield
    found = violations(_take(item), {m.name for m in item.iter_markers()})
    if found and report.outcome != "skipped":
        report.outcome = "failed"
        report.longrepr = (
            "unmarked test started what its tier mark is for (tests/tiers.py): "
            + "; ".join(f"needs @pytest.mark.{m}: {line[:200]}" for m, line in found.items()))
    return report
