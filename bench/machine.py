"""How fast this machine is right now, for reading a benchmark's numbers.

The VM these benchmarks run on drifts: the same code's first check took 14.4 s
one morning and 30 s that afternoon, and within the afternoon this loop took
0.4-1.4 s. A benchmark prints `speed_line()` before and after it runs, so that
an hour whose speed changed shows. It does not see everything (a JVM's first
check was twice as slow again with the loop at its fastest): compare code by
alternating versions within minutes, as bench/first_check.py does.
"""

from __future__ import annotations

import statistics
import time

STEPS = 10_000_000


def loop_seconds(repeats: int = 3) -> float:
    """The median time of a fixed pure-Python loop of STEPS additions."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        s = 0
        for i in range(STEPS):
            s += i
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def speed_line() -> str:
    return f"machine speed: a {STEPS:,}-step Python loop takes {loop_seconds():.2f} s"


if __name__ == "__main__":
    print(speed_line())
