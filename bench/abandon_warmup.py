"""How long a check request waits for the checker server's warm-up to give way.

    python bench/abandon_warmup.py [-n 8] [--seed 1]

The warm checker server goes on checking a made-up run after a real check (a
JVM keeps compiling Spark's planner over its first ten checks), and a request
that arrives meanwhile first abandons that warm-up (checker.server._WarmUp).
This starts the warm-up in one JVM (warmed by three checks first), abandons it
after a seeded random 0.5-4 s, n times, and prints each wait: the time a warm
`isrlab reproduce` spends before its own check starts.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import speed_line  # noqa: E402 - bench/ is the script's own path

from checker.server import _WarmUp  # noqa: E402
from checker.spark import DEFAULT_MASTER, get_session  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(speed_line(), flush=True)
    get_session(DEFAULT_MASTER).range(1).count()
    first = _WarmUp(DEFAULT_MASTER, 3, lambda: None)
    first.start()
    first.join()
    rng = random.Random(args.seed)
    waits = []
    for _ in range(args.n):
        warm = _WarmUp(DEFAULT_MASTER, 50, lambda: None)
        warm.start()
        time.sleep(rng.uniform(0.5, 4.0))
        t0 = time.monotonic()
        warm.abandon()
        waits.append(time.monotonic() - t0)
    print(f"abandon waits: {', '.join(f'{w:.2f}' for w in waits)} s; "
          f"mean {statistics.mean(waits):.2f} s, max {max(waits):.2f} s")
    print(speed_line(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
