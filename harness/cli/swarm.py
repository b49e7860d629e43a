"""`isrlab swarm`: simulated chaos runs spread over Spark tasks, checked in one batch.

    isrlab swarm --protocol V --runs N [--seed S] [--master URL] [--faults ...]
                 [--acks A] [--set KEY=VALUE ...] [--time-limit 60s] [--runs-dir DIR]

Seeds S..S+N-1 go to Spark tasks; each task simulates the chaos run of each of
its seeds on the sim backend (harness.sim.swarm.simulate: the configuration drawn
from the seed, the schedule, the run) and writes its run directory under the
batch directory, which every task must reach (one machine, or shared storage
on a cluster). The checker then checks every run in one batch, on the same
Spark session, and the swarm prints which seeds found which anomaly kinds, with
their reports. The same seed simulates the same run again: `--runs 1 --seed S`
replays seed S exactly.

Exit status: 1 when any run shows an anomaly, 0 when none does, 3 when a run
could not complete or be checked, 2 for bad input (docs/sim.md#swarm).
A CLI module: it wires the harness to the checker (tests/test_layering.py).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from broker.sim_cluster import Network
from checker.spark import DEFAULT_MASTER, get_session, task_slices
from contract import PROTOCOLS
from harness.chaos.runs import parse_sets, parse_time_limit
from harness.cli import chaos as cli_chaos
from harness.cli.chaos import ACKS, _positive_float, _positive_int, _set_item, _type
from harness.errors import UsageError
from harness.progress import Progress
from harness.sim.swarm import SwarmSpec, simulate
from nemesis.schedule import FAULT_NAMES, parse_faults
from reports.render import INDEX

SWARM = "swarm"


def _faults(text: str) -> str:
    parse_faults(text)  # refused at parse time, before anything starts
    return text


def register(sub: argparse._SubParsersAction) -> None:
    cli = cli_chaos._cli()
    s = sub.add_parser("swarm", help="simulated chaos runs with randomized configurations, "
                                     "spread over Spark tasks and checked in one batch")
    s.add_argument("--protocol", required=True, choices=PROTOCOLS)
    s.add_argument("--runs", type=_type(_positive_int), required=True, metavar="N")
    s.add_argument("--seed", type=cli._seed, default=0,
                   help="seeds S..S+N-1, one run each (default 0)")
    s.add_argument("--master", help=f"Spark master (default: embedded {DEFAULT_MASTER}); "
                                    "local[*] or spark://HOST:PORT")
    s.add_argument("--faults", type=_type(_faults), metavar="FAULT[:TARGET],...",
                   help=f"pin the fault mix ({', '.join(FAULT_NAMES)}); default: each run "
                        "draws its own")
    s.add_argument("--acks", choices=sorted(ACKS), help="pin acks (default: drawn per run)")
    s.add_argument("--set", dest="sets", action="append", default=[], type=_type(_set_item),
                   metavar="KEY=VALUE", help="pin a broker or controller config key "
                                             "(repeatable); the others are drawn per run")
    s.add_argument("--time-limit", type=_type(parse_time_limit), default=60.0,
                   metavar="DURATION", help="virtual time of faults per run (default 60s)")
    s.add_argument("--rate", type=_type(_positive_float), default=10.0,
                   help="records per second per run (default 10)")
    s.add_argument("--runs-dir", type=Path, default=Path("runs"))
    cli.add_network_flags(s)
    cli._output_flags(s)


def dispatch(args: argparse.Namespace) -> int | None:
    return cmd_swarm(args) if args.command == SWARM else None


def cmd_swarm(args: argparse.Namespace) -> int:
    broker_cfg, controller_cfg = parse_sets(args.sets)
    spec = SwarmSpec.of(args.protocol, time_limit=args.time_limit,
                        faults=parse_faults(args.faults) if args.faults else None,
                        acks=ACKS[args.acks] if args.acks else None, broker_config=broker_cfg,
                        controller_config=controller_cfg, rate=args.rate,
                        network=Network(args.net_loss, args.net_duplicate))
    if args.master is not None and args.master.startswith("sc://"):
        raise UsageError("isrlab swarm runs its simulations as Spark tasks, which Spark "
                         "Connect (sc://) does not offer; give local[N] or spark://HOST:PORT")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    batch_id = f"{stamp}-{SWARM}-{args.protocol}-{secrets.token_hex(3)}"
    batch = (args.runs_dir / batch_id).resolve()
    batch.mkdir(parents=True)
    progress = Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)
    seeds = list(range(args.seed, args.seed + args.runs))
    progress.line(f"swarm: {args.runs} simulated run(s) of {spec.base.time_limit:g}s under "
                  f"{args.protocol}, seeds {seeds[0]}..{seeds[-1]}; runs in {batch}")
    t0 = time.monotonic()
    spark = get_session(args.master, niced_jit=False)  # its first check is a big batch
    sc = spark.sparkContext
    slices = task_slices(sc, len(seeds))
    where = str(batch)
    rdd = sc.parallelize(seeds, slices).map(lambda s: simulate(s, spec, where, batch_id))
    progress.line(f"simulating on {sc.master} in {slices} task(s)")
    sims: list[dict[str, Any]] = []
    for sim in rdd.toLocalIterator(prefetchPartitions=True):
        sims.append(sim)
        if len(sims) % max(1, len(seeds) // 10) == 0 or len(sims) == len(seeds):
            progress.line(f"  simulated {len(sims)}/{len(seeds)}")
    took = time.monotonic() - t0
    progress.line(f"simulated {len(sims)} run(s) in {took:.1f}s "
                  f"({len(sims) / took * 60:.0f} runs/min, Spark's start included)")
    for sim in sims:
        if sim["error"]:
            progress.line(f"seed {sim['seed']}: the run did not complete: {sim['error']}")
    results = cli_chaos.check_batch_or_exit(
        [Path(s["run_dir"]) for s in sims], batch / INDEX, progress, batch,
        master=args.master, use_server=False, reports_for_findings=True, render_on=sc)
    if isinstance(results, int):
        return results
    total = time.monotonic() - t0
    by_run = {str(r.run_dir): r for r in results}
    found: dict[str, list[int]] = {}
    rows = []
    for sim in sorted(sims, key=lambda s: s["seed"]):
        r = by_run.get(sim["run_dir"])
        kinds = sorted({a["kind"] for a in r.anomalies}) if r is not None else []
        for k in kinds:
            found.setdefault(k, []).append(sim["seed"])
        rows.append({"seed": sim["seed"], "run_dir": sim["run_dir"],
                     "verdict": r.verdict if r is not None else None, "kinds": kinds,
                     "report": cli_chaos._report(r) if r is not None else None,
                     "config": sim["config"]})
        if kinds and not args.json:
            print(f"seed {sim['seed']}: {', '.join(kinds)} ({_config_line(sim['config'])})\n"
                  f"  report: {rows[-1]['report']}")
    summary = {"batch": str(batch), "protocol": args.protocol, "runs": len(sims),
               "seeds": [seeds[0], seeds[-1]], "spec": spec.as_dict(),
               "found": {k: len(v) for k, v in sorted(found.items())},
               "finding_seeds": {k: v for k, v in sorted(found.items())},
               "seconds": round(total, 1), "simulate_seconds": round(took, 1),
               "check_seconds": round(total - took, 1),
               "runs_per_minute": round(len(sims) / total * 60, 1),
               "ops": sum(s.get("ops", 0) for s in sims),
               "index": str(batch / INDEX), "rows": rows}
    code = cli_chaos.chaos_exit_code(results, [])
    summary["exit_code"] = code
    if args.json:
        print(json.dumps(summary, default=str))
    else:
        kinds = "; ".join(f"{k} in {len(v)} seed(s)" for k, v in sorted(found.items()))
        print(f"found: {kinds or 'nothing'} ({len(sims)} runs, {total:.1f}s, "
              f"{summary['runs_per_minute']:g} runs/min with the check)")
        print(f"index: {batch / INDEX}")
    return code


def _config_line(cfg: dict[str, Any]) -> str:
    b = cfg["broker"]
    return (f"faults {cfg['faults']}, acks {cfg['acks']}, {cfg['brokers']} brokers, "
            f"min.insync.replicas {b.get('min.insync.replicas')}, unclean "
            f"{'on' if b.get('unclean.leader.election.enable') else 'off'}")
