"""The driver JVM's class-data archive (checker.archive): the checker server's own
JVM never records classes (that slows the first check it answers); as it exits a
background builder writes the archive, and a new driver JVM maps it. A builder
that finds another one at work leaves it alone.

Real processes: a server with its Spark JVM, the builder with its own, and a
third JVM that starts from the archive -- all under a private cache directory.
"""

from __future__ import annotations

import fcntl
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, descendants

from checker import client
from checker.spark import cds_archive, master_url

# Prints the JVM's "CDS archive(s) mapped at: [...), size N" line (jcmd VM.info).
_MAPPED = """
import subprocess
from checker.spark import get_session
s = get_session()
jvm = s._jvm
pid = jvm.ProcessHandle.current().pid()
jcmd = jvm.System.getProperty("java.home") + "/bin/jcmd"
info = subprocess.run([jcmd, str(pid), "VM.info"], capture_output=True, text=True).stdout
print(next((ln for ln in info.splitlines() if "CDS archive(s) mapped at" in ln), "none"))
"""


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("ISRLAB_CHECKER_DIR", str(tmp_path / "server"))
    monkeypatch.setenv("ISRLAB_CHECKER_SERVER", "1")
    yield tmp_path
    client.stop()


def _cmdlines(server_pid: int) -> dict[int, bytes]:
    """The command lines of the server's live descendants, by pid."""
    out = {}
    for pid in descendants(server_pid, spark_too=True):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out[pid] = f.read()
        except OSError:
            continue
    return out


def _server_jvm_cmdline(server_pid: int, deadline: float) -> bytes:
    while time.monotonic() < deadline:
        for cmd in _cmdlines(server_pid).values():
            if b"org.apache.spark.deploy.SparkSubmit" in cmd:
                return cmd
        time.sleep(0.2)
    raise AssertionError("the server's Spark JVM did not start")


def _builders(server_pid: int) -> list[int]:
    """The server's live descendants that are a checker.archive builder."""
    return [pid for pid, cmd in _cmdlines(server_pid).items() if b"-m\0checker.archive" in cmd]


@pytest.mark.spark
def test_server_jvm_does_not_record_and_the_archive_is_built_as_it_exits(
        private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISRLAB_CHECKER_WARMUP", "1")
    archive = cds_archive()
    assert str(archive).startswith(str(private_cache)) and not archive.exists()
    info = client.ensure_server(master_url())
    cmd = _server_jvm_cmdline(info["pid"], time.monotonic() + 120)
    for flag in (b"ArchiveClassesAtExit", b"SharedArchiveFile", b"AOTCacheOutput", b"AOTCache="):
        assert flag not in cmd
    # The warm-up (one check) ends; no builder runs beside the warm server, where
    # it would slow the checks the server serves.
    deadline = time.monotonic() + 240
    while (client.status() or {}).get("warmup_checks", 0) < 1:
        assert time.monotonic() < deadline, "the warm-up did not end"
        time.sleep(0.5)
    time.sleep(3)
    assert _builders(info["pid"]) == [] and not archive.exists()
    # A builder killed mid-dump left its temporary file; the next one removes it.
    archive.parent.mkdir(parents=True, exist_ok=True)
    stale = Path(f"{archive}.999999.tmp")
    stale.write_bytes(b"half an archive")
    # As the server exits, the builder's JVM writes the archive.
    client.stop()
    deadline = time.monotonic() + 240
    while not archive.is_file() and time.monotonic() < deadline:
        time.sleep(1)
    assert archive.is_file(), "no class-data archive was built as the server exited"
    assert not list(archive.parent.glob("*.tmp"))
    # A new driver JVM maps it: the base JDK archive is ~13 MB, Spark's classes
    # make it over ten times that.
    out = subprocess.run([sys.executable, "-c", _MAPPED], cwd=ROOT, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    m = re.search(r"CDS archive\(s\) mapped at: .*size (\d+)", out.stdout)
    assert m, out.stdout
    assert int(m.group(1)) > archive.stat().st_size // 2


def test_a_builder_leaves_the_work_to_the_one_holding_the_lock(private_cache: Path) -> None:
    archive = cds_archive()
    archive.parent.mkdir(parents=True)
    with open(f"{archive}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        out = subprocess.run([sys.executable, "-m", "checker.archive"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert not archive.exists() and "wrote" not in out.stdout


def _setup() -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "checker", "setup"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.spark
def test_setup_builds_the_archive_in_the_foreground_once(private_cache: Path) -> None:
    archive = cds_archive()
    out = _setup()
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].startswith(f"checker setup: wrote {archive} (")
    assert archive.is_file() and not list(archive.parent.glob("*.tmp"))
    mapped = subprocess.run([sys.executable, "-c", _MAPPED], cwd=ROOT, capture_output=True,
                            text=True, timeout=180)
    m = re.search(r"CDS archive\(s\) mapped at: .*size (\d+)", mapped.stdout)
    assert m and int(m.group(1)) > archive.stat().st_size // 2, mapped.stdout + mapped.stderr
    # Once it is there, setup says so and builds nothing.
    again = _setup()
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"checker setup: the class-data archive is in place: {archive}\n"


def test_setup_waits_for_a_builder_at_work(private_cache: Path) -> None:
    archive = cds_archive()
    archive.parent.mkdir(parents=True)
    with open(f"{archive}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a builder at work
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "checker", "setup"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout.readline().startswith("checker setup: building")
            time.sleep(1)
            assert proc.poll() is None, "setup did not wait for the builder holding the lock"
            archive.write_bytes(b"the other builder's archive")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
        rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert rest.startswith(f"checker setup: another builder wrote {archive}")
