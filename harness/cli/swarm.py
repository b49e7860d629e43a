"""`isrlab swarm`: simulated chaos runs spread over Spark tasks, checked in one batch.

    isrlab swarm --protocol V --runs N [--seed S] [--master URL] [--faults ...]
                 [--acks A] [--set KEY=VALUE ...] [--time-limit 60s] [--runs-dir DIR]

Seeds S..S+N-1 go to Spark tasks; each task simulates the chaos run of each of
its seeds on the sim backend (harness.chaos.swarm.simulate: the configuration drawn
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
import time
from pathlib import Path
from typing import Any

from broker.sim_cluster import Network
from checker.errors import CheckerError
from checker.spark import get_session, task_slices
from harness.chaos.runs import parse_sets
from harness.chaos.swarm import SWARM_DEFAULTS, SwarmSpec, simulate
from harness.cli import batchcheck, flags
from harness.errors import UsageError, one_line
from reports.render import INDEX

SWARM = "swarm"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    s = flags.command_parser(
        sub, "swarm", "simulated chaos runs with randomized configurations, "
                      "spread over Spark tasks and checked in one batch",
        description="Simulate N chaos runs on the sim backend, seeds S..S+N-1, each "
                    "drawing its fault mix, acks and configuration from its seed (what "
                    "--faults, --acks and --set do not pin), as Spark tasks; check them "
                    "in one batch and say which seeds found which anomaly kinds.",
        example="isrlab swarm --protocol 0.10 --runs 100 --seed 0",
        exit_codes="""0  no run shows an anomaly
1  a run shows an anomaly
2  bad input, before anything starts
3  a run could not complete or be checked, or interrupted""",
        docs="sim.md#swarm")
    flags.add_protocol_flag(s)
    flags.add_runs_flag(s, "simulated runs, one per seed", default=None, required=True)
    flags.add_seed_flag(s, "seeds S..S+N-1, one run each")
    flags.add_master_flag(s)
    flags.add_chaos_flags(s, drawn=True)
    flags.add_time_limit_flag(s, default=SWARM_DEFAULTS["time_limit"])
    s.add_argument("--rate", type=flags.typed(flags.positive_float), default=SWARM_DEFAULTS["rate"],
                   help=f"records per second per run (default {SWARM_DEFAULTS['rate']:g})")
    flags.add_runs_dir_flag(s)
    flags.add_network_flags(s)
    flags.add_output_flags(verbose=True, p=s)
    return s


def run(args: argparse.Namespace) -> int:
    broker_cfg, controller_cfg = parse_sets(args.sets)
    spec = SwarmSpec.of(args.protocol, time_limit=args.time_limit, faults=args.faults,
                        acks=flags.acks_of(args), broker_config=broker_cfg,
                        controller_config=controller_cfg, rate=args.rate,
                        network=Network(args.net_loss, args.net_duplicate))
    if args.master is not None and args.master.startswith("sc://"):
        raise UsageError("isrlab swarm runs its simulations as Spark tasks, which Spark "
                         "Connect (sc://) does not offer; give local[N] or spark://HOST:PORT")
    batchcheck.require_master(args.master)  # before the batch directory and the Spark JVM
    batch = batchcheck.new_batch(args.runs_dir, f"{SWARM}-{args.protocol}").resolve()
    batch_id = batch.name
    progress = flags.progress_of(args)
    seeds = list(range(args.seed, args.seed + args.runs))
    progress.line(f"swarm: {args.runs} simulated run(s) of {spec.base.time_limit:g}s under "
                  f"{args.protocol}, seeds {seeds[0]}..{seeds[-1]} (--seed {args.seed}); "
                  f"runs in {batch}")
    t0 = time.monotonic()
    try:
        spark = get_session(args.master, niced_jit=False)  # its first check is a big batch
    except CheckerError as e:  # a master that answered, but Spark did not start on it
        raise UsageError(one_line(e)) from None
    batch.mkdir(parents=True)
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
    results = batchcheck.check_batch_or_exit(
        [Path(s["run_dir"]) for s in sims], batch / INDEX, progress, batch,
        master=args.master, use_server=False, reports_for_findings=True, render_on=sc)
    if isinstance(results, int):
        return results
    total = time.monotonic() - t0
    by_run = {str(r.run_dir): r for r in results}
    found: dict[str, list[int]] = {}
    runs = []
    for sim in sorted(sims, key=lambda s: s["seed"]):
        r = by_run.get(sim["run_dir"])
        for k in (r.summary.get("found") or {}) if r is not None else {}:
            found.setdefault(k, []).append(sim["seed"])
        extra = {} if r is not None else {"seed": sim["seed"], "protocol": args.protocol,
                                          "error": sim["error"] or "not checked"}
        runs.append({**batchcheck.run_json(r, sim["run_dir"]), **extra, "config": sim["config"]})
        if r is not None and r.anomalies and not args.json:
            print(f"seed {sim['seed']}: {batchcheck.outcome_line(r)} "
                  f"({_config_line(sim['config'])})\n  report: {runs[-1]['report']}")
    code = batchcheck.chaos_exit_code(results, [])
    if args.json:
        batchcheck.print_result_json(
            "swarm", code, runs, args.seed, batch=str(batch), protocol=args.protocol,
            seeds={"first": args.seed, "count": args.runs}, spec=spec.as_dict(),
            found={k: len(v) for k, v in sorted(found.items())},
            finding_seeds={k: v for k, v in sorted(found.items())},
            seconds=round(total, 1), simulate_seconds=round(took, 1),
            check_seconds=round(total - took, 1),
            runs_per_minute=round(len(sims) / total * 60, 1),
            ops=sum(s.get("ops", 0) for s in sims), index=str(batch / INDEX))
    else:
        batchcheck.print_tally(results)
        kinds = "; ".join(f"{k} in {len(v)} seed(s)" for k, v in sorted(found.items()))
        print(f"found: {kinds or 'nothing'} ({len(sims)} runs, {total:.1f}s, "
              f"{len(sims) / total * 60:.1f} runs/min with the check)")
        print(f"index: {batch / INDEX}")
    return code


def _config_line(cfg: dict[str, Any]) -> str:
    b = cfg["broker"]
    return (f"faults {cfg['faults']}, acks {cfg['acks']}, {cfg['brokers']} brokers, "
            f"min.insync.replicas {b.get('min.insync.replicas')}, unclean "
            f"{'on' if b.get('unclean.leader.election.enable') else 'off'}")
