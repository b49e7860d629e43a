"""Detection power of chaos: how soon random faults find each kind of anomaly.

    python bench/chaos_detection.py [--protocol 0.10] [--seeds 10] [--seed 100]
        [--time-limit 60s] [--faults kill,power-cycle] [--set KEY=VALUE ...]
        [--kinds lost-write,divergence] [--runs-dir DIR] [-- CHAOS FLAGS...]

Runs `isrlab chaos` with `--seeds` runs (seeds S, S+1, ...) in one batch, then
for every run and anomaly kind the **detection time**: seconds from the run's
start (the history's clock) until the first anomaly of that kind happened.
An anomaly's witness names an acknowledged record (its ack time and offset);
the moment it was lost is the first truncation after that acknowledgement,
on any replica, that removed its offset (events.jsonl `truncate`, from/to);
without such an event, the witness's ack time (a lower bound). A run that
finds no anomaly of a kind counts as "not within the time limit": the median
over the seeds is then the median with those as +inf (reported as `>T` when
more than half found none).

Prints one table row per kind -- runs that found it, median and min/max time
-- and, with --json, the per-run numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

# The same measure as the nightly trend page's detection time.
from harness.chaos.nightly import detection_times

KINDS = ("lost-write", "divergence")


def summarize(times: list[float | None], limit: float) -> dict[str, Any]:
    found = sorted(t for t in times if t is not None)
    padded = [t if t is not None else math.inf for t in times]
    med = statistics.median(padded) if padded else math.inf
    return {"found": len(found), "runs": len(times),
            "median_s": round(med, 1) if math.isfinite(med) else f">{limit:g}",
            "min_s": round(found[0], 1) if found else None,
            "max_s": round(found[-1], 1) if found else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--protocol", default="0.10")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--time-limit", default="60s")
    ap.add_argument("--faults", default="kill,power-cycle")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="anomaly kinds to time (any the checker names)")
    ap.add_argument("--runs-dir", type=Path, default=Path("runs/bench-detection"))
    ap.add_argument("--port", type=int, default=19592)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("chaos_args", nargs="*", help="more `isrlab chaos` flags, after --")
    args = ap.parse_args()
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    cmd = [sys.executable, "-m", "harness.cli", "chaos", "--protocol", args.protocol,
           "--time-limit", args.time_limit, "--runs", str(args.seeds), "--seed", str(args.seed),
           "--faults", args.faults, "--runs-dir", str(args.runs_dir), "--port", str(args.port),
           "--json", *[x for s in args.sets for x in ("--set", s)], *args.chaos_args]
    print("$ isrlab " + " ".join(cmd[3:]), file=sys.stderr)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    try:
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        print(f"isrlab chaos exited {proc.returncode} without a JSON summary", file=sys.stderr)
        return 3
    from harness.duration import parse_duration

    limit = parse_duration(args.time_limit, "time limit")
    per_run = []
    for r in summary.get("runs", []):
        per_run.append({"seed": r.get("seed"), "verdict": r.get("verdict"),
                        "found": r.get("found"),
                        "detection_s": detection_times(Path(r["run_dir"]), kinds)})
    table = {k: summarize([r["detection_s"][k] for r in per_run], limit) for k in kinds}
    first = summarize([min((t for t in r["detection_s"].values() if t is not None),
                           default=None) for r in per_run], limit)
    table["first of " + " or ".join(kinds)] = first
    result = {"protocol": args.protocol, "faults": args.faults, "sets": args.sets,
              "time_limit_s": limit, "seeds": f"{args.seed}..{args.seed + args.seeds - 1}",
              "exit_code": proc.returncode, "batch": summary.get("batch"),
              "kinds": table, "runs": per_run}
    if args.json:
        print(json.dumps(result, default=str))
    else:
        print(f"{args.protocol} {args.faults} {' '.join(args.sets)} ({args.seeds} seeds, "
              f"{args.time_limit}); batch {summary.get('batch')}, chaos exit "
              f"{proc.returncode}")
        for k, s in table.items():
            print(f"  {k:40} {s['found']}/{s['runs']} runs  median {s['median_s']} s  "
                  f"min {s['min_s']}  max {s['max_s']}")
        other: dict[str, int] = {}
        for r in per_run:
            for k in r["found"] or {}:
                other[k] = other.get(k, 0) + 1
        print("  kinds found (runs): " + (", ".join(f"{k} {n}" for k, n in sorted(
            other.items())) or "none"))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
