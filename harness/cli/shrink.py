"""`isrlab shrink RUN_DIR`: the smallest schedule found that still shows the run's
anomaly, written as a scenario YAML (harness.chaos.shrink makes the candidates).

Each round simulates its candidates on the sim backend with the run's seed and
checks them in one batch; the smallest candidate that still shows the kind
becomes the next round's start. Packages go first (delta debugging: halves,
quarters, ... single packages), then the workload (rate, producers, the
background consumer), then idle time. The result is exported as `isrlab
export` writes a scenario, to --out (default: ./<name>.yaml).

Exit status: 0 when written; 2 for bad input (not a sim chaos run, no anomaly
to keep, a kind it does not show, an --out -- or without it the current
directory -- or the run's directory it cannot write: said before any work);
the checker's status if a check fails.
A CLI module: it wires the harness to the checker (tests/test_layering.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from broker.sim_cluster import Network
from checker import client
from checker.errors import CheckerError
from contract import ANOMALY_KINDS
from contract.rundir import count_ops, read_meta
from harness.chaos.export import export_scenario, found_kinds
from harness.chaos.runs import ChaosConfig, chaos_run
from harness.chaos.shrink import (
    Candidate,
    compressed,
    config_of,
    configured,
    lighter,
    start,
    without_chunks,
)
from harness.cli import batchcheck, flags
from harness.errors import UsageError, one_line
from harness.progress import Progress
from harness.run.runner import RunOptions, run_scenario


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    s = flags.command_parser(
        sub, "shrink", "a sim chaos run's anomaly in a smaller schedule, as a scenario YAML",
        description="Find a smaller fault schedule that still shows a sim chaos run's "
                    "anomaly, simulating candidates with the run's seed, and write it as a "
                    "scenario YAML.",
        example="isrlab shrink runs/BATCH/RUN --kind lost-write --out small.yaml",
        exit_codes="""0  shrunk and written
2  bad input: not a sim chaos run, no such anomaly, a file that cannot be written
3  interrupted""",
        docs="sim.md")
    s.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a sim chaos run's directory")
    s.add_argument("--kind", choices=ANOMALY_KINDS,
                   help="the anomaly kind to keep (default: the first the run shows)")
    s.add_argument("--out", type=flags.typed(flags.output_file), metavar="FILE",
                   help="default: ./<name>.yaml")
    flags.add_no_server_flag(s)
    s.add_argument("--quiet", action="store_true", help="no progress lines")
    return s


class Shrinker:
    def __init__(self, run_dir: Path, cfg: ChaosConfig, seed: int, kind: str,
                 progress: Progress, use_server: bool | None,
                 network: Network | None = None) -> None:
        self.cfg, self.seed, self.kind = cfg, seed, kind
        # The run's message faults (run.json `network`): every candidate has them.
        self.options = {"network": network or Network()}
        self.progress, self.use_server = progress, use_server
        self.work = run_dir.parent / f"{run_dir.name}-shrink"
        self.source = run_dir.name
        self.rounds = 0

    def check(self, run_dirs: list[Path]) -> list[Any]:
        return client.check(run_dirs, use_server=self.use_server)

    def first_kept(self, cands: list[Candidate]) -> tuple[Candidate, Path] | None:
        """Simulate and check one round; the smallest candidate that keeps the kind."""
        if not cands:
            return None
        self.rounds += 1
        dirs = []
        for c in cands:
            scenario, meta = chaos_run(configured(self.cfg, c), self.seed, c.schedule())
            meta["shrink"] = {"from": self.source, "round": self.rounds, "what": c.what}
            rec = run_scenario(scenario, RunOptions(
                protocol=self.cfg.protocol, backend="sim", seed=self.seed,
                runs_dir=self.work, meta=meta, backend_options=self.options),
                Progress(quiet=True))
            dirs.append(rec.run_dir)
        results = self.check(dirs)
        kept = sorted((c.size(), i) for i, (c, r) in enumerate(zip(cands, results, strict=True))
                      if any(a["kind"] == self.kind for a in r.anomalies))
        self.progress.line(f"round {self.rounds}: {len(cands)} candidate(s), {len(kept)} "
                           f"keep {self.kind}")
        for i, d in enumerate(dirs):
            if not kept or i != kept[0][1]:
                shutil.rmtree(d, ignore_errors=True)
        if not kept:
            return None
        best = cands[kept[0][1]]
        self.progress.line(f"  kept: {best.what} -> {_size(best)}")
        return best, dirs[kept[0][1]]

    def run(self, best: Candidate, best_dir: Path) -> tuple[Candidate, Path]:
        chunk = max(1, len(best.packages) // 2)
        while best.packages:
            got = self.first_kept(without_chunks(best, chunk))
            if got is not None:
                (best, best_dir) = got
                chunk = max(1, min(chunk, len(best.packages) // 2))
            elif chunk == 1:
                break
            else:
                chunk //= 2
        while (got := self.first_kept(lighter(best))) is not None:
            best, best_dir = got
        got = self.first_kept(compressed(best))
        if got is not None:
            best, best_dir = got
        return best, best_dir


def _size(c: Candidate) -> str:
    return (f"{len(c.packages)} fault package(s), {c.producers} producer(s) at "
            f"{c.rate:g}/s, {c.consumers} consumer(s), final read at {c.final_read_at():.1f}s")


def run(args: argparse.Namespace) -> int:
    run_dir = args.run_dir.resolve()
    meta = read_meta(run_dir)
    cfg = config_of(meta)
    batchcheck.require_master()  # ISRLAB_SPARK_MASTER: before the first candidate runs
    # Where it will write, checked before any work: the candidates' directory
    # beside the run, and (without --out) the scenario in the current directory.
    flags.check_writable_dir(run_dir.parent, "cannot write the candidates beside the run")
    if args.out is None:
        flags.check_writable_dir(Path.cwd(), "cannot write the scenario (no --out)")
    progress = Progress(sys.stdout, quiet=args.quiet)
    server = flags.use_server(args)
    found = found_kinds(run_dir)
    try:
        if not found:  # not checked yet (or nothing found: the check says so again)
            progress.line(f"checking {run_dir} first")
            found = sorted({a["kind"] for a in client.check([run_dir],
                                                            use_server=server)[0].anomalies})
        if not found:
            raise UsageError(f"{run_dir} shows no anomaly: nothing to keep while shrinking")
        kind = args.kind or found[0]
        if kind not in found:
            raise UsageError(f"{run_dir} shows {', '.join(found)}, not {kind}")
        first = start(cfg, meta["chaos"]["schedule"])
        before = count_ops(run_dir)
        progress.line(f"shrinking {run_dir.name} ({_size(first)}, {before} ops), "
                      f"keeping {kind}; candidates in {run_dir.name}-shrink/")
        network = Network(**(meta.get("network") or {}))
        shrinker = Shrinker(run_dir, cfg, int(meta["seed"]), kind, progress, server,
                            network)
        best, best_dir = shrinker.run(first, run_dir)
    except CheckerError as e:
        print(f"isrlab: checker: {one_line(e)}", file=sys.stderr)
        return e.exit_code
    if best_dir == run_dir:
        progress.line("no smaller schedule keeps it: exporting the run itself")
    # best_dir was checked in its round (or is the checked run itself): its
    # check/summary.json gives export the kinds to expect.
    exported = export_scenario(best_dir)
    out = args.out or Path(f"{exported.name}.yaml")
    flags.write_output(out, exported.text)
    print(f"shrunk {kind}: {len(first.packages)} -> {len(best.packages)} fault package(s), "
          f"{before} -> {count_ops(best_dir)} ops, final read at "
          f"{first.final_read_at():.1f}s -> {best.final_read_at():.1f}s, "
          f"in {shrinker.rounds} round(s)")
    print(f"run: {best_dir}")
    net = "".join(f" --net-{k} {v:g}" for k, v in (meta.get("network") or {}).items() if v)
    print(f"scenario: {out} (isrlab reproduce {out} --protocol {cfg.protocol} --backend sim "
          f"--seed {meta['seed']}{net})")
    return 0
