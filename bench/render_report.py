"""Report rendering time for checked runs: `reports.render.render_run` (what every
command that checks runs does per run), split into reading the run directory,
the replica grid and the whole page.

    python bench/render_report.py RUN_DIR [RUN_DIR ...] [-n 3]

Each RUN_DIR must have been checked (check/summary.json). Prints, per run, its
history lines, the median of `-n` timings of each part, the report's size and
the process's peak resident memory so far (give one run to read one run's).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contract import HISTORY  # noqa: E402
from reports import grid  # noqa: E402
from reports.render import render_run  # noqa: E402
from reports.rundata import load  # noqa: E402
from reports.story import RunFacts  # noqa: E402


def _median(n: int, fn, *args) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("-n", type=int, default=3, help="timings per part (median)")
    args = ap.parse_args()
    print("| run | history lines | read | grid | whole report | report size | peak memory |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for run in args.runs:
        with open(run / HISTORY, "rb") as f:
            lines = sum(1 for _ in f)
        read = _median(args.n, load, run)
        data = load(run)
        grids = _median(args.n, grid.build, data, RunFacts(data))
        del data  # one run's data in memory at a time: the peak is one render's
        whole = _median(args.n, render_run, run)
        size = render_run(run).stat().st_size
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB -> GB
        print(f"| {run.name} | {lines:,} | {read:.1f} s | {grids:.1f} s "
              f"| {whole:.1f} s | {size / 1e6:.2f} MB | {peak:.1f} GB |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
