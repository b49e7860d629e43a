"""`isrlab docker clean` removes only runs whose owner is gone, and an "address in
use" caused by a leftover container says so. Real clusters, real containers, a
real harness process SIGKILLed mid-run.

Needs a Docker engine: skipped without one, a failure under ISRLAB_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker.client
import docker.errors
import pytest
from conftest import (
    ROOT,
    TESTS,
    child_env,
    dead_owner,
    docker_leftovers,
    docker_or_skip,
    free_base_port,
)

from harness.backends.admin import try_status
from harness.backends.base import CONTROLLER, ClusterSpec
from harness.backends.docker_image import (
    clean_leftovers,
    ensure_images,
    run_labels,
    sweep_leftovers,
)
from harness.backends.owner import Owner

pytestmark = pytest.mark.docker

TAG = f"clean-{uuid.uuid4().hex[:8]}"
SPEC = ClusterSpec(
    protocol="latest",
    brokers=["A"],
    topics=[{"name": "t", "partitions": 1, "replicas": [["A"]]}],
)
# A harness process that brings a cluster up, says so, and waits to be killed.
_CHILD = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    from harness.backends.base import ClusterSpec
    from harness.backends.docker import DockerBackend
    spec = ClusterSpec(protocol="latest", brokers=["A"],
                       topics=[{"name": "t", "partitions": 1, "replicas": [["A"]]}])
    b = DockerBackend(spec, Path(sys.argv[1]), port=int(sys.argv[2]), quiet=True)
    b.check_addresses()
    b.start_controller()
    b.start("A")
    print("up", flush=True)
    time.sleep(600)
""")


def isrlab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, env=child_env(), cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def client() -> Iterator[docker.client.DockerClient]:
    c = docker_or_skip()
    ensure_images(quiet=True)  # built once here, not inside a test's timing
    yield c
    c.close()


def _sigkilled_run(tmp_path: Path) -> str:
    """The run id of a cluster whose harness process was SIGKILLed: its containers
    keep running, nothing tore them down."""
    run_dir = tmp_path / f"{TAG}-orphan"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(run_dir), str(free_base_port(3))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
                            cwd=ROOT)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline() if ready else b""
        assert line.strip() == b"up", (line, proc.stderr.read() if proc.poll() is not None
                                       else "still starting")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return run_dir.name


def test_clean_keeps_a_live_run_and_removes_orphans(client, tmp_path: Path) -> None:
    from harness.backends.docker import DockerBackend

    host = socket.gethostname()
    live = DockerBackend(SPEC, tmp_path / f"{TAG}-live", port=free_base_port(3), quiet=True)
    made: list[str] = [live.run_id]
    extra = []
    try:
        live.check_addresses()
        live.start_controller()
        live.start("A")
        live_objects = sorted(docker_leftovers(client, live.run_id))
        assert len(live_objects) == 5  # 2 containers, 1 network, 2 volumes

        orphan = _sigkilled_run(tmp_path)
        made.append(orphan)
        assert len(docker_leftovers(client, orphan)) == 5
        # Left by an isrlab older than the owner labels: orphaned.
        old = f"{TAG}-old"
        made.append(old)
        extra.append(client.volumes.create(labels={"isrlab.run": old}))
        # Our pid, but another start time: the pid was recycled, the owner is gone.
        me = Owner.this_process()
        recycled = f"{TAG}-recycled"
        made.append(recycled)
        extra.append(client.networks.create(
            f"isrlab-{recycled}",
            labels=run_labels(recycled, Owner(me.host, me.pid, "1", me.pidns))))
        # Another host's run cannot be checked from here: kept.
        elsewhere = f"{TAG}-elsewhere"
        made.append(elsewhere)
        extra.append(client.volumes.create(
            labels=run_labels(elsewhere, Owner(f"other-{TAG}", 4242, "99", "pid:[1]"))))

        r = isrlab("docker", "clean", timeout=120)
        assert r.returncode == 0, r.stderr
        out = r.stdout.splitlines()

        # The live run: every object still there, the cluster still answers.
        assert f"kept run {live.run_id}: owner pid {os.getpid()} on host {host} is alive" in out
        assert sorted(docker_leftovers(client, live.run_id)) == live_objects
        assert try_status(live.address(CONTROLLER)) is not None
        assert try_status(live.address("A")) is not None
        assert live.is_running("A") and live.is_running(CONTROLLER)

        # The SIGKILLed harness's run: all gone, and said why.
        assert docker_leftovers(client, orphan) == []
        line = next(x for x in out if x.startswith(f"removed run {orphan} "))
        assert "(2 containers, 1 network, 2 volumes)" in line and line.endswith("is gone"), line
        assert docker_leftovers(client, old) == []
        assert f"removed run {old} (1 volume): no owner recorded (made by an older isrlab)" \
               in out
        assert docker_leftovers(client, recycled) == []
        assert any(x.startswith(f"removed run {recycled} ") and "another process" in x
                   for x in out), out
        assert len(docker_leftovers(client, elsewhere)) == 1
        assert any(x.startswith(f"kept run {elsewhere}: owner pid 4242 on host other-{TAG} "
                                "is on another host") and x.endswith("--force removes it")
                   for x in out), out
        assert out[-1].startswith("removed ") and "kept" in out[-1]

        # --force removes what cannot be checked too (scoped to this test's run: the
        # CLI's --force would remove every run on the engine, other tests' included).
        runs, errors = sweep_leftovers(force=True, run_id=elsewhere, client=client)
        assert errors == [] and [(x.run_id, x.removed) for x in runs] == [(elsewhere, True)]
        assert runs[0].why.startswith("--force, although owner pid 4242")
        assert docker_leftovers(client, elsewhere) == []
    finally:
        live.teardown()
        for obj in extra:
            try:
                obj.remove()
            except docker.errors.NotFound:
                pass
        for run in made:
            clean_leftovers(run_id=run, client=client)
    for run in made:
        assert docker_leftovers(client, run) == []


def test_address_held_by_a_leftover_container_suggests_clean(client, tmp_path: Path) -> None:
    """A port published by a crashed run's container: `reproduce` names it and says
    `isrlab docker clean`, on either backend; one held by a live run says the run is
    still going."""
    image = ensure_images(quiet=True)
    boxes = []
    runs = {"crashed": f"{TAG}-crashed", "running": f"{TAG}-running"}
    owners = {"crashed": dead_owner(), "running": Owner.this_process()}
    ports = {}
    try:
        for what, run in runs.items():
            ports[what] = free_base_port(3)
            box = client.containers.run(
                image, ["-c", "import time; time.sleep(300)"], detach=True,
                name=f"isrlab-{run}-controller", labels=run_labels(run, owners[what]),
                ports={"9092/tcp": ("127.0.0.1", ports[what])},
            )
            boxes.append(box)
        scenario = str(TESTS / "data" / "single-broker.yaml")
        for backend in ("docker", "local"):
            r = isrlab("reproduce", scenario, "--protocol", "latest", "--backend", backend,
                       "--port", str(ports["crashed"]), "--runs-dir", str(tmp_path / backend),
                       timeout=60)
            assert r.returncode == 2, (r.stdout, r.stderr)
            assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
            assert f"address in use: 127.0.0.1:{ports['crashed']}" in r.stderr
            assert f"container isrlab-{runs['crashed']}-controller of run {runs['crashed']}" \
                   in r.stderr and "is gone: `isrlab docker clean` removes it" in r.stderr
        r = isrlab("reproduce", scenario, "--protocol", "latest", "--backend", "docker",
                   "--port", str(ports["running"]), "--runs-dir", str(tmp_path / "running"),
                   timeout=60)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "that run is still going" in r.stderr and "is alive" in r.stderr
        assert "docker clean" not in r.stderr
    finally:
        for box in boxes:
            box.remove(force=True)
        for run in runs.values():
            clean_leftovers(run_id=run, client=client)
    assert all(docker_leftovers(client, run) == [] for run in runs.values())
