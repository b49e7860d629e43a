"""Time to verdict: `isrlab reproduce NAME --protocol V` from the command to its
exit, as a user meets it, on the local backend.

    python bench/time_to_verdict.py [-n 3] [--protocol 0.10] [--scenario NAME ...]

Three conditions per scenario, alternated so that drift hits them alike:
  cold      no checker server running (it starts with the command, its JVM from
            the class-data archive when one exists);
  warm      a checker server of this version is up (a check ran in the last ten
            minutes): the cold run's, --settle seconds earlier (a person reading
            its report; the server goes on warming up meanwhile);
  no-server --no-server: the check in the command's own process, a fresh JVM.
With --first-ever the class-data archive is removed before each cold run (a
machine that never checked), and the benchmark holds the archive builders' lock
throughout, so that no builder (started as a server exits) writes one under it;
without it, `isrlab checker setup` (the README's installation step) runs first.
With --drop-caches (root) the kernel's page cache is emptied before each cold
run, as after a reboot: the JVM, Spark's jars and the archive come from disk.
Prints a table (median and max per condition) and the cluster part (the run's own
elapsed_s from --json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import Steal, speed_line  # noqa: E402 - bench/ is the script's own path

from checker import client  # noqa: E402
from checker.archive import build_in_background, build_lock  # noqa: E402
from checker.spark import cds_archive  # noqa: E402

# From the command to the verdict: a cold machine, and one that checked in the last
# ten minutes (issue 17).
TARGETS = {"cold": 15.0, "warm": 8.0}
SHIPPED = ["kip101-hw-truncation-loss", "kip101-power-loss-divergence",
           "kip279-unclean-divergence"]


def reproduce(name: str, protocol: str, runs_dir: Path, port: int,
              *extra: str) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if k != "ISRLAB_CHECKER_SERVER"}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "harness.cli", "reproduce", name, "--protocol",
                          protocol, "--runs-dir", str(runs_dir), "--port", str(port), "--json",
                          *extra], cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if out.returncode not in (0, 1):
        raise SystemExit(f"{name}: exit {out.returncode}: {out.stderr.strip()[-500:]}")
    return wall, json.loads(out.stdout)


def wait_stopped() -> None:
    client.stop()
    deadline = time.monotonic() + 120
    while client.read_info() is not None and time.monotonic() < deadline:
        time.sleep(0.2)


def drop_page_cache() -> None:
    """Write the dirty pages out, then empty the page cache (root only)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as e:
        raise SystemExit(f"--drop-caches: cannot write /proc/sys/vm/drop_caches: {e}") from None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=3, help="repeats per scenario and condition")
    p.add_argument("--protocol", default="0.10")
    p.add_argument("--scenario", action="append", help=f"default: {', '.join(SHIPPED)}")
    p.add_argument("--port", type=int, default=28092)
    p.add_argument("--settle", type=float, default=60.0,
                   help="seconds between the cold run and the warm one (default 60)")
    p.add_argument("--first-ever", action="store_true",
                   help="remove the class-data archive before each cold run")
    p.add_argument("--drop-caches", action="store_true",
                   help="empty the kernel's page cache before each cold run (root)")
    args = p.parse_args()
    print(speed_line(), flush=True)
    times: dict[tuple[str, str], list[float]] = {}
    cluster: dict[str, list[float]] = {}
    if not args.first_ever:  # the README's installation step
        subprocess.run([sys.executable, "-m", "harness.cli", "checker", "setup"], cwd=ROOT,
                       check=True)
    with (build_lock(wait=True) if args.first_ever else contextlib.nullcontext()), \
            tempfile.TemporaryDirectory(prefix="isrlab-ttv-") as tmp:
        runs = Path(tmp)
        for i in range(args.n):
            for name in args.scenario or SHIPPED:
                wait_stopped()
                if args.first_ever:
                    cds_archive().unlink(missing_ok=True)
                for cond, extra in (("cold", ()), ("warm", ()), ("no-server", ("--no-server",))):
                    if cond == "warm":
                        time.sleep(args.settle)
                    if cond == "cold" and args.drop_caches:
                        drop_page_cache()
                    info = client.read_info() or {}
                    steal = Steal()
                    wall, summary = reproduce(name, args.protocol, runs, args.port, *extra)
                    times.setdefault((name, cond), []).append(wall)
                    cluster.setdefault(name, []).append(summary["elapsed_s"])
                    print(f"  {i + 1}/{args.n} {name:30} {cond:9} {wall:6.2f} s "
                          f"(cluster {summary['elapsed_s']:.2f} s, {summary.get('verdict')}, "
                          f"{steal.text()}"
                          + (f"; server had run {info.get('checks', 0)} check(s) and "
                             f"{info.get('warmup_checks', 0)} warm-up check(s))"
                             if cond == "warm" else ")"),
                          flush=True)
        wait_stopped()
    if args.first_ever:
        build_in_background()  # the machine's archive again, as its servers would have
    print(f"\nscenario (--protocol {args.protocol})   cluster   cold (med/max)   "
          "warm (med/max)   no-server (med/max)")
    for name in args.scenario or SHIPPED:
        cells = [f"{statistics.median(times[name, c]):5.1f} / {max(times[name, c]):5.1f} s"
                 for c in ("cold", "warm", "no-server")]
        print(f"{name:32} {statistics.median(cluster[name]):5.1f} s   " + "   ".join(cells))
    # Issue 17's targets, over every run of the condition (not the medians).
    for cond, target in TARGETS.items():
        worst = max(t for (_, c), ts in times.items() if c == cond for t in ts)
        print(f"target {cond} <= {target:g} s: {'met' if worst <= target else 'NOT met'} "
              f"(slowest {worst:.1f} s)")
    print(speed_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
