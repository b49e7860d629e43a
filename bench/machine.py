"""How fast this machine is right now, for reading a benchmark's numbers.

The VM these benchmarks run on drifts: the same code's first check took 14.4 s
one morning and 30 s that afternoon, and within the afternoon this loop took
0.4-1.4 s. A benchmark prints `speed_line()` before and after it runs, so that
an hour whose speed changed shows. The loop does not see everything (a JVM's
first check was twice as slow again with the loop at its fastest). `Steal`
measures the share of CPU time the host took from this VM (the kernel's
*steal*, /proc/stat) over a stretch of work such as one benchmark run: it tells
a descheduled VM from a slow core (on 2026-11-28 the loop ran 3-7x slower with
steal at 0-2 %). Compare code by alternating versions within minutes, as
bench/first_check.py does.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

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


def _cpu_ticks() -> tuple[int, int]:
    """All CPUs' (total, steal) ticks since boot; (0, 0) where /proc/stat is not
    Linux's."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0, 0
    if fields[0] != "cpu" or len(fields) < 9:
        return 0, 0
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return sum(ticks), ticks[7]


class Steal:
    """The share of this VM's CPU time the host took (steal) since construction."""

    def __init__(self) -> None:
        self._t0, self._s0 = _cpu_ticks()

    def text(self) -> str:
        t1, s1 = _cpu_ticks()
        if t1 <= self._t0:
            return "steal n/a"
        return f"steal {100.0 * (s1 - self._s0) / (t1 - self._t0):.0f}%"


def speed_line() -> str:
    steal = Steal()
    loop = loop_seconds()
    return (f"machine speed: a {STEPS:,}-step Python loop takes {loop:.2f} s "
            f"({steal.text()} of the CPU time meanwhile)")


if __name__ == "__main__":
    print(speed_line())
