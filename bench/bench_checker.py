"""Checker wall time and driver memory against the floor: Spark reading and counting the same files.

    python bench/bench_checker.py [--sizes 1M,10M,100M] [--run-ops 10M] [--data DIR]
                                  [--driver-memory 4g] [--repeat N] [--jobs 2]

Each size is a batch of runs (a night is many): ceil(size / --run-ops) runs of
size / runs operations each, every anomaly kind injected once in each run,
written by bench/gen_history.py into --data (default ~/.cache/isrlab/bench-data)
and reused by later invocations while their parameters match. The whole batch
is checked in ONE check, as `isrlab check BATCH_DIR` would.

Each size is measured in a fresh process with a fresh driver JVM
(ISRLAB_SPARK_DRIVER_MEMORY=--driver-memory, 4g by default, for every row), so
that JVM's peak resident memory (VmHWM of /proc/PID/status) is that row's and no
earlier row's. In it, the session is started and warmed up on a 20k-operation
run before any timing (the JVM start and the first compilations are in neither
number), then, alternating --repeat times:

- floor: Spark reading the same files -- every JSON-lines file of the batch
  parsed with its schema (`spark.read.schema(S).json(...)`) and counted, with a
  hash over every column so nothing is pruned away;
- check: `checker.api.check_runs([batch])`, everything `isrlab check` does
  except rendering the reports.

Prints, per size: the medians of floor and check, the median of the paired
ratios (each check over the floor measured just before it: less at the mercy of
a slow minute on this host than the ratio of the medians), the injected
anomalies found (run x kind), the driver JVM's peak RSS and heap cap (-Xmx from
its command line), and the Python driver's peak RSS; then a Markdown table,
between two bench/machine.py speed lines.
Targets (README): check <= 2x floor at 10M operations; ten times the input at
most ten times the check time. Exit 1 if an injected anomaly was missed or a
row failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gen_history  # noqa: E402
from machine import speed_line  # noqa: E402 - bench/ is the script's own path

from checker import jit  # noqa: E402
from checker.java import user_cache  # noqa: E402

WARM_OPS = 20_000
_SUFFIX = {"k": 10**3, "M": 10**6, "G": 10**9}


def _count(text: str) -> int:
    """1000000, 1_000_000, 1M, 10k."""
    text = text.strip().replace("_", "")
    if text and text[-1] in _SUFFIX:
        return int(float(text[:-1]) * _SUFFIX[text[-1]])
    return int(text)


def _ops_label(n: int) -> str:
    for suffix, mult in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{suffix}"
    return f"{n:,}"


def batch_dir(data: Path, ops: int, runs: int, seed: int) -> Path:
    """Where a batch of these parameters is kept (every kind injected)."""
    return data / f"ops-{ops}-runs-{runs}-seed-{seed}"


def ensure_batch(data: Path, ops: int, runs: int, seed: int, jobs: int) -> Path:
    """The batch, generated unless a complete one of the same parameters is there."""
    out = batch_dir(data, ops, runs, seed)
    kinds = set(gen_history.KINDS)
    if not gen_history.batch_complete(out, gen_history.batch_params(ops, runs, kinds, seed)):
        t0 = time.monotonic()
        gen_history.generate_batch(out, ops, runs, kinds, seed, jobs)
        print(f"  generated {ops:,} ops in {runs} runs in {time.monotonic() - t0:.0f} s",
              file=sys.stderr, flush=True)
    return out


def _disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.jsonl"))


# -- one row, in a process of its own (--row) ---------------------------------------


def _floor(spark: Any, runs: list[Path]) -> int:
    """Read and count every line of the runs, parsing each file with its schema."""
    from pyspark.sql import functions as F

    from checker import schemas

    # at the JIT priority a large check's tasks get (checker.jit), not the
    # warm-up's niced one
    jit.set_compilers_nice(spark, niced=False)
    lines = 0
    for pattern, schema in (("history.jsonl", schemas.HISTORY),
                            ("replicas/*/log.jsonl", schemas.LOG),
                            ("events.jsonl", schemas.EVENTS)):
        files = [str(p) for run in runs for p in sorted(run.glob(pattern))]
        if files:
            df = spark.read.schema(schema).json(files)
            lines += df.agg(F.count("*"), F.sum(F.hash(*df.columns))).collect()[0][0]
    return lines


def driver_jvm_pid(spark: Any) -> int:
    """The driver JVM's pid: PySpark's launch script execs java, so the gateway's
    process is the JVM (checked: its executable is java)."""
    pid = spark.sparkContext._gateway.proc.pid
    exe = os.readlink(f"/proc/{pid}/exe")
    if not exe.endswith("/java"):
        raise RuntimeError(f"the gateway process {pid} is {exe}, not a JVM")
    return pid


def jvm_memory(pid: int) -> tuple[float, str]:
    """The JVM's peak resident memory (MiB, VmHWM) and its heap cap (-Xmx)."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    (hwm,) = [int(line.split()[1]) for line in status if line.startswith("VmHWM:")]
    args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    xmx = [a[len("-Xmx"):] for a in args if a.startswith("-Xmx")]
    return hwm / 1024, xmx[-1] if xmx else "?"


def measure_row(batch: Path, warm: Path, repeat: int) -> dict[str, Any]:
    """Warm a fresh session up, then floor and check of the batch, alternated."""
    from checker.api import check_runs
    from checker.spark import get_session

    runs = sorted(p.parent for p in batch.glob(f"*/{gen_history.RUN_JSON}"))
    spark = get_session()
    # Warm-up: JIT, codegen caches and the checker's query plans, on a small run.
    # A run this small is checked record by record; the large ones go through the
    # digest scope (checker.scope), so warm that path too: without it the first
    # large check compiles the scope's plans and is ~15% slower than the next.
    _floor(spark, [warm])
    check_runs([warm])
    check_runs([warm], prune=True)
    floors, checks, found = [], [], 0
    for _ in range(max(1, repeat)):
        t0 = time.monotonic()
        lines = _floor(spark, runs)
        floors.append(time.monotonic() - t0)
        t0 = time.monotonic()
        results = check_runs([batch])
        checks.append(time.monotonic() - t0)
        found = 0
        for r in results:
            want = {i["kind"] for i in json.loads((r.run_dir / "injected.json").read_text())}
            found += len(want & {a["kind"] for a in r.anomalies})
    jvm_peak, xmx = jvm_memory(driver_jvm_pid(spark))
    return {
        "lines": lines, "floors": floors, "checks": checks, "found": found,
        "injected": len(runs) * len(gen_history.KINDS),
        "jvm_peak_mib": jvm_peak, "xmx": xmx,
        "python_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "master": spark.sparkContext.master, "spark": spark.version,
    }


# -- the table ------------------------------------------------------------------------


def run_row(args: argparse.Namespace, batch: Path, warm: Path) -> dict[str, Any]:
    """measure_row in a child process with its own driver JVM; {"error": ...} if it failed."""
    env = {**os.environ, "ISRLAB_SPARK_DRIVER_MEMORY": args.driver_memory}
    cmd = [sys.executable, __file__, "--row", str(batch), "--warm", str(warm),
           "--repeat", str(args.repeat)]
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        return {"error": f"exit status {done.returncode} (its stderr is above)"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row_text(n: int, runs: int, disk: int, r: dict[str, Any]) -> str:
    head = f"| {n:,} | {runs} | {disk / 1e9:.2f} GB |"
    if "error" in r:
        return head + f" failed: {r['error']} ||||||"
    floor, check = statistics.median(r["floors"]), statistics.median(r["checks"])
    paired = statistics.median(c / f for f, c in zip(r["floors"], r["checks"], strict=True))
    return (head + f" {r['lines'] / 1e6:,.1f} M | {floor:.1f} s | {check:.1f} s | "
            f"{paired:.2f}x | {r['found']}/{r['injected']} | {r['jvm_peak_mib'] / 1024:.2f} GiB "
            f"(-Xmx{r['xmx']}) | {r['python_peak_mib']:,.0f} MiB |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1M,10M,100M",
                    help="comma-separated operation counts (1000000, 1M, 10k)")
    ap.add_argument("--run-ops", default="10M",
                    help="at most this many operations a run: a size is ceil(size / this) runs")
    ap.add_argument("--data", type=Path, default=user_cache() / "bench-data",
                    help="where generated batches are kept between invocations")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="generator processes")
    ap.add_argument("--driver-memory", default="4g",
                    help="ISRLAB_SPARK_DRIVER_MEMORY for every row's driver JVM")
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure floor and check this many times each; report medians")
    ap.add_argument("--generate-only", action="store_true",
                    help="make the inputs, measure nothing")
    ap.add_argument("--row", type=Path, help=argparse.SUPPRESS)  # one row's child process
    ap.add_argument("--warm", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.row is not None:
        print(json.dumps(measure_row(args.row, args.warm, args.repeat)))
        return 0
    try:
        sizes, run_ops = [_count(s) for s in args.sizes.split(",")], _count(args.run_ops)
    except ValueError:
        ap.error(f"--sizes and --run-ops are operation counts (1000000, 1M, 10k): "
                 f"{args.sizes!r}, {args.run_ops!r}")
    if min(sizes + [run_ops]) < 1:
        ap.error("--sizes and --run-ops must be positive")

    print(f"inputs in {args.data}", file=sys.stderr, flush=True)
    plan = [(n, max(1, math.ceil(n / run_ops))) for n in sizes]
    batches = {n: ensure_batch(args.data, n, runs, args.seed, args.jobs) for n, runs in plan}
    warm = ensure_batch(args.data, WARM_OPS, 1, args.seed, 1) / gen_history.run_name(0)
    disk = {n: _disk_bytes(b) for n, b in batches.items()}
    for n, runs in plan:
        print(f"  {n:>13,} ops  {runs:>3} runs  {disk[n] / 1e9:7.2f} GB  {batches[n]}",
              file=sys.stderr)
    if args.generate_only:
        return 0

    rows = []
    print(speed_line(), flush=True)
    for n, runs in plan:
        print(f"{_ops_label(n)}: checking {runs} runs in a fresh driver JVM "
              f"(ISRLAB_SPARK_DRIVER_MEMORY={args.driver_memory})", file=sys.stderr, flush=True)
        r = run_row(args, batches[n], warm)
        rows.append((n, runs, r))
        print(_row_text(n, runs, disk[n], r), flush=True)
        if "error" not in r and len(r["checks"]) > 1:
            print(f"  floors {', '.join(f'{x:.1f}' for x in r['floors'])} s; "
                  f"checks {', '.join(f'{x:.1f}' for x in r['checks'])} s", flush=True)
    print(speed_line(), flush=True)
    ok = [(n, r) for n, _, r in rows if "error" not in r]
    if ok:
        print(f"\nSpark {ok[0][1]['spark']}, master {ok[0][1]['master']}, driver memory "
              f"{args.driver_memory}, medians of {max(1, args.repeat)}\n")
    print("| operations | runs | input on disk | lines | floor (parse + count) | check | "
          "check / floor (median of pairs) | injected found | driver JVM peak RSS | "
          "Python driver peak RSS |")
    print("|---:|---:|---:|---:|---:|---:|---:|:---:|---:|---:|")
    for n, runs, r in rows:
        print(_row_text(n, runs, disk[n], r))
    for (n1, r1), (n2, r2) in zip(ok, ok[1:], strict=False):
        c1, c2 = statistics.median(r1["checks"]), statistics.median(r2["checks"])
        print(f"input x{n2 / n1:.1f} ({n1:,} -> {n2:,}): check time x{c2 / c1:.2f}")
    good = len(ok) == len(rows) and all(r["found"] == r["injected"] for _, r in ok)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
