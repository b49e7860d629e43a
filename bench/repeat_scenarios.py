"""Repeat each scenario N times per protocol version and count expected verdicts.

    python bench/repeat_scenarios.py [-n 20] [--scenario NAME ...] [--protocol V ...]

Every run goes through the same harness as `isrlab reproduce`; the runs are then
checked in one Spark job (as a nightly batch is). Prints, per scenario and
version, how many runs gave the verdict docs/catalogue.md expects (verdict `valid`
with exactly the expected anomaly kinds), the harness time per run, and each
scenario's time to verdict: one `isrlab reproduce` timed from the command line
(cluster + steps + Spark checker + report), as a user meets it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contract import PROTOCOLS  # noqa: E402
from harness.backends import reaper  # noqa: E402
from harness.errors import Interrupted  # noqa: E402
from harness.progress import Progress  # noqa: E402
from harness.run.assertions import judge  # noqa: E402
from harness.run.runner import RunOptions, run_scenario  # noqa: E402
from harness.scenario.loader import all_variants, list_scenarios  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20, help="runs per scenario and version")
    ap.add_argument("--scenario", action="append", help="default: every shipped scenario")
    ap.add_argument("--protocol", action="append", choices=PROTOCOLS,
                    help="default: every version")
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--port", type=int, default=19192,
                    help="local: every node's port; docker: the first host port")
    ap.add_argument("--runs-dir", type=Path, help="default: a temporary directory")
    ap.add_argument("--no-reproduce-timing", action="store_true",
                    help="skip the timed `isrlab reproduce` per scenario")
    args = ap.parse_args()
    reaper.install_signal_handlers()  # Ctrl-C: the current run tears down, then we stop

    # Every variant of each scenario is a row of its own (run_name NAME-VARIANT).
    scenarios = [v for s in list_scenarios() if not args.scenario or s.name in args.scenario
                 for v in all_variants(s)]
    protocols = args.protocol or list(PROTOCOLS)
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="isrlab-bench-"))
    print(f"runs in {runs_dir}", flush=True)

    records = []
    for s in scenarios:
        for p in protocols:
            if not s.reachable_at(p):  # no path there to run (the scenario's `reachable`)
                print(f"- {s.run_name} {p}: not reachable", flush=True)
                continue
            for i in range(args.n):
                rec = run_scenario(s, RunOptions(protocol=p, runs_dir=runs_dir, seed=i,
                                                 backend=args.backend,
                                                 backend_options={"port": args.port}),
                                   Progress(quiet=True))
                if isinstance(rec.error, Interrupted):
                    print(f"\n{rec.error}")
                    return 3
                records.append((s, p, rec))
                mark = "." if rec.error is None else "x"
                print(mark, end="", flush=True)
            print(f" {s.run_name} {p}", flush=True)

    from checker.api import check_runs

    # One Spark job per scenario: a run the checker rejects costs only its scenario.
    results: dict[Path, object] = {}
    failures: dict[str, str] = {}
    for s in scenarios:
        done = [r for sc, _, r in records if sc is s and r.error is None]
        t0 = time.monotonic()
        try:
            for res in check_runs([r.run_dir for r in done]):
                results[Path(res.run_dir).resolve()] = res
        except Exception as e:
            failures[s.name] = " ".join(str(e).split())
        print(f"checked {len(done)} run(s) of {s.name} in one Spark job: "
              f"{time.monotonic() - t0:.1f}s", flush=True)
    print()

    print(f"{'scenario':32} {'version':8} {'expected':>9} {'run s (mean/max)':>17}")
    all_ok = True
    for s in scenarios:
        for p in protocols:
            if not s.reachable_at(p):
                print(f"{s.run_name:40} {p:8} {'not reachable':>9}")
                continue
            rows = [r for sc, pv, r in records if sc is s and pv == p]
            want = set(s.expect_for(p))
            ok = 0
            for r in rows:
                res = results.get(r.run_dir.resolve())
                # The figure assertions too: a failed one makes the verdict invalid.
                if res is not None and judge(r.run_dir, res.verdict)[0] == "valid" and \
                        {a["kind"] for a in res.anomalies} == want:
                    ok += 1
            all_ok &= ok == len(rows)
            times = [r.elapsed for r in rows]
            incomplete = sum(r.error is not None for r in rows)
            note = f"  ({incomplete} incomplete)" if incomplete else ""
            print(f"{s.run_name:40} {p:8} {ok:>4}/{len(rows):<4} "
                  f"{statistics.mean(times):8.2f}/{max(times):.2f}{note}")

    for name, why in failures.items():
        print(f"checker failed on {name}: {why}")

    if not args.no_reproduce_timing:
        print("\ntime to verdict (one `isrlab reproduce`, wall clock):")
        for s in scenarios:
            p = next((v for v in protocols if s.reachable_at(v)), None)
            if p is None:
                continue
            t0 = time.monotonic()
            r = subprocess.run(
                [sys.executable, "-m", "harness.cli", "reproduce", s.name, "--protocol", p,
                 "--backend", args.backend, "--json", "--port", str(args.port),
                 "--runs-dir", str(runs_dir)],
                capture_output=True, text=True, cwd=ROOT)
            elapsed = time.monotonic() - t0
            try:
                verdict = json.loads(r.stdout.strip().splitlines()[-1])["runs"][0]["verdict"]
            except (IndexError, KeyError, json.JSONDecodeError):
                verdict = f"exit {r.returncode}"
            print(f"  {s.name:32} {p:8} {elapsed:6.1f}s  verdict {verdict}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
