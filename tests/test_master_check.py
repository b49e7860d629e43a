"""A Spark master that cannot be used is refused before anything starts (issue 46):
`check`, `chaos`, `nightly` and `swarm` take `--master`, and `reproduce`, `matrix` and
`checker start` the master of ISRLAB_SPARK_MASTER or theirs; each validates it
first. A malformed master, a port nobody listens on, an HTTP server and a listener
that accepts and says nothing -- real ones, on loopback -- are each one line, exit
2, within seconds: no run or batch directory, no cluster, no Spark JVM.
(A real standalone master and a real worker's port: tests/test_checker_cluster.py.)
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, child_env, free_port
from test_cli import one_line_error, synthetic_run, tagged_processes
from tiers import needs, spawned

PROBE_S = 3  # checker.spark.PROBE_TIMEOUT_S: how long a silent port is waited for


@pytest.fixture
def http_port() -> Iterator[int]:
    """A real HTTP server on loopback (a web UI given as the master, say)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A listener that accepts every connection and never says a word."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()
        for s in held:
            s.close()


@pytest.fixture(params=["bogus", "local[abc]", "unreachable", "http", "silent"])
def bad_master(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(a master that cannot be used, the start of the line that refuses it)."""
    kind = request.param
    usage = "give local[N], spark://HOST:PORT, sc://HOST[:PORT], yarn or k8s://URL"
    if kind in ("bogus", "local[abc]"):
        return kind, f"isrlab: malformed Spark master {kind!r}: {usage}"
    if kind == "unreachable":
        url = f"spark://127.0.0.1:{free_port()}"  # closed: nothing listens there
        return url, f"isrlab: cannot reach Spark master {url}: connection refused"
    port = request.getfixturevalue(f"{kind}_port")
    url = f"spark://127.0.0.1:{port}"
    line = f"isrlab: {url} is not a Spark standalone master: it "
    if kind == "silent":
        line += f"accepted the connection and gave no Spark RPC answer within {PROBE_S} s"
    return url, line


def _refused(args: list[str], line: str, master_env: str | None = None) -> None:
    """`isrlab ARGS` is refused with ``line`` (or a line it starts, ending in a
    space), exit 2, no traceback, nothing started, no process left behind."""
    tag = f"master-{os.getpid()}-{time.monotonic_ns()}"
    env = {**child_env(), "ISRLAB_TEST_TAG": tag}
    env.pop("ISRLAB_SPARK_MASTER", None)
    if master_env is not None:
        env["ISRLAB_SPARK_MASTER"] = master_env
    r = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=120)
    got = one_line_error(r)  # exit 2, one line, no traceback
    assert got == line or (line.endswith(" ") and got.startswith(line)), got
    # At once: nothing started -- no broker, no Spark JVM (by what was started).
    assert [x for x in spawned() if needs(x)] == []
    assert tagged_processes(f"ISRLAB_TEST_TAG={tag}") == []  # no broker, no Spark JVM


def test_chaos_refuses_a_bad_master_before_any_run(tmp_path: Path,
                                                  bad_master: tuple[str, str]) -> None:
    master, line = bad_master
    runs = tmp_path / "runs"
    _refused(["chaos", "--protocol", "3.7", "--runs", "2", "--time-limit", "5s",
              "--runs-dir", str(runs), "--master", master], line)
    assert not runs.exists()  # no batch directory, no run directory


def test_nightly_refuses_a_bad_master_before_any_cell(tmp_path: Path,
                                                     bad_master: tuple[str, str]) -> None:
    master, line = bad_master
    results = tmp_path / "results"
    _refused(["nightly", str(ROOT / "nightly" / "sample.yaml"), "--results", str(results),
              "--master", master], line)
    assert not results.exists()  # no night directory, no results table


def test_swarm_refuses_a_bad_master_before_its_batch(tmp_path: Path,
                                                    bad_master: tuple[str, str]) -> None:
    master, line = bad_master
    runs = tmp_path / "runs"
    _refused(["swarm", "--protocol", "3.7", "--runs", "2", "--runs-dir", str(runs),
              "--master", master], line)
    assert not runs.exists()


def test_check_refuses_a_bad_master_before_reading_a_run(tmp_path: Path,
                                                         bad_master: tuple[str, str]) -> None:
    master, line = bad_master
    run = synthetic_run(tmp_path / "run")
    _refused(["check", str(run), "--master", master], line)
    assert not (run / "check").exists()  # nothing was checked


def test_reproduce_and_matrix_refuse_a_bad_environment_master(tmp_path: Path,
                                                               http_port: int) -> None:
    """Without a --master of their own they check on ISRLAB_SPARK_MASTER: an HTTP
    server there is refused before a cluster starts."""
    url = f"spark://127.0.0.1:{http_port}"
    line = f"isrlab: {url} is not a Spark standalone master: it "
    runs = tmp_path / "runs"
    _refused(["reproduce", "kip101-hw-truncation-loss", "--protocol", "0.10", "--backend",
              "sim", "--runs-dir", str(runs)], line, master_env=url)
    _refused(["matrix", "--scenario", "kip101-hw-truncation-loss", "--protocol", "0.10",
              "--backend", "sim", "--runs-dir", str(runs)], line, master_env=url)
    assert not runs.exists()


def test_check_refuses_a_port_that_is_no_spark_connect_server(tmp_path: Path,
                                                              http_port: int) -> None:
    """An sc:// master that accepts TCP but speaks no gRPC (an HTTP server): the
    Connect client's first call fails, which is one line (not ten minutes of the
    client's retries), before any run is read."""
    url = f"sc://127.0.0.1:{http_port}"
    run = synthetic_run(tmp_path / "run")
    _refused(["check", str(run), "--master", url],
             f"isrlab: {url} is not a Spark Connect server: ")
    assert not (run / "check").exists()


def test_checker_start_refuses_a_malformed_master() -> None:
    _refused(["checker", "start", "--master", "local[abc]"],
             "isrlab: malformed Spark master 'local[abc]': give local[N], spark://HOST:PORT, "
             "sc://HOST[:PORT], yarn or k8s://URL")
