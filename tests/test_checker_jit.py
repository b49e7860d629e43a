"""The driver JVM's JIT compilers run niced during a small check and at the
tasks' own priority during a large one (checker.jit): a real JVM's compiler
threads, as Linux reports their nice values."""

from __future__ import annotations

import os

import pytest

from checker import jit
from checker.spark import SMALL_BATCH_BYTES, get_session, one_check

pytestmark = pytest.mark.spark


def _nices(spark) -> dict[int, int]:
    pid = jit.driver_jvm(spark)
    assert pid is not None  # local[2]: the JVM this process started
    tids = jit.compiler_threads(pid)
    assert tids, "no C1/C2 compiler thread found"
    return {t: os.getpriority(os.PRIO_PROCESS, t) for t in tids}


def test_compilers_are_niced_for_a_small_check_and_not_for_a_large_one() -> None:
    spark = get_session()
    with one_check(spark, SMALL_BATCH_BYTES):
        small = _nices(spark)
    with one_check(spark, SMALL_BATCH_BYTES + 1):
        large = _nices(spark)
    with one_check(spark, 1000):
        again = _nices(spark)
    if jit.can_unnice():
        assert set(small.values()) == {jit.NICED} and set(again.values()) == {jit.NICED}
        assert set(large.values()) == {0}
    else:  # niced from the JVM's start, for good
        assert set(small.values()) == set(large.values()) == {jit.NICED}
    # the JVM's other threads keep their priority throughout
    pid = jit.driver_jvm(spark)
    others = {os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir(f"/proc/{pid}/task")
              if int(t) not in small}
    assert others == {0}, others


