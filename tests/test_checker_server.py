"""The warm checker server (checker.server, checker.client): a check through it
gives the same results as one in this process; it is versioned (a client of
another checker version replaces it, never uses it), it stops by itself after its
idle timeout leaving nothing behind, `isrlab checker status|stop` show and stop
it, and --no-server / ISRLAB_CHECKER_SERVER=0 check without it.

Each server here is a real one (its own process and Spark JVM) in a private state
directory, so a user's server is never touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, alive, descendants
from conftest_spark import clean, kip101_loss

from checker import client, remote


@pytest.fixture
def server_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ISRLAB_CHECKER_DIR", str(tmp_path / "server"))
    monkeypatch.setenv("ISRLAB_CHECKER_SERVER", "1")
    yield tmp_path
    client.stop()


def _runs(root: Path) -> list[Path]:
    loss = kip101_loss(root, "loss", ["lost-write"], "kip101-hw-truncation-loss").write()
    clean_run = clean(root, "clean", [], None, n=6).write()
    return [loss, clean_run]


def _essence(results: list) -> list:
    return [(r.run_id, r.verdict, r.exit_code, [(a["kind"], a["witness"]) for a in r.anomalies])
            for r in results]


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.spark  # starts a checker server's JVM
def test_the_warm_up_goes_on_after_a_real_check_up_to_its_count(
        server_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISRLAB_CHECKER_WARMUP", "3")
    runs = _runs(server_env / "runs")
    client.check(runs[:1])
    deadline = time.monotonic() + 240
    status = client.status()
    while time.monotonic() < deadline:
        status = client.status()
        assert status is not None
        if status["checks"] + status["warmup_checks"] >= 3:
            break
        time.sleep(1)
    # Three checks in all, real or made up: the warm-up went on after the real one.
    assert status is not None and status["checks"] == 1 and status["warmup_checks"] == 2
    time.sleep(8)  # and stopped there: three checks in all
    assert client.status()["warmup_checks"] == 2
    assert [r.verdict for r in client.check(runs[1:])] == ["valid"]
    assert client.status()["checks"] == 2


@pytest.mark.spark  # starts a checker server's JVM
def test_a_check_waiting_for_the_server_is_served_before_its_warm_up(
        server_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that connected while the server's Spark started (as a `reproduce`
    whose cluster is quicker) is served first: no warm-up is started only to be
    abandoned. After that check the warm-up runs, and the next check abandons it."""
    monkeypatch.setenv("ISRLAB_CHECKER_WARMUP", "10")
    runs = _runs(server_env / "runs")
    client.check(runs[:1])
    status = client.status()
    assert status is not None and status["checks"] == 1
    assert status["warmups_abandoned"] == 0
    deadline = time.monotonic() + 240
    while client.status()["warmup_checks"] < 1:
        assert time.monotonic() < deadline, "the warm-up did not go on after the check"
        time.sleep(0.2)
    assert [r.verdict for r in client.check(runs[1:])] == ["valid"]
    status = client.status()
    assert status["checks"] == 2 and status["warmups_abandoned"] == 1


@pytest.mark.spark  # starts a checker server's JVM
def test_server_check_matches_in_process_and_replaces_a_stale_server(
        server_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _runs(server_env / "runs")
    said: list[str] = []
    served = client.check(runs, progress=said.append)
    first = client.status()
    assert first is not None and first["current"] and first["checks"] == 1
    assert not any("unavailable" in m for m in said), said
    local = client.check(runs, use_server=False)
    assert _essence(served) == _essence(local)
    assert [r.verdict for r in served] == ["valid", "valid"]
    assert [a["kind"] for a in served[0].anomalies] == ["lost-write"]
    # Each check wrote the run's check/summary.json, from the server's process too.
    summary = json.loads((runs[0] / "check" / "summary.json").read_text())
    assert summary["verdict"] == "valid"

    # An upgrade: this client's checker is another version. It must not use the
    # running server but replace it with one of its own version.
    remote.checker_version.cache_clear()
    monkeypatch.setenv("ISRLAB_CHECKER_VERSION_SALT", "upgraded")
    try:
        again = client.check(runs[:1])
        second = client.status()
        assert second is not None and second["current"]
        assert second["pid"] != first["pid"]
        assert second["version"] == remote.checker_version() != first["version"]
        assert second["checks"] == 1
        assert _essence(again) == _essence(served[:1])
        deadline = time.monotonic() + 60
        while client._alive(first["pid"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not client._alive(first["pid"]), "the stale server was left running"
    finally:
        client.stop()
        remote.checker_version.cache_clear()


@pytest.mark.spark  # starts a checker server's JVM
def test_idle_server_exits_and_cli_status_stop(server_env: Path) -> None:
    env = {**os.environ, "ISRLAB_CHECKER_IDLE_S": "4"}
    out = _cli("checker", "status", env=env)
    assert out.returncode == 0 and out.stdout.strip() == "checker server: not running"
    assert _cli("checker", "start", env=env).returncode == 0
    info = client.read_info()
    assert info is not None
    deadline = time.monotonic() + 120
    while not (client.read_info() or {}).get("ready") and time.monotonic() < deadline:
        time.sleep(0.2)
    status = json.loads(_cli("checker", "status", "--json", env=env).stdout)
    assert status["running"] and status["pid"] == info["pid"] and status["current"]
    assert status["idle_timeout"] == 4
    jvms = descendants(info["pid"], spark_too=True)
    assert jvms, "the server has no Spark JVM"
    # Idle for 4 s: it stops by itself, with its JVM, socket and state file.
    deadline = time.monotonic() + 90
    while client._alive(info["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not client._alive(info["pid"])
    while any(alive(p) for p in jvms) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in jvms), "the server's JVM outlived it"
    assert not remote.socket_path().exists() and not remote.info_path().exists()
    assert _cli("checker", "stop", env=env).stdout.strip() == "checker server: not running"


@pytest.mark.spark  # starts a checker server's JVM
def test_no_server_checks_in_process(server_env: Path) -> None:
    runs = _runs(server_env / "runs")
    out = _cli("check", "--no-server", "--no-report", "--json", *map(str, runs))
    assert out.returncode == 0, out.stderr  # both verdicts valid (the loss is expected)
    assert [r["verdict"] for r in json.loads(out.stdout)["runs"]] == ["valid", "valid"]
    assert client.read_info() is None, "--no-server started a server"


def test_server_wanted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local masters use the server unless --no-server or ISRLAB_CHECKER_SERVER=0;
    a cluster's master never does (a warm server would hold its executors)."""
    monkeypatch.setenv("ISRLAB_CHECKER_SERVER", "1")
    assert client.server_wanted(None, "local[2]")
    assert not client.server_wanted(False, "local[2]")
    assert not client.server_wanted(None, "spark://127.0.0.1:7077")
    for off in ("0", "off", "no"):
        monkeypatch.setenv("ISRLAB_CHECKER_SERVER", off)
        assert not client.server_wanted(None, "local[2]")


@pytest.mark.spark  # starts a checker server's JVM
def test_a_check_request_abandons_the_warm_up_wherever_it_is(tmp_path: Path) -> None:
    """The warm-up, abandoned after it has started 1, 4, 12 and 25 Spark jobs (so in
    different phases of its checks), is gone when abandon() returns, no job of it is
    left running, and a check in the same JVM right after finds what it should
    (its cached data was not dropped by the warm-up's end). How long abandon() takes
    is bench/abandon_warmup.py's."""
    from checker.api import check_runs
    from checker.server import _WarmUp
    from checker.spark import DEFAULT_MASTER, get_session

    sc = get_session(DEFAULT_MASTER).sparkContext
    run = kip101_loss(tmp_path, "loss", ["lost-write"], "kip101-hw-truncation-loss").write()
    tracker = sc.statusTracker()
    for jobs in (1, 4, 12, 25):
        before = max(tracker.getJobIdsForGroup(None) or [-1])
        warm = _WarmUp(DEFAULT_MASTER, 50, lambda: None)
        warm.start()
        deadline = time.monotonic() + 240
        while max(tracker.getJobIdsForGroup(None) or [-1]) - before < jobs:
            assert warm.is_alive() and time.monotonic() < deadline
            time.sleep(0.005)
        assert warm.abandon()  # it was running
        assert not warm.is_alive()
        assert tracker.getActiveJobsIds() == []
        [result] = check_runs([run])
        assert result.verdict == "valid"
        assert [a["kind"] for a in result.anomalies] == ["lost-write"]
    assert not _WarmUp(DEFAULT_MASTER, 1, lambda: None).abandon()  # never started



def _marked(marker: bytes) -> list[tuple[int, bytes]]:
    """(pid, cmdline) of every live process whose environment holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not alive(int(entry)):
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker not in f.read():
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found.append((int(entry), f.read()))
        except OSError:
            continue
    return found


@pytest.mark.spark  # starts a checker server's JVM
def test_a_server_stopped_while_its_spark_starts_leaves_no_jvm(tmp_path: Path) -> None:
    """SIGTERM (`checker stop`, a test session's end) while the server's driver JVM is
    starting: PySpark's launch deletes the directory the JVM was to write its address
    to, and that JVM would run for good (Py4J's server thread). It is killed."""
    marker = f"ISRLAB_TEST_LAUNCH={os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "ISRLAB_CHECKER_DIR": str(tmp_path / "server"),
           "ISRLAB_TEST_LAUNCH": marker.split("=", 1)[1]}
    proc = subprocess.Popen([sys.executable, "-m", "checker.server", "--master", "local[2]"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        # The driver JVM exists (spark-class has exec'd it, after its launcher JVM
        # built the command) but has not answered yet.
        while not (jvms := [pid for pid, cmd in _marked(marker.encode())
                            if b"org.apache.spark.deploy.SparkSubmit" in cmd
                            and b"org.apache.spark.launcher.Main" not in cmd]):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        info = json.loads((tmp_path / "server" / "server.json").read_text())
        assert info["pid"] == proc.pid and not info["ready"]
        proc.terminate()
        proc.wait(60)
        # (A class-data archive build it may start as it exits is another JVM.)
        deadline = time.monotonic() + 30
        while any(alive(p) for p in jvms) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in jvms if alive(p)] == []
    finally:
        proc.kill()
        for pid, _ in _marked(marker.encode()):
            os.kill(pid, 9)


def test_the_version_is_the_environments_not_the_interpreters_name() -> None:
    """`isrlab` runs as python3, `python -m harness.cli` as python: one environment,
    one checker version, so neither replaces the other's warm server."""
    bindir = Path(sys.executable).parent
    names = [n for n in ("python", "python3", f"python3.{sys.version_info.minor}")
             if (bindir / n).exists()]
    assert len(names) >= 2, f"{bindir} holds one interpreter name only: {names}"
    code = "from checker.remote import checker_version; print(checker_version())"
    versions = {subprocess.run([str(bindir / n), "-c", code], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.strip() for n in names}
    assert len(versions) == 1 and len(versions.pop()) == 16


@pytest.mark.spark  # starts a checker server's JVM
def test_cancelling_the_jobs_fails_one_waiting_on_anothers_stage() -> None:
    """checker.spark.cancel_jobs (the warm-up's abandon, a client that hung up): job B
    reads the shuffle job A is still writing, so B's own stage waits on A's. Both end
    with an error. SparkContext.cancelAllJobs failed A only and dropped B, whose
    caller then waited for good (a CI run hung so in the abandon test above)."""
    from checker.spark import DEFAULT_MASTER, cancel_jobs, get_session

    spark = get_session(DEFAULT_MASTER)
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    # Each map task sleeps for good unless killed: only cancelling can end A and B.
    shuffled = sc.parallelize(range(2), 2).map(lambda x: (time.sleep(600), (x, x))[1]) \
        .partitionBy(2)
    ended: dict[str, BaseException | None] = {}

    def run(name: str, action: Callable[[], object]) -> threading.Thread:
        def target() -> None:
            try:
                action()
                ended[name] = None
            except Exception as e:  # noqa: BLE001 - the cancellation, asserted below
                ended[name] = e
        # A daemon: were B dropped, its thread would wait for good, not the test.
        t = threading.Thread(target=target, daemon=True)
        t.start()
        return t

    a = run("A", shuffled.count)
    deadline = time.monotonic() + 120
    while not tracker.getActiveStageIds():
        assert time.monotonic() < deadline and a.is_alive()
        time.sleep(0.05)
    b = run("B", lambda: shuffled.mapValues(lambda v: v + 1).collect())
    while len(tracker.getActiveJobsIds()) < 2:
        assert time.monotonic() < deadline and b.is_alive()
        time.sleep(0.05)
    cancel_jobs(spark)
    a.join(60)
    b.join(60)
    assert sorted(ended) == ["A", "B"], f"still waiting: {sorted({'A', 'B'} - set(ended))}"
    assert all("cancelled" in str(e) for e in ended.values()), ended
    assert tracker.getActiveJobsIds() == []


def test_a_check_that_failed_on_the_server_is_not_called_unavailable() -> None:
    """The server answered with its check's failure (a run moved away mid-check):
    the line says the check failed there, not that the server was unavailable."""
    from checker.client import ServerUnavailable

    failed = ServerUnavailable("FAILED_READ_FILE: history.jsonl", failed=True).said("checking")
    assert failed == ("checking failed on the checker server (FAILED_READ_FILE: history.jsonl);"
                      " checking again in this process")
    gone = ServerUnavailable("lost the checker server: EOF").said("writing")
    assert gone == "checker server unavailable (lost the checker server: EOF); writing in " \
                   "this process"
