"""A run whose harness was SIGKILLed: `isrlab collect` and `isrlab check` rebuild its
replicas from the brokers' data, mark it `crashed`, and leave nothing running; a
run still going is refused. Real harness processes, real brokers, real containers.

The Docker cases need a Docker engine: skipped without one, a failure under
ISRLAB_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    ROOT,
    TESTS,
    alive,
    child_env,
    dead_owner,
    descendants,
    docker_leftovers,
    docker_or_skip,
    free_base_port,
    free_port,
)
from tiers import needs, spawned

from harness.backends.base import CONTROLLER, ClusterSpec
from harness.backends.local import leftover_processes

STALL = TESTS / "data" / "stall.yaml"  # 5 acked writes on A, B, C, then C paused, then hangs
BROKERS = ["A", "B", "C"]
ACKED_LINES = 12  # history lines once the 5 sends and the pause of C completed


def isrlab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, env=child_env(), cwd=ROOT, timeout=timeout)


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def sigkilled_reproduce(tmp_path: Path, backend: str) -> tuple[Path, list[int]]:
    """Start `isrlab reproduce stall.yaml` and SIGKILL it once its history holds the
    acknowledged writes; returns the run directory and the pids of the processes
    the harness had started (its cluster, on the local backend)."""
    runs = tmp_path / "runs"
    port = free_port() if backend == "local" else free_base_port(2 * len(BROKERS) + 1)
    err = tmp_path / "reproduce.err"
    with open(err, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "reproduce", str(STALL), "--protocol", "0.10",
             "--backend", backend, "--port", str(port), "--runs-dir", str(runs), "--quiet"],
            stdout=subprocess.DEVNULL, stderr=err_file, env=child_env(), cwd=ROOT)
    try:
        deadline = time.monotonic() + 180
        while not any(_lines(h) >= ACKED_LINES for h in runs.glob("*/history.jsonl")):
            assert proc.poll() is None, f"reproduce exited {proc.returncode}: {err.read_text()}"
            assert time.monotonic() < deadline, "no acknowledged writes in the history"
            time.sleep(0.05)
        started = descendants(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (run_dir,) = runs.iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "running" and meta["owner"]["pid"] == proc.pid
    assert not any((run_dir / "replicas").iterdir())  # never collected
    return run_dir, started


def assert_collected(run_dir: Path) -> None:
    """run.json says crashed; every broker's log holds the acknowledged writes."""
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "crashed", meta
    assert meta["ended_at"] and meta["collected_at"] and "harness died" in meta["error"]
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text()
               .splitlines() if line.endswith("}")]
    acked = [o["value"] for o in history if o["f"] == "send" and o["type"] == "ok"]
    assert acked == [0, 1, 2, 3, 4]
    for b in BROKERS:
        log = [json.loads(line) for line in (run_dir / "replicas" / b / "log.jsonl")
               .read_text().splitlines()]
        assert [r["value"] for r in log] == acked, b
        state = json.loads((run_dir / "replicas" / b / "state.json").read_text())
        assert state["node"] == b and state["source"] == "data-dir"
        assert [(p["topic"], p["leo"], p["role"]) for p in state["partitions"]] == \
               [("t", 5, "none")]


def assert_nothing_running(run_dir: Path, started: list[int]) -> None:
    assert [p for p in started if alive(p)] == []
    assert leftover_processes(run_dir) == []


# -- local backend ------------------------------------------------------------------


@pytest.mark.e2e
def test_collect_rebuilds_a_sigkilled_local_run(tmp_path: Path) -> None:
    run_dir, started = sigkilled_reproduce(tmp_path, "local")
    assert len(started) == 4  # controller, A, B, C: each dies with its harness
    r = isrlab("collect", str(run_dir))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stderr == ""
    assert "crashed: owner pid" in r.stdout and "is gone" in r.stdout
    assert "A (5 records), B (5 records), C (5 records)" in r.stdout
    assert_collected(run_dir)
    assert_nothing_running(run_dir, started)
    # A second collect finds nothing to do and changes nothing.
    before = (run_dir / "run.json").read_text()
    r = isrlab("collect", str(run_dir))
    assert r.returncode == 0 and "collected already" in r.stdout, r.stdout
    assert (run_dir / "run.json").read_text() == before


@pytest.mark.spark
def test_check_collects_a_sigkilled_local_run_first(tmp_path: Path) -> None:
    run_dir, started = sigkilled_reproduce(tmp_path, "local")
    r = isrlab("check", str(run_dir))
    # A crashed run is judged as a prefix: incomplete (3), or invalid (1) when the
    # prefix already shows an unexpected anomaly.
    assert r.returncode in (1, 3), (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert f"isrlab: run {run_dir} had crashed" in r.stderr
    assert_collected(run_dir)
    summary = json.loads((run_dir / "check" / "summary.json").read_text())
    assert summary["exit_code"] == r.returncode
    assert_nothing_running(run_dir, started)


@pytest.mark.e2e
def test_a_run_still_going_is_refused(tmp_path: Path) -> None:
    """collect and check leave a live run alone: one line, exit 2, nothing touched."""
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "reproduce", str(STALL), "--protocol", "0.10",
         "--port", str(free_port()), "--runs-dir", str(runs), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while not any(_lines(h) >= ACKED_LINES for h in runs.glob("*/history.jsonl")):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        (run_dir,) = runs.iterdir()
        cluster = descendants(proc.pid)
        for args in (("collect", str(run_dir)), ("check", str(run_dir)), ("check", str(runs))):
            before = len(spawned())
            r = isrlab(*args)
            assert r.returncode == 2, (args, r.stdout, r.stderr)
            assert r.stderr == (f"isrlab: run {run_dir} is still going (owner pid {proc.pid} "
                                f"on host {socket.gethostname()} is alive); wait until it has "
                                "ended\n"), r.stderr
            # Refused before Spark starts.
            assert [x for x in spawned()[before:] if needs(x) == "spark"] == []
        assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
        assert not any((run_dir / "replicas").iterdir())
        assert not (run_dir / "check").exists()
        assert len(cluster) == 4 and all(alive(p) for p in cluster)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "incomplete"


def test_collect_needs_a_run_directory_and_leaves_an_ended_run_alone(tmp_path: Path) -> None:
    r = isrlab("collect", str(tmp_path / "nope"))
    assert (r.returncode, r.stderr) == (2, f"isrlab: no such run directory: {tmp_path / 'nope'}\n")
    r = isrlab("collect", str(tmp_path))
    assert (r.returncode, r.stderr) == (2, f"isrlab: run {tmp_path}: not a run directory "
                                           "(no run.json)\n")
    (tmp_path / "run.json").write_text('{"status": "complete",\n "x": }')
    r = isrlab("collect", str(tmp_path))
    assert r.returncode == 2 and r.stderr.startswith(f"isrlab: run {tmp_path}: run.json line 2: "
                                                     "not valid JSON"), r.stderr
    (tmp_path / "run.json").write_text('{"status": "complete"}')
    r = isrlab("collect", str(tmp_path))
    assert (r.returncode, r.stdout) == (0, f"run {tmp_path} ended (status complete): "
                                           "nothing to collect\n")
    assert (tmp_path / "run.json").read_text() == '{"status": "complete"}'


def test_a_run_of_another_host_is_refused(tmp_path: Path) -> None:
    """Whether a harness on another host still runs cannot be seen from here."""
    run_dir = tmp_path / "20260101T000000Z-elsewhere-0.11-abcdef"
    run_dir.mkdir()
    (run_dir / "history.jsonl").write_text("")
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": run_dir.name, "protocol": "0.11", "backend": "local", "expect": [],
        "status": "running", "cluster": {"brokers": ["A"], "topics": []},
        "owner": {"host": "another-host", "pid": 4242, "start": "99", "pidns": "pid:[1]"},
    }))
    before = (run_dir / "run.json").read_text()
    for command in ("collect", "check"):
        r = isrlab(command, str(run_dir))
        assert r.returncode == 2 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
        assert r.stderr == (f"isrlab: run {run_dir} is marked running and its owner pid 4242 "
                            "on host another-host is on another host and cannot be checked; "
                            f"run `isrlab collect {run_dir}` where it ran\n"), r.stderr
    assert (run_dir / "run.json").read_text() == before


@pytest.mark.e2e
def test_collect_stops_leftover_local_processes(tmp_path: Path) -> None:
    """Nodes that outlived their harness (started here without the harness's
    parent-death signal) are found by their --data-dir, relative to their working
    directory, and killed before their data is read."""
    port = free_port()
    run_dir = tmp_path / "runs" / "20260101T000000Z-leftover-0.11-abcdef"
    spec = ClusterSpec(protocol="0.11", brokers=["A"],
                       topics=[{"name": "t", "partitions": 1, "replicas": [["A"]]}])
    addresses = {CONTROLLER: f"127.0.0.1:{port}", "A": f"127.0.0.2:{port}"}
    run_dir.mkdir(parents=True)
    (run_dir / "cluster.json").write_text(json.dumps(spec.process_config(addresses)))
    (run_dir / "history.jsonl").write_text("")
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": run_dir.name, "format_version": 1, "scenario": None, "protocol": "0.11",
        "backend": "local", "expect": [], "status": "running", "ended_at": None,
        "cluster": {"brokers": ["A"], "topics": spec.topics, "addresses": addresses},
        "owner": dead_owner().as_record(),
    }))
    rel = run_dir.relative_to(tmp_path)
    procs = []
    for node, module in ((CONTROLLER, "broker.controller"), ("A", "broker.server")):
        extra = [] if node == CONTROLLER else ["--id", "A", "--controller", addresses[CONTROLLER]]
        procs.append(subprocess.Popen(
            [sys.executable, "-m", module, *extra, "--listen", addresses[node],
             "--data-dir", str(rel / "data" / node), "--config", str(rel / "cluster.json")],
            cwd=tmp_path, env=child_env(), start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        from harness.backends.admin import request, try_status

        def leading() -> bool:
            parts = (try_status(addresses["A"]) or {}).get("partitions") or [{}]
            return parts[0].get("role") == "leader"

        deadline = time.monotonic() + 30
        while not leading():
            assert time.monotonic() < deadline, "the leftover cluster did not come up"
            time.sleep(0.1)
        reply = request(addresses["A"], {"type": "produce", "topic": "t", "partition": 0,
                                         "value": 7, "acks": "all", "timeout_ms": 3000})
        assert reply.get("error") is None, reply
        assert sorted(n for _, _, n, _ in leftover_processes(run_dir)) == ["A", CONTROLLER]

        r = isrlab("collect", str(run_dir))
        assert r.returncode == 0, (r.stdout, r.stderr)
        stopped = next(x for x in r.stdout.splitlines()
                       if x.startswith("stopped what was left running: "))
        assert f"controller (pid {procs[0].pid})" in stopped, stopped
        assert f"broker A (pid {procs[1].pid})" in stopped, stopped
        for p in procs:
            assert p.wait(10) == -signal.SIGKILL
        assert leftover_processes(run_dir) == []
        log = (run_dir / "replicas" / "A" / "log.jsonl").read_text().splitlines()
        assert [json.loads(line)["value"] for line in log] == [7]
        assert json.loads((run_dir / "run.json").read_text())["status"] == "crashed"
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


# -- docker backend -----------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    from harness.backends.docker_image import ensure_images

    c = docker_or_skip()
    ensure_images(quiet=True)  # built once here, not inside a test's timing
    yield c
    c.close()


def _run_id(run_dir: Path) -> str:
    return json.loads((run_dir / "run.json").read_text())["run_id"]


@pytest.mark.docker
def test_docker_clean_keeps_a_crashed_runs_volumes_until_collect(client, tmp_path: Path) -> None:
    from harness.backends.docker_image import clean_leftovers

    run_dir, _ = sigkilled_reproduce(tmp_path, "docker")
    run_id = _run_id(run_dir)
    try:
        # The harness is gone, its containers still run.
        assert len(client.containers.list(filters={"label": f"isrlab.run={run_id}"})) == 4
        r = isrlab("docker", "clean", timeout=120)
        assert r.returncode == 0, r.stderr
        assert (f"kept volumes of crashed run {run_id} until `isrlab collect "
                f"{run_dir.resolve()}`") in r.stdout.splitlines(), r.stdout
        assert any(x.startswith(f"removed run {run_id} (4 containers, 1 network)")
                   for x in r.stdout.splitlines()), r.stdout
        # The containers' logs were saved before they went.
        assert sorted(p.name for p in (run_dir / "logs").iterdir()) == \
               ["A.log", "B.log", "C.log", "controller.log"]
        volumes = client.volumes.list(filters={"label": f"isrlab.run={run_id}"})
        assert len(volumes) == 4 and sorted(docker_leftovers(client, run_id)) == \
               sorted(v.name for v in volumes)

        # collect reads the volumes through a throwaway container, then removes them.
        r = isrlab("collect", str(run_dir))
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert "removed the run's leftovers: 4 volumes" in r.stdout
        assert_collected(run_dir)
        assert docker_leftovers(client, run_id) == []
    finally:
        clean_leftovers(run_id=run_id, client=client)


@pytest.mark.docker
@pytest.mark.spark
def test_check_collects_a_sigkilled_docker_run_first(client, tmp_path: Path) -> None:
    from harness.backends.docker_image import clean_leftovers

    run_dir, _ = sigkilled_reproduce(tmp_path, "docker")
    run_id = _run_id(run_dir)
    try:
        r = isrlab("check", str(run_dir))
        # A crashed run is judged as a prefix: incomplete (3), or invalid (1) when
        # the prefix already shows an unexpected anomaly.
        assert r.returncode in (1, 3), (r.returncode, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        assert f"isrlab: run {run_dir} had crashed" in r.stderr
        # The containers were still running: stopped, their logs kept, then removed.
        assert "stopped what was left running: controller (container " in r.stdout
        assert_collected(run_dir)
        assert (run_dir / "check" / "summary.json").is_file()
        assert (run_dir / "logs" / "controller.log").stat().st_size > 0
        assert docker_leftovers(client, run_id) == []
    finally:
        clean_leftovers(run_id=run_id, client=client)
