"""`isrlab chaos`: random faults over a continuous workload, N runs checked in one
Spark batch (docs/chaos.md).

Exit status: 1 if any run shows an anomaly (also the prefix of an unfinished
run), else 3 if a run could not complete or be checked, else 0; 2 for bad input,
before anything starts. Ctrl-C stops the run going (its cluster torn down, its
history a checkable prefix), checks nothing and says how to check the completed
runs.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from checker.verdict import VALID
from harness.chaos.kafka_target import DEFAULT_PROTOCOL, DEFAULT_TOPIC, NO_FAULTS, external_target
from harness.chaos.runs import CHAOS, ChaosConfig, chaos_run, parse_sets
from harness.cli import batchcheck, flags
from harness.errors import HarnessError, Interrupted, UsageError
from harness.run.runner import RunOptions, RunRecord, run_scenario
from nemesis.schedule import parse_faults
from reports.render import INDEX, render_index


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    c = flags.command_parser(
        sub, "chaos", "random faults over a continuous workload: N runs, "
                      "checked in one Spark batch",
        description="Run a continuous produce/consume workload while a seeded schedule of "
                    "faults (kills, power cycles, partitions, pauses, ...) hits the "
                    "brokers; N runs, checked in one Spark batch, each run's report and "
                    "the batch's index page.",
        example="isrlab chaos --protocol 0.10 --time-limit 20s --runs 2 "
                "--faults kill,power-cycle",
        exit_codes="""0  no run shows an anomaly
1  a run shows an anomaly (also the prefix of an unfinished run)
2  bad input, before anything starts
3  a run could not complete or be checked, or interrupted""",
        docs="chaos.md")
    flags.add_protocol_flag(c)
    flags.add_backend_flag(c)
    flags.add_no_server_flag(c)
    flags.add_time_limit_flag(c)
    flags.add_runs_flag(c)
    flags.add_seed_flag(c, "run i (from 0) uses seed S+i")
    flags.add_chaos_flags(c, drawn=False)
    flags.add_client_flags(c)
    flags.add_runs_dir_flag(c)
    flags.add_port_flag(c)
    flags.add_hosts_flag(c)
    flags.add_network_flags(c)
    count = flags.typed(flags.positive_int)
    c.add_argument("--brokers", type=count, default=ChaosConfig.brokers, metavar="N",
                   help=f"brokers in the cluster (default {ChaosConfig.brokers})")
    c.add_argument("--partitions", type=count, default=ChaosConfig.partitions, metavar="N",
                   help="partitions of the topic, one consumer each (default "
                        f"{ChaosConfig.partitions})")
    c.add_argument("--producers", type=count, default=ChaosConfig.producers, metavar="N",
                   help=f"producer clients (default {ChaosConfig.producers})")
    c.add_argument("--rate", type=flags.typed(flags.positive_float), default=ChaosConfig.rate,
                   help="target records per second over all producers (default "
                        f"{ChaosConfig.rate:g})")
    c.add_argument("--batch", type=count, default=ChaosConfig.batch,
                   help="records per produce request at most, Kafka's batch.size "
                        f"(default {ChaosConfig.batch}; 1: one record per request)")
    c.add_argument("--linger", type=flags.duration("linger"), default=ChaosConfig.linger,
                   help="seconds a batch waits for more records, linger.ms (default "
                        f"{ChaosConfig.linger:g})")
    c.add_argument("--interval", type=flags.duration("interval"), default=ChaosConfig.interval,
                   help=f"mean seconds before each fault (default {ChaosConfig.interval:g})")
    c.add_argument("--duration", type=flags.duration("duration"), default=ChaosConfig.duration,
                   help=f"mean seconds a fault lasts (default {ChaosConfig.duration:g})")
    c.add_argument("--overlap", type=flags.typed(flags.probability), default=ChaosConfig.overlap,
                   help="probability that a package is compound: a second process fault "
                        "on another broker --gap later, both open together (default "
                        f"{ChaosConfig.overlap:g})")
    c.add_argument("--gap", type=flags.duration("gap"), default=None,
                   help="mean seconds between a compound package's two faults (default: "
                        "half the controller's session timeout)")
    c.add_argument("--quiet-period", type=flags.duration("quiet period"), default=ChaosConfig.quiet,
                   help=f"seconds of calm after each recovery (default {ChaosConfig.quiet:g})")
    c.add_argument("--keep", choices=("all", "anomalies"), default="all",
                   help="anomalies: delete the run directories that show none after the "
                        "check (default: keep all)")
    flags.add_master_flag(c)
    flags.add_junit_flag(c)
    c.add_argument("--results", type=Path, metavar="DIR",
                   help="append the results to this Parquet table")
    flags.add_output_flags(verbose=True, p=c)
    _add_target_flags(c)
    return c


def _add_target_flags(c: argparse.ArgumentParser) -> None:
    """--target kafka (an existing cluster: harness.chaos.kafka_target), --bootstrap,
    --topic; and what they change of the other flags: --protocol is needed only for
    isrlab's own cluster, and --faults takes `none` (the default there; faults
    need --hosts, a target hosts file)."""
    c.add_argument("--target", choices=("kafka",), default=None,
                   help="kafka: run the workload on an existing Kafka cluster (--bootstrap), "
                        "checked from the history alone; faults only with --hosts, a "
                        "target hosts file (kill, stop, pause; docs/chaos.md)")
    c.add_argument("--bootstrap", metavar="HOST:PORT[,...]",
                   help="--target kafka: the cluster's bootstrap servers")
    c.add_argument("--topic", default=DEFAULT_TOPIC, metavar="NAME",
                   help=f"--target kafka: the existing topic to use (default {DEFAULT_TOPIC})")
    actions = c._option_string_actions  # argparse's table of the flags added above
    actions["--protocol"].required = False  # checked in run(): not for --target kafka
    parse = flags.typed(parse_faults)
    actions["--faults"].type = lambda text: text.strip() if text.strip() == NO_FAULTS else (
        parse(text) and text)  # kept as given: run() parses it for its target
    actions["--faults"].default = None


def run(args: argparse.Namespace) -> int:
    args.faults_text = args.faults
    external = None
    if args.target == "kafka":
        external = external_target(args)  # UsageError before anything starts
        args.protocol = args.protocol or DEFAULT_PROTOCOL
        args.client = external.client
        args.partitions = external.partitions
        args.backend = "external"
        faults = external.faults
    else:
        if args.bootstrap or args.topic != DEFAULT_TOPIC:
            raise UsageError("--bootstrap and --topic apply to --target kafka only")
        if args.protocol is None:
            raise UsageError("--protocol VERSION is required: the Kafka version whose "
                             "replication protocol the brokers run")
        if args.faults_text == NO_FAULTS:
            raise UsageError("--faults none applies to --target kafka only: a chaos run on "
                             "isrlab's cluster injects faults")
        faults = parse_faults(args.faults_text or "kill")
    broker_cfg, controller_cfg = parse_sets(args.sets)
    cfg = ChaosConfig(protocol=args.protocol, time_limit=args.time_limit, faults=faults,
                      acks=flags.acks_of(args), broker_config=broker_cfg,
                      controller_config=controller_cfg, brokers=args.brokers,
                      partitions=args.partitions, producers=args.producers,
                      consumers=args.partitions, rate=args.rate, batch=args.batch,
                      linger=args.linger, interval=args.interval,
                      duration=args.duration, quiet=args.quiet_period,
                      overlap=args.overlap, gap=args.gap, client=args.client,
                      client_config=dict(args.client_config))
    if args.client_config and not args.client:
        raise UsageError("--client-config sets a client's settings: give --client too")
    cfg.broker_names()  # refuses a bad --brokers before anything starts
    batchcheck.require_master(args.master)  # not after every run has finished
    seed = args.seed
    batch = batchcheck.new_batch(args.runs_dir, f"{CHAOS}-{args.protocol}")
    batch_id = batch.name
    progress = flags.progress_of(args)
    options = flags.backend_options(args) if external is None else external.backend_options()
    faults = ",".join(str(f) for f in cfg.faults) or NO_FAULTS
    where = args.backend if external is None else f"{external.bootstrap} (existing cluster)"
    progress.line(f"chaos: {args.runs} run(s) of {cfg.time_limit:g}s under {args.protocol} "
                  f"on {where}, faults {faults}, acks {args.acks}, seed {seed} "
                  f"(run i uses seed {seed}+i); runs in {batch}")
    records: list[RunRecord] = []
    interrupted: HarnessError | None = None
    for i in range(args.runs):
        scenario, meta = (chaos_run(cfg, seed + i) if external is None
                          else external.run(cfg, seed + i))
        meta["chaos"].update(batch=batch_id, run=i + 1, runs=args.runs)
        record = run_scenario(scenario, RunOptions(
            protocol=args.protocol, backend=args.backend, seed=seed + i, runs_dir=batch,
            backend_options=options, meta=meta, status_every=batchcheck.STATUS_EVERY,
            status_prefix=f"run {i + 1}/{args.runs}", time_limit=cfg.time_limit), progress)
        records.append(record)
        if record.error is not None:
            progress.line(f"run {i + 1}/{args.runs} did not complete: {record.error}")
            if isinstance(record.error, Interrupted):
                interrupted = record.error
                break
    summary: dict[str, Any] = {"batch": str(batch), "protocol": args.protocol,
                               "faults": faults}
    if interrupted is not None:
        done = [r for r in records if r.error is None]
        print(f"isrlab: interrupted during run {len(records)}/{args.runs}; "
              f"{len(done)} completed run(s) and the interrupted one's prefix are in {batch}: "
              f"`isrlab check {batch}` checks them", file=sys.stderr)
        runs = [{**batchcheck.run_json(None, r.run_dir), "run_id": r.run_id,
                 "protocol": args.protocol, "seed": seed + i,
                 "error": str(r.error) if r.error else None} for i, r in enumerate(records)]
        return _finish(args, summary, interrupted.exit_code, seed, runs)
    results = batchcheck.check_batch_or_exit([r.run_dir for r in records], batch / INDEX, progress,
                                  batch, master=args.master, junit=args.junit,
                                  results=args.results, use_server=flags.use_server(args))
    if isinstance(results, int):
        return _finish(args, summary, results, seed, [])
    for i, r in enumerate(results):
        if not args.json:
            print(f"run {i + 1}/{len(results)} (seed {r.summary.get('seed')}): "
                  f"{batchcheck.outcome_line(r)}")
            for line in batchcheck.detail_lines(r, args.verbose):
                print(line)
            if r.anomalies:
                print(f"  run: {r.run_dir}\n  report: {batchcheck.report_of(r)}\n"
                      f"  export: isrlab export {r.run_dir} --out FILE")
    runs = [batchcheck.run_json(r, r.run_dir) for r in results]
    code = batchcheck.chaos_exit_code(results, records)
    if args.keep == "anomalies":
        for r in results:
            if not r.anomalies and r.verdict == VALID:
                shutil.rmtree(r.run_dir)
                progress.line(f"deleted {r.run_dir} (no anomaly; --keep anomalies)")
        render_index([r.summary for r in results if r.run_dir.exists()], batch / INDEX)
    summary["index"] = str(batch / INDEX)
    if not args.json:
        batchcheck.print_tally(results)
        print(f"index: {batch / INDEX}")
    return _finish(args, summary, code, seed, runs)


def _finish(args: argparse.Namespace, summary: dict[str, Any], code: int, seed: int,
            runs: list[dict[str, Any]]) -> int:
    if args.json:
        batchcheck.print_result_json("chaos", code, runs, seed, **summary)
    return code
