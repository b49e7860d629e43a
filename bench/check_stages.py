"""Where a check's time goes: each phase of `isrlab check` and each Spark job in it.

    python bench/check_stages.py PATH [--repeat 2] [--driver-memory 4g] [--top 40] [--floor]

PATH is a run directory or a batch of them (bench/gen_history.py makes them:
~/.cache/isrlab/bench-data/ops-10000000-runs-1-seed-1 is the 10M row of
bench_checker.py). The batch is checked --repeat times in one driver JVM and
the last check is reported (the earlier ones warm the JVM up), from two sources:

- the check's own progress lines (checker.api.check_runs): each phase's wall time;
- Spark's status store (what the Spark UI shows, read through the driver's
  AppStatusStore, so it needs no UI): every job the check ran, named by the
  Python line that started it ("collect at checker/sends.py:214"), with its
  wall time and its stages' executor CPU time.

Prints one table per phase, its jobs longest first (--top of them across the
check), and the check's total against the sum of its jobs: what is left is the
driver's own time (planning, Python) between jobs. With --floor, then the floor of
bench_checker.py (Spark parsing and hashing every input line) in the same JVM,
its wall time and executor CPU: the CPU the check spends beyond reading its input,
which no overlap of jobs can hide.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _ms(opt: Any) -> int | None:
    """A scala.Option[java.util.Date] in epoch milliseconds."""
    return opt.get().getTime() if opt.isDefined() else None


def spark_jobs(spark: Any, since_ms: int) -> list[dict[str, Any]]:
    """The jobs submitted since ``since_ms`` (epoch ms): call site, start, wall
    seconds and executor CPU seconds, from the driver's status store."""
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()
    cpu: dict[int, float] = {}
    # (statuses, details, with summaries, quantiles, task statuses): every stage, bare
    stages = store.stageList(None, False, False, sc._gateway.new_array(sc._jvm.double, 0),
                             None)
    for i in range(stages.size()):
        s = stages.apply(i)
        cpu[s.stageId()] = cpu.get(s.stageId(), 0.0) + s.executorCpuTime() / 1e9
    out = []
    jobs = store.jobsList(None)
    for i in range(jobs.size()):
        j = jobs.apply(i)
        start, end = _ms(j.submissionTime()), _ms(j.completionTime())
        if start is None or end is None or start < since_ms:
            continue
        ids = j.stageIds()
        said = j.description()
        out.append({"site": said.get() if said.isDefined() else _site(j.name()),
                    "start": start / 1e3, "wall": (end - start) / 1e3,
                    "cpu": sum(cpu.get(ids.apply(k), 0.0) for k in range(ids.size()))})
    return sorted(out, key=lambda r: r["start"])


@contextmanager
def describe_jobs(spark: Any) -> Iterator[None]:
    """Within the block, name each job the checker starts by the checker's line
    that started it (Spark's own call site is "<unknown>" for jobs started in a
    thread): the DataFrame actions the checker uses set the job description first."""
    from pyspark.sql.classic.dataframe import DataFrame

    sc = spark.sparkContext

    def caller() -> str:
        for fr in reversed(traceback.extract_stack()[:-2]):
            path = Path(fr.filename)
            # checker.spark.keep is called from a dozen places: name the one that called it
            if (path.is_relative_to(ROOT) and not path.is_relative_to(ROOT / "bench")
                    and not (path == ROOT / "checker" / "spark.py" and fr.name == "keep")):
                return f"{fr.name} at {path.relative_to(ROOT)}:{fr.lineno}"
        return "?"

    def described(name: str, action: Callable[..., Any]) -> Callable[..., Any]:
        def run(self: Any, *a: Any, **k: Any) -> Any:
            sc.setJobDescription(f"{name} in {caller()}")
            try:
                return action(self, *a, **k)
            finally:
                sc.setJobDescription(None)  # type: ignore[arg-type]
        return run

    names = ("collect", "count", "localCheckpoint", "toLocalIterator")
    actions = {n: getattr(DataFrame, n) for n in names}
    for n, action in actions.items():
        setattr(DataFrame, n, described(n, action))
    try:
        yield
    finally:
        for n, action in actions.items():
            setattr(DataFrame, n, action)


def _site(name: str) -> str:
    """"collect at /path/to/checker/sends.py:214" -> "collect at checker/sends.py:214"."""
    action, _, where = name.partition(" at ")
    path = Path(where.split(":")[0])
    try:
        where = str(path.relative_to(ROOT)) + where[len(str(path)):]
    except ValueError:
        pass
    return f"{action} at {where}" if where else name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--repeat", type=int, default=2, help="checks in one JVM; the last is shown")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--top", type=int, default=40, help="jobs listed, longest first")
    ap.add_argument("--floor", action="store_true",
                    help="then measure the floor (bench_checker.py) in the same JVM")
    args = ap.parse_args(argv)
    if not args.path.exists():
        print(f"check_stages: {args.path}: no such run or batch", file=sys.stderr)
        return 2
    os.environ["ISRLAB_SPARK_DRIVER_MEMORY"] = args.driver_memory
    from checker import api
    from checker.spark import get_session

    spark = get_session()
    phases: list[tuple[float, str]] = []

    def said(msg: str) -> None:
        if not msg.startswith("still "):
            phases.append((time.time(), msg))

    with describe_jobs(spark):
        for n in range(args.repeat):
            phases.clear()
            t0 = time.time()
            api.check_runs([args.path], progress=said)
            total = time.time() - t0
            print(f"check {n + 1}/{args.repeat}: {total:.1f} s", file=sys.stderr)
    phases.append((time.time(), "end"))
    jobs = spark_jobs(spark, int(t0 * 1e3))
    print(f"\n{args.path}: the last check, {total:.1f} s, {len(jobs)} Spark jobs "
          f"({sum(j['wall'] for j in jobs):.1f} s of jobs, "
          f"{sum(j['cpu'] for j in jobs):.1f} s of executor CPU)\n")
    print("| phase | wall s | jobs | jobs' wall s | executor CPU s |")
    print("|---|---:|---:|---:|---:|")
    for (start, msg), (end, _) in zip(phases, phases[1:], strict=False):
        mine = [j for j in jobs if start <= j["start"] < end]
        print(f"| {msg} | {end - start:.1f} | {len(mine)} | {sum(j['wall'] for j in mine):.1f} | "
              f"{sum(j['cpu'] for j in mine):.1f} |")
    print("\n| job (the Python line that started it) | wall s | executor CPU s |")
    print("|---|---:|---:|")
    for j in sorted(jobs, key=lambda j: -j["wall"])[:args.top]:
        print(f"| {j['site']} | {j['wall']:.1f} | {j['cpu']:.1f} |")
    if args.floor:
        _print_floor(spark, args.path, total, sum(j["cpu"] for j in jobs))
    return 0


def _print_floor(spark: Any, path: Path, check_s: float, check_cpu: float) -> None:
    """The floor's wall and executor CPU, measured now in the check's JVM, beside the
    check's: CPU over wall is how busy the cores were (1.0: one core)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_checker import _floor  # bench/ is on the path: the floor is defined once

    from contract.rundir import discover

    t0 = time.time()
    _floor(spark, discover([path]))
    wall = time.time() - t0
    cpu = sum(j["cpu"] for j in spark_jobs(spark, int(t0 * 1e3)))
    print("\n| | wall s | executor CPU s | CPU / wall |")
    print("|---|---:|---:|---:|")
    for name, w, c in (("floor", wall, cpu), ("check", check_s, check_cpu)):
        print(f"| {name} | {w:.1f} | {c:.1f} | {c / w:.2f} |")
    print(f"| check / floor | {check_s / wall:.2f}x | {check_cpu / cpu:.2f}x | |")


if __name__ == "__main__":
    sys.exit(main())
