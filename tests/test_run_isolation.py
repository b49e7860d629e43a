"""Runs never mix: each run's cluster has its own cluster id (its run id), its nodes
refuse a peer of another cluster as Kafka refuses one whose meta.properties names
another (InconsistentClusterIdException), and runs started together on one port
-- or on overlapping port ranges -- reserve their addresses all at once, so that
exactly one runs and the others exit 2 before starting anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, descendants, free_port
from test_cli import processes_mentioning

from broker.wire import Connection
from harness.backends import make_backend
from harness.backends.base import CONTROLLER, ClusterSpec
from harness.backends.ports import address_free, reserve
from harness.errors import UsageError

pytestmark = pytest.mark.e2e

SCENARIO = TESTS / "data" / "single-broker.yaml"
SPEC = ClusterSpec(protocol="2.8", brokers=["A"],
                   topics=[{"name": "t", "partitions": 1, "replicas": [["A"]]}])


def _start_together(runs: list[tuple[Path, int]]) -> list[subprocess.CompletedProcess]:
    """`isrlab reproduce` of one small scenario per (runs dir, port), all started
    before any is waited for."""
    procs = [subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "reproduce", str(SCENARIO), "--protocol", "2.8",
         "--port", str(port), "--runs-dir", str(d), "--quiet"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for d, port in runs]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def _exactly_one_ran(tmp_path: Path, results: list[subprocess.CompletedProcess],
                     dirs: list[Path]) -> None:
    codes = [r.returncode for r in results]
    assert sorted(codes) == [0] + [2] * (len(codes) - 1), [(r.returncode, r.stderr)
                                                             for r in results]
    for r, d in zip(results, dirs, strict=True):
        runs = sorted(p for p in d.iterdir()) if d.exists() else []
        if r.returncode == 0:
            (run,) = runs
            meta = json.loads((run / "run.json").read_text())
            assert meta["status"] == "complete"
            # its own cluster: every node was started with the run's id
            assert json.loads((run / "cluster.json").read_text())["cluster_id"] == run.name
        else:
            (line,) = r.stderr.strip().splitlines()
            assert line.startswith("isrlab: address in use: ") and "another isrlab run" in line
            assert "Traceback" not in r.stderr
            assert runs == []  # nothing left: no run directory
    assert processes_mentioning(str(tmp_path)) == []


def test_runs_started_together_on_one_port(tmp_path: Path) -> None:
    port = free_port()
    dirs = [tmp_path / f"runs-{i}" for i in range(3)]
    _exactly_one_ran(tmp_path, _start_together([(d, port) for d in dirs]), dirs)


def test_runs_started_together_on_overlapping_port_ranges(tmp_path: Path) -> None:
    """A broker listens on --port and its Kafka listener on --port + 1: a run on
    port P + 1 needs an address a run on P has."""
    port = free_port()
    while not all(address_free(f"127.0.0.{h}:{port + d}") for h in (1, 2) for d in (1, 2)):
        port = free_port()
    dirs = [tmp_path / "runs-p", tmp_path / "runs-p1"]
    _exactly_one_ran(tmp_path, _start_together([(dirs[0], port), (dirs[1], port + 1)]), dirs)


def test_a_reservation_is_all_or_nothing_and_ends_with_release() -> None:
    port = free_port()
    a = [("A", f"127.0.0.2:{port}"), ("A", f"127.0.0.2:{port + 1}")]
    held = reserve(a, "run x")
    with pytest.raises(UsageError, match=rf"127.0.0.2:{port + 1} \(needed by B\) is held by "
                                         r"another isrlab run \(run x, pid \d+\)"):
        reserve([("B", f"127.0.0.3:{port}"), ("B", f"127.0.0.2:{port + 1}")], "run y")
    # the refused run took nothing: its first address is free for a third
    reserve([("C", f"127.0.0.3:{port}")], "run z").release()
    held.release()
    reserve(a, "run y").release()


def test_a_broker_of_another_cluster_is_refused_and_exits(tmp_path: Path) -> None:
    """Run X's controller; a broker started with run Y's configuration (another
    cluster id) pointed at it is answered INCONSISTENT_CLUSTER_ID and exits, as
    Kafka's broker does -- it never joins X's cluster."""
    x = make_backend("local", SPEC, tmp_path / "x", port=free_port())
    y = make_backend("local", SPEC, tmp_path / "y", port=free_port())
    try:
        x.check_addresses()
        x.start_controller()
        config = y.write_process_config(tmp_path / "y-cluster.json")
        assert json.loads(config.read_text())["cluster_id"] == "y"
        with Connection(x.address(CONTROLLER), timeout=2) as c:
            st = c.request({"type": "status"})
            assert st["cluster_id"] == "x"
            # a peer's request naming another cluster, or none, is refused
            for msg in ({"type": "heartbeat", "id": "A", "cluster_id": "y"},
                        {"type": "heartbeat", "id": "A"}):
                assert c.request(msg)["error"] == "INCONSISTENT_CLUSTER_ID"
        log = tmp_path / "y-A.log"
        with open(log, "wb") as out:
            broker = subprocess.run(
                [sys.executable, "-m", "broker.server", "--id", "A",
                 "--listen", y.address("A"), "--data-dir", str(tmp_path / "y-A"),
                 "--config", str(config), "--controller", x.address(CONTROLLER)],
                cwd=ROOT, stdout=out, stderr=out, timeout=120)
        assert broker.returncode == 1, log.read_text()
        assert "belongs to another cluster" in log.read_text()
        with Connection(x.address(CONTROLLER), timeout=2) as c:
            assert c.request({"type": "status"})["live"] == []
    finally:
        x.teardown()
        x.release_addresses()
    assert descendants(os.getpid()) == []
