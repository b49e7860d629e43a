"""What a swarm finds without being told, and how fast (issue 21's benchmark).

    python bench/swarm_finds.py [--runs N] [--seed S] [--master local[2]]

Runs `isrlab swarm` for each configuration below (N runs each, seeds S..S+N-1)
and prints, per configuration, the runs, how many seeds found each anomaly
kind, simulated and total runs per minute (the batch check included) and the
mean operations per run. Numbers go to bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import speed_line  # noqa: E402 - bench/ is the script's own path

ROOT = Path(__file__).resolve().parents[1]

CONFIGS = [
    ("0.10, everything drawn", ["--protocol", "0.10"]),
    ("0.10, unclean election on", ["--protocol", "0.10",
                                   "--set", "unclean.leader.election.enable=true"]),
    ("0.11, unclean election on", ["--protocol", "0.11",
                                   "--set", "unclean.leader.election.enable=true"]),
    ("latest, min.insync.replicas 2, acks all, unclean off",
     ["--protocol", "latest", "--acks", "all", "--set", "min.insync.replicas=2",
      "--set", "unclean.leader.election.enable=false"]),
    ("latest, as above, no power-cycle",
     ["--protocol", "latest", "--acks", "all", "--set", "min.insync.replicas=2",
      "--set", "unclean.leader.election.enable=false",
      "--faults", "kill,stop,pause,isolate,halves,cut-controller"]),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--only", type=int, help="only the configuration with this index")
    args = ap.parse_args()
    print(speed_line(), flush=True)
    print("| configuration | runs | seeds finding each kind | runs/min simulated | "
          "runs/min with the check | ops/run |")
    print("|---|---|---|---|---|---|")
    for i, (name, flags) in enumerate(CONFIGS):
        if args.only is not None and i != args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run(
                [sys.executable, "-m", "harness.cli", "swarm", *flags, "--runs", str(args.runs),
                 "--seed", str(args.seed), "--master", args.master, "--runs-dir", tmp,
                 "--json"], cwd=ROOT, capture_output=True, text=True)
            if r.returncode not in (0, 1):
                print(f"| {name} | failed: {r.stderr.strip().splitlines()[-1:]} |||||")
                continue
            out = json.loads(r.stdout)
        found = ", ".join(f"{k} {v}" for k, v in out["found"].items()) or "nothing"
        runs = len(out["runs"])
        sim = runs / out["simulate_seconds"] * 60
        print(f"| {name} | {runs} | {found} | {sim:.0f} | {out['runs_per_minute']:.0f} "
              f"| {out['ops'] / runs:.0f} |", flush=True)
    print(speed_line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
