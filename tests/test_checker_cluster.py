"""A user who outgrows one machine checks on a Spark cluster: a real standalone
cluster (a master and two one-core workers on loopback, started with pyspark's own
`spark-class`) checks the test batch with `isrlab check --master spark://...`, its
driver capped at the smallest heap Spark starts with, and gets the same verdicts,
anomalies, witnesses and counts as local[2], with shuffle partitions that follow
the cluster's cores (2 per core), not a constant.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from conftest import ROOT, descendants, free_port
from conftest_spark import BIG, wait_for

from checker.api import RunResult
from checker.client import check
from checker.errors import SparkMasterError
from checker.java import ensure_java
from checker.spark import check_master
from harness.chaos.swarm import SwarmSpec, simulate

pytestmark = [pytest.mark.spark]

SPARK_HOME = Path(pyspark.__file__).parent
WORKERS = 2
# The driver's heap cap (ISRLAB_SPARK_DRIVER_MEMORY): the least Spark starts with
# (450 MiB: under it the driver refuses, INVALID_DRIVER_MEMORY.SYSTEM_MEMORY).
# On a cluster the executors hold the data; the driver only plans and collects.
DRIVER_MEMORY = "450m"



def _alive_workers(webui: int) -> int | None:
    """How many workers the master counts alive; None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """The cluster's master URL and its web UI's port."""
    ensure_java()
    tmp = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp), "SPARK_NO_DAEMONIZE": "1"}
    port, webui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs = []
    with open(tmp / "cluster.log", "ab") as log:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(webui)],
            env=env, stdout=log, stderr=log, start_new_session=True))
        try:
            wait_for("standalone cluster: the master's web UI answering",
                     lambda: _alive_workers(webui) is not None)
            for i in range(WORKERS):
                procs.append(subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", url,
                     "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                     "--webui-port", str(free_port()), "--work-dir", str(tmp / f"work{i}")],
                    env=env, stdout=log, stderr=log, start_new_session=True))
            wait_for(f"standalone cluster: {WORKERS} workers registered",
                     lambda: _alive_workers(webui) == WORKERS)
            yield url, webui
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@pytest.fixture(scope="module")
def standalone(standalone_cluster: tuple[str, int]) -> str:
    return standalone_cluster[0]


def test_the_master_probe_tells_the_master_from_other_ports(
        standalone_cluster: tuple[str, int]) -> None:
    """What every command that checks asks first (checker.masterprobe): the real
    master is accepted at once; a real worker's RPC port (Spark's RPC, but no master
    there) and the master's own web UI (HTTP) are refused, each saying what answered."""
    url, webui = standalone_cluster
    with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=5) as r:
        worker = json.load(r)["workers"][0]
    worker_url = f"spark://{worker['host']}:{worker['port']}"
    assert check_master(url) == url
    with pytest.raises(SparkMasterError) as e:
        check_master(worker_url)
    assert str(e.value) == (f"{worker_url} is not a Spark standalone master: a Spark RPC "
                            "endpoint without a Master (a worker's or an application's port?)")
    web = f"spark://127.0.0.1:{webui}"
    with pytest.raises(SparkMasterError) as e:
        check_master(web)
    assert str(e.value).startswith(f"{web} is not a Spark standalone master: it answered "
                                   "'HTTP/1.1 400"), e.value


# Where a run is and when and on what it was checked: all the two checks may differ in.
_WHERE = ("run_dir", "checked_at", "checker")


def _checked(run_dir: Path, root: Path) -> tuple[str, list[str]]:
    """A run's check/summary.json (verdict, counts, figures, notes, ...) and its
    anomalies with their witnesses, as text, with the batch's root path as ROOT."""
    check = run_dir / "check"
    summary = json.loads((check / "summary.json").read_text())
    rest = json.dumps({k: v for k, v in summary.items() if k not in _WHERE}, sort_keys=True)
    anomalies = json.loads((check / "anomalies.json").read_text())
    return (rest.replace(str(root), "ROOT"),
            sorted(json.dumps(a, sort_keys=True).replace(str(root), "ROOT") for a in anomalies))


def _driver_jvm(pid: int) -> tuple[int, list[str]] | None:
    """The Spark driver JVM under process ``pid`` and its command line; None while
    there is none. PySpark's launch script (its arguments name SparkSubmit too)
    runs a short-lived JVM of Spark's launcher to build the command line, then
    execs java with SparkSubmit as its main class."""
    for child in descendants(pid, spark_too=True):
        try:
            exe = os.readlink(f"/proc/{child}/exe")
            args = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if Path(exe).name == "java" and "org.apache.spark.deploy.SparkSubmit" in args and \
                "org.apache.spark.launcher.Main" not in args:
            return child, args
    return None


def _peak_rss_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:  # it exited between two looks
        return 0
    return max((int(x.split()[1]) for x in status if x.startswith("VmHWM:")), default=0)


def test_standalone_cluster_matches_local(standalone: str, tmp_path: Path,
                                          checked_batch: dict[str, RunResult]) -> None:
    # The same runs, copied without local[2]'s check output, and without the 100k-op
    # run: on two one-core executors with cold JVMs it is minutes of CI for nothing
    # the other runs (every anomaly kind, a bad run, an unfinished one) do not show.
    roots = {Path(os.path.commonpath([str(r.run_dir) for r in checked_batch.values()]))}
    (root,) = roots
    tree = tmp_path / "batch"
    shutil.copytree(root, tree, ignore=shutil.ignore_patterns("check", "index.html", BIG))
    checked_batch = {k: r for k, r in checked_batch.items() if r.run_dir.name != BIG}
    assert len(checked_batch) >= 10
    env = {**os.environ, "ISRLAB_SPARK_DRIVER_MEMORY": DRIVER_MEMORY}
    stdout, stderr = tmp_path / "check.json", tmp_path / "check.err"
    with stdout.open("w") as out_fh, stderr.open("w") as err_fh:
        check = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "check", "--master", standalone,
             "--no-report", "--json", str(tree)],
            cwd=ROOT, env=env, stdout=out_fh, stderr=err_fh)
        # Watch the command's driver JVM while it runs: its heap cap, its peak RSS.
        driver, peak, deadline = None, 0, time.monotonic() + 900
        while check.poll() is None and time.monotonic() < deadline:
            driver = driver or _driver_jvm(check.pid)  # found once it is the JVM
            if driver is not None:
                peak = max(peak, _peak_rss_kib(driver[0]))
            time.sleep(0.2)
        if check.poll() is None:
            check.kill()
        returncode = check.wait()
    err = stderr.read_text()
    assert returncode in (1, 2), err  # the batch holds invalid and bad runs
    assert driver is not None, "no Spark driver JVM seen under `isrlab check`"
    # The cap reached the driver JVM: pyspark's launcher turns spark.driver.memory
    # into its -Xmx (and only the last -Xmx counts).
    assert [a for a in driver[1] if a.startswith("-Xmx")][-1] == f"-Xmx{DRIVER_MEMORY}"
    # G1's regions kept at 4 MiB, so a memory store's 1 MiB chunk is not humongous
    assert "-XX:G1HeapRegionSize=4m" in driver[1]
    print(f"driver JVM peak RSS {peak / 1024:.0f} MiB with -Xmx{DRIVER_MEMORY}")
    runs = {r["run_id"]: r for r in json.loads(stdout.read_text())["runs"]}
    assert set(runs) == set(checked_batch)
    for run_id, local in checked_batch.items():
        remote = runs[run_id]
        assert remote["verdict"] == local.verdict, run_id
        # Everything else the check wrote: verdict, counts, figures, notes, errors,
        # every anomaly and its witness.
        assert _checked(Path(remote["run_dir"]), tree) == _checked(local.run_dir, root), run_id
        if local.error is not None:
            continue
        assert remote["checker"]["master"] == standalone
        # Two shuffle partitions per core of the cluster's executors (2 x 1 core).
        assert remote["checker"]["shuffle_partitions"] == 2 * WORKERS


def test_swarm_runs_unchanged_on_the_cluster(standalone: str, tmp_path: Path) -> None:
    """`isrlab swarm --master spark://...`: the simulations run as the cluster's Python
    tasks and give the same runs, byte for byte, as simulating the seeds here, and
    the same findings as checking those on local[2]."""
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "swarm", "--protocol", "0.10", "--runs", "3",
         "--seed", "5", "--time-limit", "20s", "--master", standalone, "--json",
         "--runs-dir", str(tmp_path / "cluster")],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode in (0, 1) and out.stdout, out.stderr[-3000:]
    rows = {r["seed"]: r for r in json.loads(out.stdout)["runs"]}
    assert sorted(rows) == [5, 6, 7]
    spec = SwarmSpec.of("0.10", time_limit=20.0)
    here = {seed: simulate(seed, spec, str(tmp_path / "local"), "local") for seed in rows}
    # The test session's checker, on its default master local[2].
    checked = {r.run_dir.resolve(): r for r in check([Path(h["run_dir"]) for h in here.values()])}
    for seed, remote in rows.items():
        local = here[seed]
        assert remote["config"] == local["config"]
        for name in ("history.jsonl", "events.jsonl"):
            assert (Path(remote["run_dir"]) / name).read_bytes() == \
                (Path(local["run_dir"]) / name).read_bytes(), (seed, name)
        kinds = sorted({a["kind"] for a in checked[Path(local["run_dir"]).resolve()].anomalies})
        assert sorted(remote["found"]) == kinds, seed
