"""The checker's Spark session: shuffle partitions follow the local cores (four on
local[2], as before), and a cluster's master keeps Spark's own."""

from __future__ import annotations

import os
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from checker.spark import get_session, local_parallelism, region_flag


@pytest.mark.parametrize(
    ("master", "expected"),
    [
        ("local[2]", 4),
        ("local", 2),
        ("local[3,2]", 6),  # three cores, two task retries
        ("local[*]", 2 * (os.cpu_count() or 1)),
        ("spark://host:7077", None),
        ("yarn", None),
        ("local-cluster[2,1,1024]", None),  # executors in their own JVMs: a cluster
    ],
)
def test_local_parallelism(master: str, expected: int | None) -> None:
    assert local_parallelism(master) == expected


@pytest.mark.parametrize(
    ("heap", "flag"),
    [("4g", " -XX:G1HeapRegionSize=4m"), ("450m", " -XX:G1HeapRegionSize=4m"),
     ("8191m", " -XX:G1HeapRegionSize=4m"), ("8g", ""), ("12g", ""), ("32G", "")],
)
def test_regions_are_kept_at_4_mib_below_an_8_gib_heap(heap: str, flag: str) -> None:
    assert region_flag(heap) == flag


@pytest.mark.spark
def test_default_session_keeps_four_shuffle_partitions() -> None:
    spark = get_session()
    if spark.sparkContext.master != "local[2]":
        pytest.skip(f"session runs on {spark.sparkContext.master}")
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark.sparkContext.defaultParallelism == 4


def _codegen_seen(run) -> tuple[list[tuple[str, str]], list]:
    """Check ``run`` and note the session's code-generation settings while its
    anomaly queries run."""
    from checker.api import check_runs

    spark = get_session()
    seen: list[tuple[str, str]] = []

    def say(msg: str) -> None:
        if msg.startswith("checking"):
            seen.append((spark.conf.get("spark.sql.codegen.wholeStage"),
                         spark.conf.get("spark.sql.codegen.factoryMode")))

    results = check_runs([run], progress=say)
    return seen, results


@pytest.mark.spark
def test_a_cold_jvm_checks_a_small_run_interpreted_then_generates_code(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from conftest_spark import kip101_loss

    import checker.spark as cs

    run = kip101_loss(tmp_path, "r", ["lost-write"], "kip101-hw-truncation-loss").write()
    monkeypatch.delenv("ISRLAB_SPARK_INTERPRETED_CHECKS", raising=False)
    monkeypatch.setattr(cs, "_checks_done", 0)  # as if this JVM had just started
    spark = get_session()
    before = (spark.conf.get("spark.sql.codegen.wholeStage"),
              spark.conf.get("spark.sql.codegen.factoryMode"))
    assert before != ("false", "NO_CODEGEN")
    cold, first = _codegen_seen(run)
    warm, second = _codegen_seen(run)
    assert cold == [("false", "NO_CODEGEN")]
    assert warm == [before]
    # The session's own settings are back after the interpreted check.
    assert (spark.conf.get("spark.sql.codegen.wholeStage"),
            spark.conf.get("spark.sql.codegen.factoryMode")) == before
    # Both ways find the same thing.
    assert [r.verdict for r in first] == [r.verdict for r in second] == ["valid"]
    assert first[0].anomalies == second[0].anomalies
    assert [a["kind"] for a in first[0].anomalies] == ["lost-write"]

    # A large batch generates code even on a cold JVM.
    monkeypatch.setattr(cs, "_checks_done", 0)
    monkeypatch.setattr(cs, "SMALL_BATCH_BYTES", 0)
    big, _ = _codegen_seen(run)
    assert big == [before]


def _check_stages(run) -> tuple[list[int], int]:
    """Check ``run``: the task counts of its stages that read a shuffle, and how many
    of its jobs were broadcast exchanges."""
    from checker.api import check_runs

    store = get_session().sparkContext._jsc.sc().statusStore()

    def jobs() -> dict[int, Any]:
        out, it = {}, store.jobsList(None).iterator()
        while it.hasNext():
            job = it.next()
            out[job.jobId()] = job
        return out

    before = jobs()
    assert [r.verdict for r in check_runs([run])] == ["valid"]
    new = [job for jid, job in jobs().items() if jid not in before]
    tasks = []
    for job in new:
        ids = job.stageIds().iterator()
        while ids.hasNext():
            sid = ids.next()
            try:
                st = store.lastStageAttempt(sid)
            except Py4JJavaError:  # skipped, and dropped: the store keeps 1,000 stages
                continue
            if st.shuffleReadRecords() > 0:
                tasks.append(st.numTasks())
    broadcasts = sum("broadcast exchange" in job.jobTags().mkString("\n") for job in new)
    return tasks, broadcasts


@pytest.mark.spark
def test_a_small_batch_runs_in_one_shuffle_partition_without_broadcasts(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from conftest_spark import kip101_loss

    import checker.spark as cs

    run = kip101_loss(tmp_path, "r", ["lost-write"], "kip101-hw-truncation-loss").write()
    spark = get_session()
    session = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert session > 1
    # One partition per shuffle a stage reads (a union of two reads two).
    small, small_broadcasts = _check_stages(run)
    assert small and max(small) < session and small_broadcasts == 0, (small, small_broadcasts)
    assert int(spark.conf.get("spark.sql.shuffle.partitions")) == session  # restored
    assert spark.conf.get("spark.sql.optimizer.disableHints", "false") == "false"
    # A batch that is not small uses the session's partitions, and broadcasts.
    monkeypatch.setattr(cs, "SMALL_BATCH_BYTES", 0)
    big, big_broadcasts = _check_stages(run)
    assert session in big and sum(big) > 2 * sum(small), (small, big)
    assert big_broadcasts > 0


@pytest.mark.spark
def test_pyspark_looks_up_a_jvm_class_and_its_method_once_per_jvm(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first F.col, each F.col is the one Py4J call that makes the Column:
    the view keeps the class org.apache.spark.sql.functions and its method col
    (checker.jvmview). Static fields are read anew each time."""
    from py4j.clientserver import ClientServerConnection
    from pyspark import SparkContext
    from pyspark.sql import functions as F

    spark = get_session()
    commands: list[str] = []
    send = ClientServerConnection.send_command

    def counting(self, command: str) -> str:
        # Not "m": Py4J's release of a Java object whose Python proxy was collected
        # (an earlier test's), sent whenever the collector runs.
        kind = command.split("\n", 1)[0]
        if kind != "m":
            commands.append(kind)
        return send(self, command)

    F.col("warm")  # whatever this JVM looked up before this test
    monkeypatch.setattr(ClientServerConnection, "send_command", counting)
    for name in ("a", "b", "c"):
        F.col(name)
    assert commands == ["c", "c", "c"]  # three calls, no reflection ("r") round trip
    # A static field is a value, looked up each time (it could change).
    jvm = SparkContext._jvm
    commands.clear()
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    assert commands.count("r") >= 2
    # The lookups are a convenience: queries built with them still compute.
    row = spark.range(3).select(F.sum(F.col("id")).alias("s")).collect()[0]
    assert row.s == 3


@pytest.mark.spark
def test_local_rows_are_the_rows_createdataframe_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """local_rows (a JSON literal folded into the plan) gives the rows and schema
    spark.createDataFrame gives, for tuples under a DDL schema and dicts under a
    StructType -- and so does its createDataFrame path for many rows."""
    import checker.spark as cs
    from checker import schemas

    spark = get_session()
    ddl = "run string, partition int, hw long, listed array<bigint>, odd boolean"
    tuples = [("file:/a%20b/r", 0, 2**40, [1, 2], True), ("r2", None, None, [], None),
              ("ü \"q\"", -1, 0, None, False)]
    state = {"run": "r", "broker": "A", "topic": "t", "partition": 0, "role": "leader",
             "leader": "A", "leader_epoch": 3, "leo": 5, "hw": 4}
    dicts = [{f: state.get(f) for f in schemas.STATES.fieldNames()}]
    for rows, schema in ((tuples, ddl), (dicts, schemas.STATES), ([], ddl)):
        want = spark.createDataFrame(rows, schema)
        for limit in (cs.LOCAL_ROWS_MAX, 1):  # the literal, then createDataFrame's path
            monkeypatch.setattr(cs, "LOCAL_ROWS_MAX", limit)
            got = cs.local_rows(spark, rows, schema)
            assert got.schema == want.schema
            assert got.collect() == want.collect()
    plan = cs.local_rows(spark, tuples, ddl)._jdf.queryExecution().optimizedPlan().toString()
    assert "from_json" not in plan  # folded into a literal when the plan is optimized


@pytest.mark.spark
def test_a_check_starts_no_python_worker(tmp_path) -> None:
    """A check builds its small tables in the JVM (checker.spark.local_rows), so its
    driver JVM never starts PySpark's Python worker daemon -- on a cold JVM that
    start came out of the first check. Real processes: a fresh driver JVM checks a
    run; then spark.createDataFrame, which does start the daemon, shows that the
    count sees it."""
    import subprocess
    import sys
    import textwrap

    from conftest_spark import kip101_loss

    run = kip101_loss(tmp_path, "r", ["lost-write"], "kip101-hw-truncation-loss").write()
    script = textwrap.dedent(f"""
        import os
        from checker.api import check_runs
        from checker.spark import get_session

        def daemons():
            n = 0
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{{pid}}/cmdline", "rb") as f:
                        cmd = f.read()
                    with open(f"/proc/{{pid}}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                    with open(f"/proc/{{ppid}}/stat") as f:
                        grand = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError):
                    continue
                n += b"pyspark.daemon" in cmd and grand == os.getpid()
            return n

        [result] = check_runs([{str(run)!r}])
        print(result.verdict, daemons())
        get_session().createDataFrame([(1,)], "a int").collect()
        print(daemons())
    """)
    env = {k: v for k, v in os.environ.items() if k != "ISRLAB_CHECKER_SERVER"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-2000:]
    checked, after = out.stdout.split("\n")[:2]
    assert checked == "valid 0"
    assert int(after) >= 1
