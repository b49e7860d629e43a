"""The one SparkSession the checker (and its tests) share.

Fast, quiet start: ``local[2]`` by default, no UI, two shuffle partitions per
local core (Spark's own on a cluster), no console progress bar, and a log4j
configuration at WARN-for-Spark/ERROR-for-noise handed to the driver JVM so its
start-up chatter does not reach the user.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark import SparkConf, SparkContext, StorageLevel
from pyspark.java_gateway import launch_gateway
from pyspark.sql import DataFrame, SparkSession

from checker.java import ensure_java

DEFAULT_MASTER = "local[2]"

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""

_lock = threading.Lock()
_session: SparkSession | None = None
_session_master: str | None = None


def _log4j_file() -> str:
    path = os.path.join(tempfile.gettempdir(), "isrlab-checker-log4j2.properties")
    if not os.path.exists(path):
        with open(path, "w") as fh:
            fh.write(_LOG4J)
    return path


def driver_memory() -> str:
    """The driver heap: ISRLAB_SPARK_DRIVER_MEMORY, else half the machine's memory
    (2-32 GiB). In local mode the driver is the whole cluster, and a 10M-operation
    run keeps ~5 GiB of parsed rows in memory; a heap that is not used is not
    taken from the machine."""
    env = os.environ.get("ISRLAB_SPARK_DRIVER_MEMORY")
    if env:
        return env
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "6g"
    return f"{min(32, max(2, total // 2 // (1 << 30)))}g"


def driver_log_path() -> str:
    """Where the Spark driver JVM's stdout/stderr go (one file per user, appended)."""
    return os.path.join(tempfile.gettempdir(), f"isrlab-spark-driver-{os.getuid()}.log")


def local_parallelism(master: str) -> int | None:
    """Shuffle partitions and default parallelism for a ``local[n]`` master: two per
    core (4 on local[2], as measured there). None for a cluster's master: Spark's
    own, whose adaptive execution coalesces small shuffle partitions."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if m is None:
        return None
    cores = m.group(1) or "1"
    return 2 * ((os.cpu_count() or 1) if cores == "*" else int(cores))


def get_session(master: str | None = None, progress_bar: bool = False) -> SparkSession:
    """Return the cached SparkSession, starting it on first use.

    ``master`` defaults to ``local[2]`` (``ISRLAB_SPARK_MASTER`` overrides). Asking
    for a different master than the running session's stops and replaces it.
    """
    global _session, _session_master
    master = master or os.environ.get("ISRLAB_SPARK_MASTER") or DEFAULT_MASTER
    with _lock:
        if _session is not None and _session_master == master:
            return _session
        if _session is not None:
            _session.stop()
            _session = None
        ensure_java()
        # HotSpot does not compile methods over 8000 bytes of bytecode, and Spark's
        # generated code for the wide parse-and-validate stages has some: let it
        # (~3% at 10M operations).
        jvm = f"-Dlog4j2.configurationFile=file:{_log4j_file()} -XX:-DontCompileHugeMethods"
        with warnings.catch_warnings():
            # pyspark warns at import time about pandas versions it has not
            # been validated with; the checker does not use pandas through Spark.
            warnings.simplefilter("ignore", FutureWarning)
            conf = SparkConf().setMaster(master).setAppName("isrlab-checker").setAll([
                ("spark.ui.enabled", "false"),
                ("spark.ui.showConsoleProgress", str(progress_bar).lower()),
                ("spark.driver.extraJavaOptions", jvm),
                ("spark.sql.session.timeZone", "UTC"),
                # Local mode runs everything in the driver JVM; Spark's 1g default
                # runs out of heap on 5M+ operation histories.
                ("spark.driver.memory", driver_memory()),
                # Run directories are many small files; do not split-pack them
                # into huge partitions.
                ("spark.sql.files.openCostInBytes", str(1 << 20)),
                # One check generates ~370 classes; Spark's cache of 100 made every
                # later check in a session (tests, the benchmark, a long-lived
                # caller) compile nearly all of them again (a 20k-operation check:
                # 15.6-17.7 s instead of 20.5-22.7 s).
                ("spark.sql.codegen.cache.maxEntries", "1000"),
                # Kept inputs (checker.spark.keep) are written and read row by row:
                # Kryo without reference tracking (rows share no objects) writes a
                # 10M-line history ~10% faster and reads it back ~30% faster than
                # Java serialization.
                ("spark.serializer", "org.apache.spark.serializer.KryoSerializer"),
                ("spark.kryo.referenceTracking", "false"),
            ])
            parallelism = local_parallelism(master)
            if parallelism is not None:
                conf.set("spark.sql.shuffle.partitions", str(parallelism))
                conf.set("spark.default.parallelism", str(parallelism))
            if master.startswith("local"):
                # Adaptive execution splits every query into one job per stage and
                # re-plans between them; on one machine with small partitions that
                # overhead outweighs its skew handling (measured ~1.5x on test runs).
                conf.set("spark.sql.adaptive.enabled", "false")
            if SparkContext._active_spark_context is None:
                # The JVM's own start-up lines (JDK warnings, log4j defaults) go to a
                # log file, not the user's terminal; errors still reach us via py4j.
                with open(driver_log_path(), "ab") as log:
                    gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
                SparkContext._ensure_initialized(gateway=gateway, conf=conf)
            session = SparkSession.builder.config(conf=conf).getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        _session, _session_master = session, master
        return session


def keep(df: DataFrame, eager: bool = True) -> DataFrame:
    """Compute df once and keep its rows for the queries that follow (a local
    checkpoint). Serialized in memory, spilling to disk: ~25% cheaper to write
    than Spark's default object storage on 10M-line inputs, and far less for
    the garbage collector to walk. ``eager=False`` leaves the computing to the
    first query that reads it, saving a pass."""
    return df.localCheckpoint(eager=eager, storageLevel=StorageLevel.MEMORY_AND_DISK)


@contextmanager
def shuffle_partitions(spark: SparkSession, n: int | None) -> Iterator[None]:
    """Run the queries of the block with ``n`` shuffle partitions (None: as is):
    queries over a few thousand rows pay for every task and stage they run."""
    if n is None:
        yield
        return
    key = "spark.sql.shuffle.partitions"
    old = spark.conf.get(key)
    spark.conf.set(key, str(n))
    try:
        yield
    finally:
        spark.conf.set(key, old)


def release(spark: SparkSession) -> None:
    """Drop everything a check cached or checkpointed (the session stays up)."""
    spark.catalog.clearCache()
    for rdd in list(spark.sparkContext._jsc.getPersistentRDDs().values()):
        rdd.unpersist()
