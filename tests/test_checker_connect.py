"""The same checker on Spark Connect: a real Spark Connect server (pyspark's own
`spark-submit` of SparkConnectServer on local[2], listening on loopback) checks
the test batch with `isrlab check --master sc://...` and gets the same verdicts,
anomalies and figures as local[2], with local[2]'s shuffle partitions; and
checker.spark.cancel_jobs ends a running Connect query.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from conftest import ROOT, free_port
from conftest_spark import anomalies_of, checked_on, essence, wait_for

from checker.api import RunResult
from checker.java import ensure_java

pytestmark = [pytest.mark.spark]

SPARK_HOME = Path(pyspark.__file__).parent
SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server on local[2]; its sc:// URL."""
    ensure_java()
    tmp = tmp_path_factory.mktemp("connect")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    port = free_port()
    with open(tmp / "server.log", "ab") as log:
        proc = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--class", SERVER, "--master", "local[2]",
             "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
             "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.ui.enabled=false"],
            env=env, stdout=log, stderr=log, start_new_session=True)
    try:
        def up() -> bool:
            assert proc.poll() is None, (tmp / "server.log").read_text()[-3000:]
            return _listening(port)
        wait_for("Spark Connect server listening", up, timeout=180)
        yield f"sc://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_spark_connect_matches_local(connect_server: str, tmp_path: Path,
                                     checked_batch: dict[str, RunResult]) -> None:
    for remote, local in checked_on(connect_server, tmp_path, checked_batch):
        assert remote["checker"]["master"] == connect_server
        # Two shuffle partitions per core of the server's local[2], as on local[2].
        assert remote["checker"]["shuffle_partitions"] == local.summary["checker"][
            "shuffle_partitions"] == 4
        assert essence(remote, anomalies_of(remote["run_dir"])) == \
            essence(local.summary, anomalies_of(local.run_dir)), local.run_id
        assert remote["figures"] == local.summary["figures"], local.run_id


# In a process of its own: a Connect session makes pyspark.sql.functions build
# Connect columns process-wide while it lives, which the test session's own
# local[2] checks must not meet.
_CANCEL = """
import sys, threading
from pyspark.sql import functions as F
from checker.spark import cancel_jobs, get_session, is_connect, shutdown
spark = get_session(sys.argv[1])
assert is_connect(spark)
ended = []
def run():
    try:
        # max, not sum: a sum of this range overflows a long within seconds and
        # ends the query with ARITHMETIC_OVERFLOW before a cancel reaches it.
        spark.range(0, 1 << 50, 1, 2).agg(F.max("id")).collect()  # days, uncancelled
        ended.append("finished")
    except Exception as e:
        ended.append(type(e).__name__ + ": " + str(e).splitlines()[0])
t = threading.Thread(target=run, daemon=True)
t.start()
# Cancelled until the query has ended: it may not have reached the server yet.
while t.is_alive():
    cancel_jobs(spark)
    t.join(0.2)
shutdown()
print(ended[0])
"""


def test_cancel_jobs_interrupts_a_running_connect_query(connect_server: str) -> None:
    out = subprocess.run([sys.executable, "-c", _CANCEL, connect_server], cwd=ROOT,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OPERATION_CANCELED" in out.stdout or "cancel" in out.stdout.lower(), out.stdout
