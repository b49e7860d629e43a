"""The simulator's own cost per swarm run, without Spark (issue 21's floor).

    python bench/sim_speed.py [--runs 20] [--seed 0] [--protocol 0.10] [--repeat 3]

Simulates seeds S..S+N-1 as `isrlab swarm` draws them (harness.chaos.swarm.simulate),
in this one process, and prints the CPU seconds a run costs (median of the
repeats), the operations a run records, and a digest of every run's history,
events, replica logs and trace. Two commits that print the same digest
simulated the same runs byte for byte: a speed-up that changes the digest
changed what the simulator does. To compare two commits, run it in a worktree
of each, alternately, within minutes (bench/machine.py says why).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import speed_line  # noqa: E402 - bench/ is the script's own path

from contract import EVENTS, HISTORY, REPLICAS, TRACE  # noqa: E402
from harness.chaos.swarm import SwarmSpec, simulate  # noqa: E402


def digest(run_dirs: list[Path]) -> str:
    """One hash over what the runs recorded (not run.json: it holds wall-clock times)."""
    h = hashlib.sha256()
    for d in run_dirs:
        files = [d / HISTORY, d / EVENTS, d / TRACE, *sorted((d / REPLICAS).rglob("*"))]
        for f in files:
            if f.is_file():
                h.update(f.relative_to(d).as_posix().encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--protocol", default="0.10")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(speed_line(), flush=True)
    spec = SwarmSpec.of(args.protocol)
    cpu, digests, ops = [], set(), 0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.process_time()
            results = [simulate(s, spec, tmp, "bench")
                       for s in range(args.seed, args.seed + args.runs)]
            cpu.append((time.process_time() - t0) / args.runs)
            digests.add(digest([Path(r["run_dir"]) for r in results]))
            ops = sum(r["ops"] for r in results) // args.runs
    print(f"{args.protocol}, seeds {args.seed}..{args.seed + args.runs - 1}: "
          f"{statistics.median(cpu) * 1000:.0f} ms of CPU a run "
          f"(repeats {', '.join(f'{c * 1000:.0f}' for c in cpu)}), {ops} ops a run, "
          f"digest {' '.join(sorted(digests))}")
    print(speed_line(), flush=True)
    return 0 if len(digests) == 1 else 1  # two digests: the same seeds ran differently


if __name__ == "__main__":
    raise SystemExit(main())
