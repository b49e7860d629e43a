"""Checker wall time against the floor: Spark reading and counting the same files.

    python bench/bench_checker.py [--sizes 1000000,5000000,10000000] [--dir DIR] [--repeat N]

For each size, bench/gen_history.py writes a run directory with every anomaly
kind injected (kept in --dir and reused when its parameters match). Then, in ONE
Spark session (started and warmed up before any timing, so the JVM start is in
neither number):

- floor: Spark reading the same files -- every JSON-lines file parsed with its
  schema (`spark.read.schema(S).json(...)`) and counted, with a hash over every
  column so nothing is pruned away (a bare text `count()` is also printed: it
  does not even parse the lines);
- check: `checker.api.check_runs([run])`, everything `isrlab check` does except
  rendering the report.

With --repeat N, floor and check are measured N times each, alternating, and
the medians are reported (this host's speed drifts by the minute; one floor
can be off by a fifth), with the median of the paired ratios (each check over
the floor measured just before it). Prints both, their ratio, the time per million
operations, whether every injected anomaly was found, and the driver JVM's
peak resident memory. Targets (README): check <= 3x floor at 10M operations;
doubling the input at most doubles the check time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gen_history  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from checker import schemas  # noqa: E402
from checker.api import check_runs  # noqa: E402
from checker.spark import get_session  # noqa: E402


def _ensure_run(base: Path, ops: int, seed: int) -> Path:
    run = base / f"gen-{ops}"
    stamp = run / "bench-params.json"
    params = {"ops": ops, "seed": seed, "inject": "all"}
    if stamp.is_file() and json.loads(stamp.read_text()) == params:
        return run
    t0 = time.monotonic()
    gen_history.generate(run, ops, set(gen_history.KINDS), seed=seed)
    stamp.write_text(json.dumps(params))
    print(f"  generated {ops:,} ops in {time.monotonic() - t0:.0f}s", flush=True)
    return run


def _files(run: Path) -> list[str]:
    return [str(p) for p in sorted(run.rglob("*.jsonl"))]


def _floor(spark, run: Path) -> int:
    """Read and count every line of the run, parsing each file with its schema."""
    lines = 0
    for pattern, schema in (("history.jsonl", schemas.HISTORY), ("replicas/*/log.jsonl",
                            schemas.LOG), ("events.jsonl", schemas.EVENTS)):
        files = [str(p) for p in sorted(run.glob(pattern))]
        if files:
            df = spark.read.schema(schema).json(files)
            lines += df.agg(F.count("*"), F.sum(F.hash(*df.columns))).collect()[0][0]
    return lines


def _jvm_peak_rss_mib(spark) -> float | None:
    try:
        pid = spark.sparkContext._gateway.proc.pid
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (AttributeError, OSError, ValueError):
        return None
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,5000000,10000000",
                    help="comma-separated operation counts")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/isrlab-bench-checker"),
                    help="where generated runs are kept between invocations")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure floor and check this many times each; report medians")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    args.dir.mkdir(parents=True, exist_ok=True)

    print("generating inputs", flush=True)
    runs = {n: _ensure_run(args.dir, n, args.seed) for n in sizes}
    spark = get_session()
    print(f"Spark {spark.version}, master {spark.sparkContext.master}", flush=True)
    # Warm-up: JIT, codegen caches and the checker's query plans, on a small run.
    # A run this small is checked record by record; the large ones go through the
    # digest scope (checker.scope), so warm that path too: without it the first
    # large check compiles the scope's plans and is ~15% slower than the next.
    warm = _ensure_run(args.dir, 20_000, args.seed)
    spark.read.text(_files(warm)).count()
    _floor(spark, warm)
    check_runs([warm])
    check_runs([warm], prune=True)

    rows = []
    for n in sizes:
        t0 = time.monotonic()
        text_lines = spark.read.text(_files(runs[n])).count()
        text = time.monotonic() - t0
        floors, checks = [], []
        for _ in range(max(1, args.repeat)):
            t0 = time.monotonic()
            lines = _floor(spark, runs[n])
            floors.append(time.monotonic() - t0)
            assert lines == text_lines, (lines, text_lines)
            t0 = time.monotonic()
            (result,) = check_runs([runs[n]])
            checks.append(time.monotonic() - t0)
        floor, check = statistics.median(floors), statistics.median(checks)
        # Each check is measured right after its floor: the median of those
        # pairs' ratios is less at the mercy of a slow minute than the ratio of
        # the medians.
        paired = statistics.median(c / f for f, c in zip(floors, checks, strict=True))
        injected = json.loads((runs[n] / "injected.json").read_text())
        want = {i["kind"] for i in injected}
        found = {a["kind"] for a in result.anomalies}
        rows.append((n, lines, floor, check, paired, want <= found))
        spread = (f"  (floors {', '.join(f'{x:.1f}' for x in floors)}; "
                  f"checks {', '.join(f'{x:.1f}' for x in checks)})" if len(floors) > 1 else "")
        print(f"  {n:>11,} ops  {lines:>11,} lines  text count {text:5.1f}s  "
              f"floor {floor:7.1f}s  check {check:7.1f}s  "
              f"ratio {check / floor:4.1f}x (pairs {paired:4.2f}x)  {check / n * 1e6:5.1f}s/M ops  "
              f"all {len(want)} injected kinds found: {want <= found}{spread}", flush=True)
    peak = _jvm_peak_rss_mib(spark)
    print()
    print("| operations | floor (parse + count) | check | check / floor | median of paired "
          "ratios | all injected found |")
    print("|---:|---:|---:|---:|---:|:---:|")
    for n, _, floor, check, paired, ok in rows:
        print(f"| {n:,} | {floor:.1f} s | {check:.1f} s | {check / floor:.1f}x | {paired:.2f}x | "
              f"{'yes' if ok else 'NO'} |")
    for (n1, _, _, c1, *_), (n2, _, _, c2, *_) in zip(rows, rows[1:], strict=False):
        print(f"input x{n2 / n1:.1f} ({n1:,} -> {n2:,}): check time x{c2 / c1:.2f}")
    if peak is not None:
        print(f"driver JVM peak resident memory: {peak:,.0f} MiB")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
