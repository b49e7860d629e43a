"""A runs directory that is full or read-only, on a real tmpfs (docs/run-directory.md,
"A full or read-only disk"; docs/exit-codes.md).

Each test mounts a 2 MB tmpfs of its own (as root; without the permission to
mount the tests skip, saying so -- or fail under ISRLAB_REQUIRE_TMPFS=1, as CI
sets it) and unmounts it in the fixture's finalizer.
A tmpfs cannot be remounted read-only while a file on it is open for writing
(EBUSY), so a read-only disk is met at a run's start and by check/collect of a
finished run; during a run the same path handles it as a full disk.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, child_env, dead_owner, descendants, skip_unless_required

from broker.log import Record
from broker.storage import PartitionStore, read_offline
from contract.history import History
from contract.rundir import RunWriteError, RunWrites, read_history
from harness.backends.local import leftover_processes
from harness.progress import Progress
from harness.run.halt import HaltingRuntime
from harness.run.runner import RunOptions, run_scenario
from harness.scenario.loader import load_scenario
from harness.sim.trace import read_trace
from workloads.runtime import REAL

FILL = TESTS / "data" / "fill.yaml"  # 4 producers at 2000/s and 3 consumers for 60 s
# The one stderr line of a run that filled the disk: the harness's first write to fail.
FULL_LINE = re.compile(r"isrlab: cannot write (?P<path>\S+/(history|events|trace)\.jsonl) "
                       r"\((the history|the events|the fetch-round trace)\): "
                       r"No space left on device")


def isrlab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, env=child_env(), cwd=ROOT, timeout=timeout)


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs, always unmounted after the test."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = _mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt))
    if r.returncode != 0:
        skip_unless_required("ISRLAB_REQUIRE_TMPFS", "mounting a tmpfs is not permitted here "
                             f"(needs root or CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=True)  # then fail loudly


def read_only(mnt: Path) -> None:
    r = _mount("-o", "remount,ro", str(mnt))
    assert r.returncode == 0, r.stderr


def fill_up(mnt: Path) -> None:
    """Every byte of the tmpfs taken by one file (an empty file still fits)."""
    with open(mnt / "filler", "wb") as f:
        try:
            while True:
                f.write(bytes(1 << 16))
                f.flush()
        except OSError as e:
            assert e.strerror == "No space left on device"


def only_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def finished_sim_run(runs: Path) -> Path:
    """A small run that ended (not checked)."""
    record = run_scenario(load_scenario(TESTS / "data" / "single-broker.yaml"), RunOptions(
        protocol="2.8", backend="sim", seed=3, runs_dir=runs), Progress(quiet=True))
    assert record.error is None, record.error
    return record.run_dir


# -- a disk that fills during a run ----------------------------------------------------


@pytest.mark.spark
def test_a_sim_run_that_fills_the_disk_stops_incomplete_and_stays_checkable(tmpfs: Path):
    r = isrlab("reproduce", str(FILL), "--protocol", "2.8", "--backend", "sim", "--seed", "1",
               "--runs-dir", str(tmpfs), "--no-server")
    assert r.returncode == 3, (r.stdout, r.stderr)
    m = FULL_LINE.fullmatch(only_line(r.stderr))
    assert m, r.stderr
    [run_dir] = [p for p in tmpfs.iterdir()]
    assert Path(m["path"]).parent == run_dir
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "incomplete" and meta["ended_at"]
    assert meta["error"] == r.stderr.strip().removeprefix("isrlab: ")
    # Closed in the room the run kept for it; nothing half-written left.
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "events.jsonl", "history.jsonl", "logs", "replicas", "run.json", "trace.jsonl"]
    states = [json.loads((run_dir / "replicas" / b / "state.json").read_text())
              for b in ("A", "B", "C")]
    assert {s["source"] for s in states} == {"unwritten"}  # the disk had no room for them
    assert len(read_trace(run_dir)) > 1000  # its cut last line (if any) left out
    assert descendants(os.getpid()) == []

    c = isrlab("check", str(run_dir))
    assert c.returncode == 3, (c.stdout, c.stderr)
    assert "Traceback" not in c.stderr
    assert f"— run incomplete  {run_dir}" in c.stdout
    summary = json.loads((run_dir / "check" / "summary.json").read_text())
    assert summary["verdict"] == "incomplete" and summary["status"] == "incomplete"


@pytest.mark.e2e
def test_a_local_run_that_fills_the_disk_stops_its_threads_and_brokers(tmpfs: Path, port: int):
    """In-process, so that no thread's exception can hide: the producer, consumer and
    events threads stop on the first failed write, without a traceback."""
    raised: list[threading.ExceptHookArgs] = []
    hook, threading.excepthook = threading.excepthook, raised.append
    try:
        record = run_scenario(load_scenario(FILL), RunOptions(
            protocol="2.8", backend="local", seed=1, runs_dir=tmpfs,
            backend_options={"port": port}), Progress(quiet=True))
    finally:
        threading.excepthook = hook
    assert [(a.thread.name if a.thread else None, a.exc_value) for a in raised] == []
    assert isinstance(record.error, RunWriteError) and record.error.exit_code == 3
    assert FULL_LINE.fullmatch(f"isrlab: {record.error}"), record.error
    meta = json.loads((record.run_dir / "run.json").read_text())
    assert (meta["status"], meta["error"]) == ("incomplete", str(record.error))
    assert not (record.run_dir / "run.json.tmp").exists()
    # Nothing left running: brokers, controller, workload and events threads.
    assert leftover_processes(record.run_dir) == []
    assert descendants(os.getpid()) == []
    assert [t.name for t in threading.enumerate()
            if t.name.startswith(("producer-", "consumer-", "events"))] == []


# -- a runs directory that cannot be written at the start -------------------------------


@pytest.mark.parametrize("disk", ["full", "read-only"])
def test_a_run_that_cannot_create_its_directory_starts_nothing(tmpfs: Path, port: int,
                                                               disk: str):
    runs = tmpfs / "runs"
    runs.mkdir()
    if disk == "full":
        fill_up(tmpfs)
    else:
        read_only(tmpfs)
    r = isrlab("reproduce", str(FILL), "--protocol", "2.8", "--backend", "local",
               "--port", str(port), "--seed", "1", "--runs-dir", str(runs))
    assert r.returncode == 2, (r.stdout, r.stderr)
    reason = "No space left on device" if disk == "full" else "Read-only file system"
    # Read-only is found before the checker's JVM is started (the runs directory);
    # a full disk when the run's directory is made.
    assert re.fullmatch(rf"isrlab: cannot write {re.escape(str(runs))}(/\S+-fill-2\.8-\w+"
                        rf"(/\.reserve \(room kept to close the run\)|"
                        rf" \(the run directory\))| \(the runs directory\)): {reason}; "
                        rf"nothing was started",
                        only_line(r.stderr)), r.stderr
    assert list(runs.iterdir()) == []
    assert r.stdout == ""  # not even the run's first progress line


# -- check and collect of a run on a read-only mount -------------------------------------


def test_check_of_a_run_on_a_read_only_mount_refuses_before_spark(tmpfs: Path):
    run_dir = finished_sim_run(tmpfs)
    read_only(tmpfs)
    r = isrlab("check", str(run_dir), "--no-server", timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert only_line(r.stderr) == (f"isrlab: cannot write {run_dir}/check (the check's "
                                   "results): Read-only file system")
    assert "checking" not in r.stdout  # refused before any Spark work


def test_collect_of_a_run_on_a_read_only_mount(tmpfs: Path):
    run_dir = finished_sim_run(tmpfs / "ended")
    crashed = finished_sim_run(tmpfs / "crashed")
    # As a harness killed mid-run leaves it: "running", its owner gone, no replicas.
    meta = json.loads((crashed / "run.json").read_text())
    meta.update(status="running", ended_at=None, owner=dead_owner().as_record())
    (crashed / "run.json").write_text(json.dumps(meta))
    subprocess.run(["rm", "-r", str(crashed / "replicas")], check=True)
    read_only(tmpfs)

    # A run that ended: collect only reads it.
    r = isrlab("collect", str(run_dir))
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert "ended (status complete): nothing to collect" in r.stdout
    # A crashed one must be written: refused, one line, before anything is done.
    for command in ("collect", "check"):
        r = isrlab(command, str(crashed), timeout=60)
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert only_line(r.stderr) == (f"isrlab: cannot write {crashed}/replicas (the crashed "
                                       "run's replicas, rebuilt by collect): Read-only file "
                                       "system"), command
    assert json.loads((crashed / "run.json").read_text())["status"] == "running"


def test_a_brokers_data_is_read_without_being_written(tmpfs: Path):
    """read_offline (collect's reader of a down broker) on a read-only mount: the
    torn last line a crash left is not a record, and stays in the file."""
    store = PartitionStore(tmpfs / "t-0")
    store.append([Record(0, 0, 5), Record(1, 0, 6)])
    store.write_epochs([(0, 0)])
    store.close()
    with open(tmpfs / "t-0" / "log.jsonl", "ab") as f:
        f.write(b'{"offset":2,"ep')
    before = (tmpfs / "t-0" / "log.jsonl").read_bytes()
    read_only(tmpfs)
    [part] = read_offline(tmpfs)["partitions"]
    assert (part["records"], part["leo"], part["epoch_cache"]) == ([[0, 0, 5], [1, 0, 6]], 2,
                                                                    [[0, 0]])
    assert (tmpfs / "t-0" / "log.jsonl").read_bytes() == before


@pytest.mark.spark
def test_check_that_cannot_write_its_results_on_a_full_disk_says_so(tmpfs: Path):
    """The disk fills after the check began (an empty file still fits, so check/ is
    found writable): the results that do not fit are one line, exit 2."""
    run_dir = finished_sim_run(tmpfs)
    fill_up(tmpfs)
    r = isrlab("check", str(run_dir))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert re.fullmatch(rf"isrlab: cannot write {re.escape(str(run_dir))}/check/"
                        r"(anomalies|summary)\.json \(the check's results\): "
                        r"No space left on device", only_line(r.stderr)), r.stderr
    assert not list((run_dir / "check").glob("*.tmp"))


# -- the pieces: the history's first failed write, and the wait it ends ------------------


def test_the_history_stops_at_its_first_failed_write_and_stays_a_prefix(tmpfs: Path):
    writes = RunWrites()
    told: list[str] = []
    writes.on_failure(lambda: told.append("stop"))
    clock = type("Clock", (), {"now": lambda self: 0})()
    (tmpfs / "spare").write_bytes(bytes(1 << 16))  # freed once the history has failed
    history = History(tmpfs / "history.jsonl", clock, writes)
    with pytest.raises(RunWriteError) as first:
        for value in range(10**6):
            history.append(0, "invoke", "send", value, topic="t", partition=0)
    assert str(first.value) == (f"cannot write {tmpfs}/history.jsonl (the history): "
                                "No space left on device")
    assert writes.error is first.value and told == ["stop"]
    (tmpfs / "spare").unlink()
    size = (tmpfs / "history.jsonl").stat().st_size
    # Later ops are refused though there is room now: written nowhere, also not at
    # close, and the listener is not told again.
    with pytest.raises(RunWriteError) as again:
        history.append(0, "invoke", "send", -1, topic="t", partition=0)
    assert again.value is first.value and told == ["stop"]
    history.close()
    assert (tmpfs / "history.jsonl").stat().st_size == size
    ops = read_history(tmpfs)  # a cut-off last line is left out
    assert [op["value"] for op in ops] == list(range(len(ops))) and len(ops) > 1000


def test_a_failed_write_ends_the_steps_wait_at_once(tmp_path: Path):
    """A `sleep: 60` step on the real runtime ends within seconds of a write failing
    on another thread, raising that failure."""
    writes = RunWrites()
    rt = HaltingRuntime(REAL, writes)
    err = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    failer = threading.Timer(0.2, lambda: writes.failed(tmp_path / "events.jsonl",
                                                        "the events", err))
    failer.start()
    try:
        with pytest.raises(RunWriteError) as raised:
            rt.sleep(60)
    finally:
        failer.cancel()
    assert raised.value is writes.error
