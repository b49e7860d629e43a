"""The CPU priority of the driver JVM's JIT compilers, chosen per check.

A cold JVM's first check spends more CPU in C2 than in Spark (~17 s), and on a
2-core machine that time comes out of a small check: with the compiler threads
at nice 19 they compile while the cores are idle (a person reading the report,
the server's warm-up), a cold small check ~20 -> ~15 s. A large batch is the
opposite case: its tasks keep both cores busy, niced compilers starve, and the
whole check runs in slow code -- a 600 s chaos run at 5,000 records/s (962 MB
of history) checked in 426 s niced and in 133 s at the tasks' own priority
(bench/README.md). So each check sets the priority for itself: niced for a
small batch, not for a large one.

Linux keeps a nice value per thread; the compiler threads are the JVM's threads
named "C1/C2 CompilerThread*" (/proc/PID/task/*/comm), all started with the JVM
(-XX:-UseDynamicNumberOfCompilerThreads). Lowering a nice value again needs
root or RLIMIT_NICE; where neither allows it, the compilers stay niced from the
JVM's start (-XX:CompilerThreadPriority=19), as before this module.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

NICED = 19
_PREFIXES = ("C1 CompilerThre", "C2 CompilerThre")  # comm is cut at 15 characters
# The compilers all exist from the JVM's start, so a check's setting reaches each.
FLAGS = " -XX:-UseDynamicNumberOfCompilerThreads"
# Where a nice value cannot be lowered again: niced from the start, for good.
NICED_FLAGS = " -XX:ThreadPriorityPolicy=1 -XX:CompilerThreadPriority=19"


def can_unnice() -> bool:
    """Whether this process may lower a thread's nice value back to 0."""
    if os.geteuid() == 0:
        return True
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    return soft == resource.RLIM_INFINITY or soft >= 20  # the lowest nice: 20 - soft


def driver_jvm(spark: Any) -> int | None:
    """The pid of the driver JVM this process started (local mode), else None (a
    Connect or remote driver: not ours to set)."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
    except AttributeError:  # Connect: no SparkContext here
        return None
    try:
        return pid if os.readlink(f"/proc/{pid}/exe").endswith("/java") else None
    except OSError:
        return None


def compiler_threads(pid: int) -> list[int]:
    """The thread ids of a JVM's JIT compiler threads."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().startswith(_PREFIXES):
                out.append(int(task.name))
        except OSError:
            continue  # a thread that ended meanwhile
    return out


def set_compilers_nice(spark: Any, niced: bool) -> int:
    """Set the driver JVM's compiler threads to nice 19 (``niced``) or 0; how
    many were set (0: not our JVM, or not allowed)."""
    pid = driver_jvm(spark)
    if pid is None:
        return 0
    done = 0
    for tid in compiler_threads(pid):
        try:
            os.setpriority(os.PRIO_PROCESS, tid, NICED if niced else 0)
            done += 1
        except OSError:  # not allowed (no root, no RLIMIT_NICE), or the thread ended
            continue
    return done
