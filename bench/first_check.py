"""A fresh driver JVM's start and first check, by class-data archive condition.

    python bench/first_check.py RUN_DIR [-n 3]

Each measurement is a new process: start the Spark session, then check
RUN_DIR once (phases timed from the checker's progress lines). Conditions,
alternated so that drift hits them alike:
  none       no archive (a private, empty cache directory);
  recording  no archive, the JVM recording one as it exits
             (-XX:ArchiveClassesAtExit: how the checker server ran before
             checker.archive);
  archive    from the archive in the user's cache (build it first: any check
             through the server does, or `python -m checker.archive`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import speed_line  # noqa: E402 - bench/ is the script's own path

from checker.spark import CDS_DUMP_ENV, cds_archive  # noqa: E402

_ONE = """
import json, sys, time
t0 = time.monotonic()
from pathlib import Path
from checker.api import check_runs
from checker.spark import get_session, shutdown
get_session()
t1 = time.monotonic()
phases, last = [], [t1]
def say(msg):
    now = time.monotonic(); phases.append([msg, round(now - last[0], 2)]); last[0] = now
check_runs([Path(sys.argv[1])], progress=say)
t2 = time.monotonic()
shutdown()  # wait for the JVM: a recording one writes its archive as it exits
print(json.dumps({"session": t1 - t0, "check": t2 - t1, "phases": phases[1:]}))
"""


def one(run: Path, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _ONE, str(run)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("-n", type=int, default=3)
    args = p.parse_args()
    print(speed_line(), flush=True)
    if not cds_archive().is_file():
        raise SystemExit(f"no class-data archive at {cds_archive()}: run "
                         "`python -m checker.archive` first")
    base = {k: v for k, v in os.environ.items() if k != CDS_DUMP_ENV}
    times: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="isrlab-first-check-") as tmp:
        empty = {**base, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        for i in range(args.n):
            conditions = {
                "none": empty,
                "recording": {**empty, CDS_DUMP_ENV: str(Path(tmp) / f"rec{i}.jsa")},
                "archive": base,
            }
            for name, env in conditions.items():
                r = one(args.run, env)
                times.setdefault(name, []).append((r["session"], r["check"]))
                print(f"  {i + 1}/{args.n} {name:9s} session {r['session']:5.2f} s  "
                      f"check {r['check']:5.2f} s  "
                      + " ".join(f"{t:.1f}" for _, t in r["phases"]), flush=True)
    print("\ncondition   session (med)   check (med)   both (med)")
    for name, ts in times.items():
        print(f"{name:9s}   {statistics.median(t[0] for t in ts):9.2f} s   "
              f"{statistics.median(t[1] for t in ts):9.2f} s   "
              f"{statistics.median(a + b for a, b in ts):8.2f} s")
    print(speed_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
