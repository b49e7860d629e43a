"""The one SparkSession the checker (and its tests) share.

Fast, quiet start: ``local[2]`` by default, no UI, two shuffle partitions per
local core (Spark's own on a cluster), no console progress bar, and a log4j
configuration at WARN-for-Spark/ERROR-for-noise handed to the driver JVM so its
start-up chatter does not reach the user.

The master is checked before any JVM starts (check_master): a malformed URL is
refused, a standalone master (``spark://HOST:PORT``) must answer Spark's RPC as
a master within seconds (checker.masterprobe), and a Spark Connect address
(``sc://HOST[:PORT]``) must accept a TCP connection within PROBE_TIMEOUT_S --
otherwise Spark's standalone client retries for over a minute and fails with a
Py4J traceback that never names the URL. A session that still fails to start
is one line naming the master, and leaves no JVM behind.

A Spark Connect master gives a Connect session (no JVM here, no SparkContext):
the few things the checker does with the classic API -- the log level, the
cluster's cores, dropping checkpoints, cancelling jobs -- have a Connect way
each (is_connect), and the queries are the same code on both.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import json
import os
import re
import signal
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from py4j.java_gateway import JavaGateway
from pyspark import SparkConf, SparkContext, StorageLevel
from pyspark.java_gateway import launch_gateway
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructType

from checker import jit, masterprobe
from checker.errors import SparkMasterError
from checker.java import Runtime, ensure_java, find_runtime, user_cache
from checker.jvmview import caching

DEFAULT_MASTER = "local[2]"
PROBE_TIMEOUT_S = 3.0
CONNECT_DEFAULT_PORT = 15002  # Spark Connect's

_LOCAL = re.compile(r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[\d+,\d+,\d+\]")
# host: a name, an IPv4 address or an IPv6 one in brackets; the port is required.
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})")
_CONNECT = re.compile(r"sc://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:(?P<port>\d{1,5}))?"
                      r"(/.*)?")
_USAGE = "give local[N], spark://HOST:PORT, sc://HOST[:PORT], yarn or k8s://URL"

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

# The checker's SQL settings that a session may set for itself (a Connect
# session too; the rest of get_session's are the driver JVM's own).
SESSION_SQL = {
    "spark.sql.session.timeZone": "UTC",
    # Run directories are many small files; do not split-pack them into huge
    # partitions.
    "spark.sql.files.openCostInBytes": str(1 << 20),
    # A batch names every file it reads (thousands for a swarm); past 32 paths
    # Spark lists them with a job of one task per path (~5 s for 240 runs' 1,200
    # files) where the driver takes milliseconds.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": str(1 << 20),
}


# G1's regions at least 4 MiB. Spark's memory store holds a kept input's serialized
# blocks in chunks of spark.storage.unrollMemoryThreshold (1 MiB); G1 gives an object
# of half a region or more whole regions of its own, so under an 8 GiB heap (2 MiB
# regions and smaller) every chunk wasted a region's other half. A 100M-operation
# batch filled a 4 GiB heap with that waste and collected without end; at 10M
# operations the check took 122.6 s instead of 138.6 s (bench/README.md).
MIN_REGION = 4 << 20
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def region_flag(heap: str) -> str:
    """The JVM option that keeps G1's regions at MIN_REGION or more for a heap of
    ``heap`` (Spark's notation: 4g, 450m); none where G1 picks as much itself (it
    divides the heap into ~2,048 regions)."""
    m = re.fullmatch(r"(\d+)([kmgt]?)b?", heap.strip().lower())
    if m is None or int(m[1]) * _UNITS[m[2]] >= 2048 * MIN_REGION:
        return ""
    return f" -XX:G1HeapRegionSize={MIN_REGION >> 20}m"


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


# JDK 25's AOT cache (JEP 483: classes loaded and linked; JEP 515: method
# profiles, so the JIT compiles a check's hot methods sooner; JEP 514: written by
# one training run with -XX:AOTCacheOutput) in place of an older JDK's dynamic
# class-data archive (-XX:ArchiveClassesAtExit, JDK 13+).
AOT_CACHE_JDK = 25


def cds_archive(runtime: Runtime | None = None) -> Path:
    """The driver JVM's class-data archive for ``runtime`` (by default the one
    checker.java picks): an AOT cache on JDK 25+, else a class-data-sharing
    archive of the ~15,000 classes Spark loads for a check, pre-parsed (JVM start
    4.2 -> 2.5 s, a cold check's first query ~3 s less; bench/README.md). One per
    Spark installation and Java runtime; ~200 MB. Built once (`isrlab checker
    setup`, or in the background as a server exits: checker.archive) by a JVM of
    its own, used by every JVM after."""
    import pyspark

    rt = runtime or find_runtime()
    key = f"{pyspark.__file__} {pyspark.__version__} {rt.home} {rt.version}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    kind = "aot" if rt.feature >= AOT_CACHE_JDK else "jsa"
    return user_cache() / f"spark-classes-{digest}.{kind}"


# Names the archive file a JVM started now writes as it exits (checker.archive).
CDS_DUMP_ENV = "ISRLAB_CDS_DUMP"


def cds_flags(runtime: Runtime) -> list[str]:
    """JVM flags to use ``runtime``'s archive if there is one, or to write it when
    this JVM exits (ISRLAB_CDS_DUMP names the file: only checker.archive sets it).
    A JVM that cannot use an archive (another JDK build, a JDK without a base
    archive) ignores it."""
    aot = runtime.feature >= AOT_CACHE_JDK
    tags = ("aot", "cds", "cds+dynamic") if aot else ("cds", "cds+dynamic")
    dump = os.environ.get(CDS_DUMP_ENV)
    if dump:
        # Errors only (to the driver log): the classes an archive cannot hold (a
        # signed jar's, generated ones) are thousands of warnings.
        # An AOT training JVM writes the cache as it exits, in a JVM it starts.
        return [f"-XX:AOTCacheOutput={dump}" if aot else f"-XX:ArchiveClassesAtExit={dump}",
                "-Xlog:" + ",".join(f"{t}=error" for t in tags)]
    archive = cds_archive(runtime)
    if archive.is_file():
        return [f"-XX:AOTCache={archive}" if aot else f"-XX:SharedArchiveFile={archive}",
                "-Xlog:" + ",".join(f"{t}=off" for t in tags)]
    return []


def driver_log_path() -> str:
    """Where the Spark driver JVM's stdout/stderr go (one file per user, appended)."""
    return os.path.join(tempfile.gettempdir(), f"isrlab-spark-driver-{os.getuid()}.log")


def local_parallelism(master: str) -> int | None:
    """Shuffle partitions and default parallelism for a ``local[n]`` master: two per
    core (4 on local[2], as measured there). None for a cluster's master: there
    they follow its executors' cores (_cluster_parallelism)."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if m is None:
        return None
    cores = m.group(1) or "1"
    return 2 * ((os.cpu_count() or 1) if cores == "*" else int(cores))


EXECUTOR_WAIT_S = 30.0


def _cluster_parallelism(session: SparkSession) -> int:
    """Shuffle partitions on a cluster: two per core its executors have, once the
    first executors registered (up to EXECUTOR_WAIT_S), as local_parallelism is
    for local[n]; Spark's constant 200 would be thousands of empty tasks for a
    small batch."""
    sc = session.sparkContext
    deadline = time.monotonic() + EXECUTOR_WAIT_S
    # The driver's own block manager is one entry; executors are the rest.
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    return 2 * max(1, sc.defaultParallelism)


def master_url(master: str | None = None) -> str:
    """The master to use: ``master``, else ``ISRLAB_SPARK_MASTER``, else local[2]."""
    return master or os.environ.get("ISRLAB_SPARK_MASTER") or DEFAULT_MASTER


def _addresses(master: str) -> list[tuple[str, int]] | None:
    """The (host, port) pairs a cluster master URL names (None: nothing to probe,
    a local master or one Spark resolves itself); SparkMasterError if malformed."""
    if _LOCAL.fullmatch(master) or master == "yarn":
        return None
    if master.startswith("k8s://") and len(master) > len("k8s://"):
        return None
    if master.startswith("spark://"):
        # A standalone cluster with standby masters lists them all: spark://h1:p1,h2:p2.
        parts = [_HOST_PORT.fullmatch(x) for x in master[len("spark://"):].split(",")]
        if all(parts):
            pairs = [(m["host"].strip("[]"), int(m["port"])) for m in parts if m]
            if all(1 <= port <= 65535 for _, port in pairs):
                return pairs
        raise SparkMasterError(f"malformed Spark master {master!r}: a standalone master is "
                               "spark://HOST:PORT (port 1..65535)")
    if master.startswith("sc://"):
        m = _CONNECT.fullmatch(master)
        port = int(m["port"]) if m and m["port"] else CONNECT_DEFAULT_PORT
        if m and 1 <= port <= 65535:
            return [(m["host"].strip("[]"), port)]
        raise SparkMasterError(f"malformed Spark master {master!r}: Spark Connect is "
                               f"sc://HOST[:PORT] (port 1..65535, default {CONNECT_DEFAULT_PORT})")
    raise SparkMasterError(f"malformed Spark master {master!r}: {_USAGE}")


def _not_a_master(master: str, host: str, port: int) -> tuple[bool, str] | None:
    """None if host:port answers as ``master``'s kind wants (a standalone master:
    checker.masterprobe; Spark Connect: a TCP connection), else (whether it is
    reachable at all, why not)."""
    try:
        if master.startswith("sc://"):
            masterprobe.connect(host, port, PROBE_TIMEOUT_S).close()
        else:
            masterprobe.probe(host, port, PROBE_TIMEOUT_S)
    except masterprobe.Unreachable as e:
        return False, str(e)
    except masterprobe.NotAMaster as e:
        return True, str(e)
    return None


def check_master(master: str | None = None) -> str:
    """Validate the master URL (master_url) and, for a cluster's, check that it
    answers: a standalone one (spark://, any of its standby list) as a Spark
    master, within PROBE_TIMEOUT_S to connect and as long to answer; a Spark
    Connect one (sc://) by TCP (that it speaks Spark Connect: get_session's first
    call). Return it; SparkMasterError (exit 2), naming the master, if not."""
    master = master_url(master)
    pairs = _addresses(master)
    if pairs is None:
        return master
    why = [_not_a_master(master, h, p) for h, p in pairs]
    if all(why):
        found = [w for w in why if w is not None]
        if len(found) == 1:
            reached, reason = found[0]
        else:
            reached = any(r for r, _ in found)
            reason = "; ".join(f"{h}:{p} {w}" for (h, p), (_, w) in zip(pairs, found, strict=True))
        raise SparkMasterError(f"{master} is not a Spark standalone master: {reason}"
                               if reached else f"cannot reach Spark master {master}: {reason}")
    return master


_JAVA_EXCEPTION = re.compile(r'(?:Exception in thread "[^"]*" )?((?:[\w$]+\.)+[\w$]*'
                             r'(?:Exception|Error): .*)')


def _reason(e: BaseException, driver_log: str = "") -> str:
    """One line of why the session failed: the Java exception a Py4J error carries
    (its ": org.apache...: message" line), else the last one the driver JVM wrote
    to its log before it exited (``driver_log``: what this start appended), else
    the first line of the message."""
    try:
        message = str(e)
    except Exception:  # noqa: BLE001 - a Py4J error whose JVM is gone
        message = ""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    java = next((ln[2:] for ln in lines if ln.startswith(": ")), None)
    causes = [ln.removeprefix("Caused by: ") for ln in lines if ln.startswith("Caused by: ")]
    if java is not None and causes:  # the root cause says more than a wrapper's message
        java += f" (caused by {causes[-1]})"
    if java is None:
        found = [m.group(1) for m in map(_JAVA_EXCEPTION.fullmatch, driver_log.splitlines())
                 if m]
        java = found[-1] if found else None
    text = java or (lines[0] if lines else type(e).__name__)
    return " ".join(text.split())[:300]


def _log_size() -> int:
    try:
        return os.path.getsize(driver_log_path())
    except OSError:
        return 0


def _log_since(offset: int) -> str:
    """What the driver JVM wrote to its log from ``offset`` on (the last 64 KiB)."""
    try:
        with open(driver_log_path(), "rb") as fh:
            fh.seek(max(offset, _log_size() - (1 << 16)))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _discard_gateway() -> None:
    """Stop the driver JVM this process launched for a session that failed to start."""
    gateway = SparkContext._gateway
    SparkContext._gateway = None
    SparkContext._jvm = None
    if gateway is None:
        return
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - the JVM is killed below anyway
        pass
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def _launch(conf: SparkConf) -> JavaGateway:
    """PySpark's launch_gateway, its JVM's start-up lines (JDK warnings, log4j
    defaults) going to driver_log_path(), not the user's terminal (errors still
    reach us via Py4J); and without its leak. Interrupted while the JVM starts (a
    server's SIGTERM, Ctrl-C), launch_gateway deletes the directory the JVM is
    about to write its address to; the JVM's main thread then fails, and Py4J's
    server thread keeps it running for good. So whatever this launch started is
    killed when it does not return."""
    try:
        with open(driver_log_path(), "ab") as log:
            return launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    except BaseException:
        _kill_launched_drivers()
        raise


def _kill_launched_drivers() -> None:
    """SIGKILL this process's children that are a PySpark driver's launch: the
    spark-submit script or the JVM it became (both end with pyspark-shell)."""
    me = str(os.getpid())
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:  # no /proc: nothing to look at
        return
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                launch = f.read().endswith(b"\0pyspark-shell\0")
            if ppid == me and launch:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, IndexError):
            continue


def get_session(master: str | None = None, progress_bar: bool = False,
                niced_jit: bool = True) -> SparkSession:
    """Return the cached SparkSession, starting it on first use.

    ``niced_jit``: the JIT compilers of a JVM this call starts run at the lowest
    CPU priority during small checks (checker.jit); a caller whose checks are all
    large batches (the swarm) turns it off.

    ``master`` defaults to ``local[2]`` (``ISRLAB_SPARK_MASTER`` overrides). Asking
    for a different master than the running session's stops and replaces it.
    SparkMasterError (one line naming the master) if the master is malformed,
    does not answer (check_master) or the session fails to start on it.
    """
    global _session, _session_master
    master = master_url(master)
    with _lock:
        if _session is not None and _session_master == master:
            return _session
        check_master(master)
        if _session is not None:
            _stop_session()
        if master.startswith("sc://"):
            _session, _session_master = _connect_session(master), master
            return _session
        runtime = ensure_java()
        # HotSpot does not compile methods over 8000 bytes of bytecode, and Spark's
        # generated code for the wide parse-and-validate stages has some: let it
        # (~3% at 10M operations).
        jvm = f"-Dlog4j2.configurationFile=file:{_log4j_file()} -XX:-DontCompileHugeMethods"
        jvm += region_flag(driver_memory())
        # The JIT compilers niced while a check is small, not for a large one
        # (checker.jit; one_check sets them).
        global _nice_small_checks
        _nice_small_checks = niced_jit and jit.can_unnice()
        jvm += jit.NICED_FLAGS if niced_jit and not _nice_small_checks else jit.FLAGS
        jvm += "".join(f" {flag}" for flag in cds_flags(runtime))
        with warnings.catch_warnings():
            # pyspark warns at import time about pandas versions it has not
            # been validated with (pyproject.toml pins the pandas it supports).
            warnings.simplefilter("ignore", FutureWarning)
            conf = SparkConf().setMaster(master).setAppName("isrlab-checker").setAll([
                ("spark.ui.enabled", "false"),
                ("spark.ui.showConsoleProgress", str(progress_bar).lower()),
                ("spark.driver.extraJavaOptions", jvm),
                *SESSION_SQL.items(),
                # Local mode runs everything in the driver JVM; Spark's 1g default
                # runs out of heap on 5M+ operation histories.
                ("spark.driver.memory", driver_memory()),
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
                # PySpark 4 records the Python call site of every DataFrame and
                # Column call in the JVM (for error messages): ten Py4J round trips
                # per F.col instead of three, ~16,000 calls per small check
                # instead of ~6,700.
                ("spark.python.sql.dataFrameDebugging.enabled", "false"),
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
            # One driver JVM per process: a stopped session's is used again (pyspark
            # would ignore a second gateway, and leave its JVM running).
            launched = SparkContext._gateway is None
            log_start = _log_size()
            try:
                if launched:
                    # PySpark's first Py4J call imports pyspark.testing.utils (its
                    # NumPy converter asks it whether NumPy is there), which imports
                    # pandas: ~0.5-0.9 s, taken here while the JVM starts instead
                    # (a session ~3.5 -> ~3.2 s, bench/README.md).
                    threading.Thread(target=importlib.import_module,
                                     args=("pyspark.testing.utils",), daemon=True).start()
                    SparkContext._ensure_initialized(gateway=_launch(conf), conf=conf)
                if SparkContext._jvm is not None:  # PySpark reads it at every call
                    SparkContext._jvm = caching(SparkContext._jvm)
                session = SparkSession.builder.config(conf=conf).getOrCreate()
            except Exception as e:  # noqa: BLE001 - one line naming the master instead
                # The reason first: a Py4J error asks the JVM for its message.
                why = _reason(e, _log_since(log_start) if launched else "")
                if launched:
                    _discard_gateway()
                raise SparkMasterError(f"cannot start Spark on master {master}: {why}") from None
        session.sparkContext.setLogLevel("ERROR")
        if parallelism is None:
            session.conf.set("spark.sql.shuffle.partitions", str(_cluster_parallelism(session)))
        _session, _session_master = session, master
        return session


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (a client of an sc:// master)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def master_of(spark: SparkSession) -> str:
    """The master ``spark`` checks on, as the user gave it: the sc:// URL of a
    Connect session, the SparkContext's master of a classic one."""
    if is_connect(spark):
        return _session_master or ""
    return spark.sparkContext.master


CONNECT_ANSWER_S = 10.0
# PySpark sets this for its Connect session (pyspark.sql.functions then builds
# Connect columns), and leaves it set when the session stops.
_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


def _few_retries(session: SparkSession) -> list:
    """Let the Connect client retry a failed call twice, within ~2 s, instead of
    its default ten minutes; return the policies it had."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    policies = session.client.get_retry_policies()
    session.client.set_retry_policies([DefaultPolicy(max_retries=2, max_backoff=1000)])
    return policies


def _connect_first(session: SparkSession, master: str) -> str:
    """The Connect server's own master, asked within CONNECT_ANSWER_S, retried at most
    twice (Spark's client retries a port that is no Connect server for ten
    minutes); SparkMasterError naming ``master`` if it does not answer, the
    session's channel closed (releasing it on the server would be retried as
    long)."""
    client = session.client
    policies = _few_retries(session)
    got: list[str | BaseException] = []

    def ask() -> None:
        try:
            with warnings.catch_warnings():  # "[RETRIES_EXCEEDED] ...": said below
                warnings.simplefilter("ignore", UserWarning)
                got.append(session.conf.get("spark.master", "") or "")
        except BaseException as e:  # noqa: BLE001 - reported below as one line
            got.append(e)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    asker.join(CONNECT_ANSWER_S)
    if got and isinstance(got[0], str):
        client.set_retry_policies(policies)
        return got[0]
    client.close()
    os.environ.pop(_CONNECT_MODE, None)
    if not got:
        raise SparkMasterError(f"{master} is not a Spark Connect server: no answer within "
                               f"{CONNECT_ANSWER_S:g} s")
    m = re.search(r'details = "([^"]*)"', str(got[0]))
    why = m.group(1) if m else _reason(got[0])
    raise SparkMasterError(f"{master} is not a Spark Connect server: {why}")


def _connect_session(master: str) -> SparkSession:
    """A Spark Connect session on ``master`` with the checker's settings: its SQL
    ones (SESSION_SQL), two shuffle partitions per core of the server's cluster
    (as local_parallelism and _cluster_parallelism give), and no adaptive
    execution on a local server (as get_session has it on a local master). The
    server's JVM settings (memory, serializer, log level) are its own."""
    try:
        with warnings.catch_warnings():
            # pandas versions PySpark has not been validated with (as in get_session)
            warnings.simplefilter("ignore", FutureWarning)
            session = SparkSession.builder.remote(master).create()
    except Exception as e:  # noqa: BLE001 - one line naming the master instead
        os.environ.pop(_CONNECT_MODE, None)
        raise SparkMasterError(f"cannot start Spark Connect on {master}: {_reason(e)}") from None
    server_master = _connect_first(session, master)
    try:
        for k, v in SESSION_SQL.items():
            session.conf.set(k, v)
        if server_master.startswith("local"):
            session.conf.set("spark.sql.adaptive.enabled", "false")
        # Spark Connect has no SparkContext to ask: a range over the default
        # parallelism's slices has one partition per slice.
        ids = session.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
        slices = ids.agg(F.max("p")).first()[0] + 1
        session.conf.set("spark.sql.shuffle.partitions", str(2 * max(1, slices)))
    except Exception as e:  # noqa: BLE001 - one line naming the master instead
        _stop_connect(session)
        raise SparkMasterError(f"cannot start Spark Connect on {master}: {_reason(e)}") from None
    # A command that exits without shutdown() releases its server-side session
    # (and the checkpoints it holds) instead of leaving it to the server's timeout.
    atexit.register(_stop_connect, session)
    return session


def _stop_connect(session: SparkSession) -> None:
    """Stop a Connect session: its running operations are interrupted and the
    server releases it; pyspark.sql.functions build classic columns again. A server
    that is gone is not waited for."""
    try:
        if not session.is_stopped:
            _few_retries(session)
            session.interruptAll()
            session.stop()
    except Exception:  # noqa: BLE001 - a server already gone has nothing to release
        pass
    os.environ.pop(_CONNECT_MODE, None)


def _stop_session() -> None:
    """Stop the cached session (a classic one leaves its driver JVM running for the
    next)."""
    global _session, _session_master
    if _session is not None:
        if is_connect(_session):
            _stop_connect(_session)
        else:
            _session.stop()
    _session, _session_master = None, None


def task_slices(sc: SparkContext, items: int) -> int:
    """How many tasks to cut ``items`` independent pieces of work into (a swarm's
    seeds, its reports): four a core, so a slow piece does not leave cores idle."""
    return max(1, min(items, sc.defaultParallelism * 4))


# Above this many rows local_rows hands them to createDataFrame: a literal that
# big is better shipped as data than folded into every plan that reads it.
LOCAL_ROWS_MAX = 10_000


def _field_names(schema: str | StructType) -> list[str]:
    """The top-level field names of a struct schema, or of its DDL ("a string,
    b array<bigint>")."""
    if isinstance(schema, StructType):
        return schema.fieldNames()
    names, depth, start = [], 0, 0
    for i, ch in enumerate(schema + ","):
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            names.append(schema[start:i].split()[0])
            start = i + 1
    return names


def local_rows(spark: SparkSession, rows: Sequence[Sequence | Mapping],
               schema: str | StructType) -> DataFrame:
    """Rows the driver holds (tuples in field order, or dicts by field name) as a
    DataFrame of ``schema`` made in the JVM: one JSON literal that the optimizer
    folds into the plan. spark.createDataFrame passes a list through a Python
    worker (PySpark re-serializes a parallelized list in one), and the first of
    those in a check waited for the worker daemon to start (~0.8 s cold)."""
    if len(rows) > LOCAL_ROWS_MAX:
        return spark.createDataFrame(list(rows), schema)
    names = _field_names(schema)
    objs = [{n: r[n] for n in names} if isinstance(r, Mapping)
            else dict(zip(names, r, strict=True)) for r in rows]
    text = json.dumps(objs, separators=(",", ":"))
    typ = ArrayType(schema) if isinstance(schema, StructType) else f"array<struct<{schema}>>"
    return spark.range(0, 1, 1, 1).select(F.inline(F.from_json(F.lit(text), typ)))


def keep(df: DataFrame, eager: bool = True) -> DataFrame:
    """Compute df once and keep its rows for the queries that follow (a local
    checkpoint). Serialized in memory, spilling to disk: ~25% cheaper to write
    than Spark's default object storage on 10M-line inputs, and far less for
    the garbage collector to walk. ``eager=False`` leaves the computing to the
    first query that reads it, saving a pass."""
    return df.localCheckpoint(eager=eager, storageLevel=StorageLevel.MEMORY_AND_DISK)


@contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Run the block with ``settings`` in the session's SQL configuration, then put
    back what was there (unset what was not)."""
    old = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def shuffle_partitions(spark: SparkSession, n: int | None) -> AbstractContextManager[None]:
    """Run the queries of the block with ``n`` shuffle partitions (None: as is):
    queries over a few thousand rows pay for every task and stage they run."""
    return session_conf(spark, {} if n is None else {"spark.sql.shuffle.partitions": str(n)})


# A JVM's first check of a small batch runs Spark's expressions interpreted
# instead of compiling ~280 generated classes with Janino and then JIT-compiling
# them: on a cold JVM that is 4-8 s of a ~20 s first check (bench/README.md, time
# to verdict). Later checks, and large batches, where evaluating rows dominates,
# generate code (warm, a small check is ~0.5 s faster with it).
INTERPRETED_CHECKS = 1
# A batch of at most this much history is small (a few thousand operations): a
# cold JVM checks it interpreted, its queries run in one shuffle partition and
# its anomaly kinds side by side (checker.api._check).
SMALL_BATCH_BYTES = 4 << 20
_INTERPRETED = {"spark.sql.codegen.wholeStage": "false",
                "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
# A small batch's few thousand rows gain nothing from parallel tasks, and a cold
# JVM pays for every task and job it runs: one shuffle partition, and shuffle
# joins instead of broadcasts (each broadcast is a job of its own; the hints in
# the queries are for large batches). A scenario run's check: 201 -> 100 tasks,
# 42 -> 22 jobs, its first check ~2 s faster (bench/README.md).
SMALL_BATCH = {"spark.sql.shuffle.partitions": "1",
               "spark.sql.autoBroadcastJoinThreshold": "-1",
               "spark.sql.optimizer.disableHints": "true"}
_checks_done = 0  # completed checks in this process's driver JVM
# Whether one_check nices the driver JVM's compilers for a small batch (checker.jit).
_nice_small_checks = False


def interpreted_checks() -> int:
    """INTERPRETED_CHECKS, or ISRLAB_SPARK_INTERPRETED_CHECKS (0: generate code from
    the first check on)."""
    try:
        return max(0, int(os.environ.get("ISRLAB_SPARK_INTERPRETED_CHECKS")
                          or INTERPRETED_CHECKS))
    except ValueError:
        return INTERPRETED_CHECKS


@contextmanager
def one_check(spark: SparkSession, history_bytes: int) -> Iterator[bool]:
    """Run one check's queries: interpreted while the driver JVM has completed fewer
    than interpreted_checks() checks and the batch has at most
    SMALL_BATCH_BYTES of history, with generated code otherwise; a small batch's
    in one shuffle partition and without broadcasts (SMALL_BATCH); and drop what
    the check cached (release) at its end. Yields whether the batch is small."""
    global _checks_done
    small = history_bytes <= SMALL_BATCH_BYTES
    # A Connect server's JVM is not this process's: how warm it is is unknown here.
    cold = _checks_done < interpreted_checks() and not is_connect(spark)
    settings = {**(SMALL_BATCH if small else {}), **(_INTERPRETED if small and cold else {})}
    if _nice_small_checks:
        jit.set_compilers_nice(spark, niced=small)
    try:
        with session_conf(spark, settings):
            yield small
        _checks_done += 1
    finally:
        release(spark)


def release(spark: SparkSession) -> None:
    """Drop everything a check cached or checkpointed (the session stays up). A
    Connect session cannot list the server's checkpoints: each is dropped on the
    server as its DataFrame is dropped here (PySpark's CachedRemoteRelation), all of
    them when the session stops, and their blocks go at the server's next
    garbage collection (Spark's ContextCleaner). clearCache there is the server's,
    shared by its sessions (docs/checker.md)."""
    spark.catalog.clearCache()
    if is_connect(spark):
        return
    for rdd in list(spark.sparkContext._jsc.getPersistentRDDs().values()):
        rdd.unpersist()


def cancel_jobs(spark: SparkSession) -> None:
    """Cancel every active job of the session, each by its id. Not
    SparkContext.cancelAllJobs: it cancels only the jobs that own a running stage
    and then forgets the others (DAGScheduler.doCancelAllJobs, Spark 1.x to 4.x), so
    a job whose stages wait on a shuffle stage another job created (two queries
    reading one cached DataFrame) is never failed, and its caller waits for good.
    A Connect session interrupts its operations (interruptAll: the server cancels
    the jobs tagged with each operation's id)."""
    if is_connect(spark):
        spark.interruptAll()
        return
    sc = spark.sparkContext
    jsc = sc._jsc.sc()
    for job_id in sc.statusTracker().getActiveJobsIds():
        jsc.cancelJob(job_id)


def shutdown(timeout: float = 120.0) -> None:
    """Stop the session and let the driver JVM this process launched exit by itself
    (not killed: a JVM writing a class-data archive does so on its way out), waiting
    up to ``timeout`` seconds for it."""
    global _checks_done
    with _lock:
        _stop_session()
        _checks_done = 0  # the next check meets a new, cold JVM
        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        SparkContext._gateway = None
        SparkContext._jvm = None
        if gateway is not None:
            try:
                gateway.shutdown()
            except Exception:  # noqa: BLE001 - the JVM may be gone already
                pass
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()  # Spark's gateway server exits at the end of its stdin
        try:
            proc.wait(timeout)
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: do not hang on it
            proc.kill()
            proc.wait()
