"""`isrlab reproduce NAME|PATH --protocol V`: run one scenario and check it.

`reproduce` answers "did the protocol keep its guarantees in this run?": 1 when
the run shows any consistency anomaly or its verdict is not valid, 0 when it is
clean, 3 for a run that did not finish, 2 for one the checker could not read
(docs/exit-codes.md), and 2, before anything starts, for a version the
scenario's path does not exist in (its `reachable`). `--runs N` runs it N times
and checks them in one batch ("reproduced k/N"); `--all-variants`, or `--runs N`
of a scenario with variants or figure assertions, runs its variants as cells
(one verdict line per run; a variant not reachable there is one line saying so).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from checker import client
from checker.errors import CheckerError
from checker.verdict import ERROR, EXIT_CODES, INCOMPLETE, VALID, RunResult
from harness.cli import batchcheck, cellrun, flags
from harness.errors import Interrupted, UsageError, one_line
from harness.run.runner import RunOptions, RunRecord, run_scenario
from harness.scenario.loader import Scenario, all_variants, find_scenario, load_scenario
from reports.render import INDEX


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    r = flags.command_parser(
        sub, "reproduce", "run one scenario and check it",
        description="Run one scenario (a shipped name or a YAML file) under one Kafka "
                    "version's replication protocol, check the run with the Spark checker "
                    "and say what happened to the data and whether that is what the "
                    "scenario documents for the version.",
        example="isrlab reproduce kip101-hw-truncation-loss --protocol 0.10 --backend sim",
        exit_codes="""0  no anomaly: the protocol kept its guarantees
1  an anomaly (even one the scenario documents), or not as documented
2  bad input; a version the scenario's path does not exist in; nothing started
3  the run could not complete, or was interrupted""",
        docs="scenarios.md, docs/verdicts.md")
    r.add_argument("scenario", metavar="NAME|PATH",
                   help="a shipped scenario (isrlab scenarios lists them) or a YAML file")
    flags.add_protocol_flag(r)
    flags.add_backend_flag(r)
    flags.add_seed_flag(r, "the run's seed; run i of --runs N uses S+i")
    flags.add_runs_dir_flag(r)
    flags.add_port_flag(r, "local: the port of every node (one 127.0.0.x address each); "
                     "docker: the first of one host port per node (P..P+brokers)")
    flags.add_hosts_flag(r)
    flags.add_base_image_flag(r, "docker: build the broker image on this base (e.g. "
                           "python:3.11-slim) instead of the debootstrapped one")
    flags.add_network_flags(r)
    flags.add_client_flags(r)
    flags.add_output_flags(verbose=True, p=r)
    flags.add_runs_flag(r, "run it N times, check them in one batch, print k/N reproduced")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--variant", metavar="X", help="run this variant of the scenario "
                                                  "(default: the first it declares)")
    g.add_argument("--all-variants", action="store_true",
                   help="run every variant, checked in one batch, one verdict line each")
    flags.add_no_server_flag(r)
    return r


def run(args: argparse.Namespace) -> int:
    batchcheck.require_master()  # ISRLAB_SPARK_MASTER: before any cluster starts
    if args.all_variants:
        return reproduce_variants(args)
    scenario = flags.with_client(args, load_scenario(find_scenario(args.scenario),
                                                     args.variant))
    # A version the path does not exist in: exit 2 before anything is started or
    # written (no cluster, no run directory), naming the scenario, version and why.
    scenario.require_reachable(args.protocol)
    if args.runs > 1:
        if scenario.variants or scenario.assertions:
            return reproduce_variants(args)
        return reproduce_runs(args, scenario)
    return reproduce_one(args, scenario)


def reproduce_one(args: argparse.Namespace, scenario: Scenario) -> int:
    progress = flags.progress_of(args)
    options = flags.backend_options(args)
    # (A runs directory no run can be made in was exit 2 before the command started:
    # flags.require_output_dirs.)
    # The checker's JVM starts while the cluster runs (a warm server: nothing to
    # do); not for a run refused before it starts.
    record = run_scenario(
        scenario,
        RunOptions(protocol=args.protocol, backend=args.backend, seed=args.seed,
                   runs_dir=args.runs_dir, backend_options=options,
                   on_start=lambda: client.prestart(use_server=flags.use_server(args))),
        progress,
    )
    expected = scenario.expect_for(args.protocol)
    summary: dict[str, Any] = {
        "scenario": scenario.name, "protocol": args.protocol, "backend": args.backend,
        "variant": scenario.variant, "elapsed_s": round(record.elapsed, 3),
    }
    unchecked = {"run_id": record.run_id, "run_dir": str(record.run_dir), "scenario": scenario.name,
                 "protocol": args.protocol, "seed": args.seed, "verdict": None, "data": None,
                 "documentation": None, "expected": expected, "found": {}, "report": None}
    if record.error is not None:
        return _finish(args, summary, record.error.exit_code, [unchecked],
                       error=str(record.error), incomplete=True)
    progress.line("checking ...")
    try:
        result = batchcheck.interruptible(client.check, [record.run_dir],
                               progress=lambda m: progress.line(f"  {m}"),
                               use_server=flags.use_server(args))[0]
    except CheckerError as e:
        return _finish(args, summary, e.exit_code, [unchecked], error=f"checker: {one_line(e)}")
    except batchcheck.CheckInterrupted as e:
        return _finish(args, summary, e.exit_code, [unchecked], error=str(e))
    if result.error is not None:  # the checker could not read what the run wrote
        return _finish(args, summary, result.exit_code,
                       [batchcheck.run_json(result, record.run_dir)],
                       error=f"checker: {result.error}")
    batchcheck.say_truncated([result])
    result = batchcheck.judged(result)
    report = batchcheck.render_report(record.run_dir)
    code = reproduce_exit_code(result)
    entry = batchcheck.run_json(result, record.run_dir, variant=scenario.variant,
                            assertions_failed=result.summary.get("assertions_failed") or [],
                            anomalies=_plain(result.anomalies))
    if not args.json:
        print(batchcheck.outcome_line(result))
        for line in batchcheck.detail_lines(result, args.verbose):
            print(line)
        print(f"run: {record.run_dir}")
        if report:
            print(f"report: {report}")
    return _finish(args, summary, code, [entry])


def reproduce_exit_code(result: RunResult) -> int:
    """1 if the run shows a consistency anomaly (expected or not) or is not valid;
    but 3 for a run that did not finish (verdict incomplete) and 2 for one the
    checker could not read (error), as for `check`."""
    if result.verdict in (INCOMPLETE, ERROR):
        return EXIT_CODES[result.verdict]
    return 1 if result.anomalies or result.verdict != VALID else 0


def _finish(args: argparse.Namespace, summary: dict[str, Any], code: int,
            runs: list[dict[str, Any]], error: str | None = None,
            incomplete: bool = False) -> int:
    if error is not None:
        summary["error"] = error
        for r in runs:
            if r["verdict"] is None:  # not checked: why, on the run too
                r["error"] = error
        print(f"isrlab: {error}", file=sys.stderr)
        if not args.json:
            print(f"run: {runs[0]['run_dir']}{' (incomplete)' if incomplete else ''}")
    if args.json:
        batchcheck.print_result_json("reproduce", code, runs, args.seed, **summary)
    return code


def _plain(x: Any) -> Any:
    """Checker objects (dataclasses or dicts) as JSON-able data."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.asdict(x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


# -- --runs N ------------------------------------------------------------------


def reproduce_runs(args: argparse.Namespace, scenario: Scenario) -> int:
    """The scenario N times, checked in one batch; "reproduced k/N": the runs whose
    verdict is valid (every expected kind found, nothing unexpected)."""
    progress = flags.progress_of(args)
    options = flags.backend_options(args)
    batch = args.runs_dir / f"{batchcheck.stamp()}-{scenario.name}-{args.protocol}-x{args.runs}"
    progress.line(f"{args.runs} run(s) of {scenario.name} under {args.protocol}, seeds "
                  f"{args.seed}..{args.seed + args.runs - 1}; runs in {batch}")
    records: list[RunRecord] = []
    for i in range(args.runs):
        progress.line(f"run {i + 1}/{args.runs} (seed {args.seed + i})")
        record = run_scenario(scenario, RunOptions(
            protocol=args.protocol, backend=args.backend, seed=args.seed + i, runs_dir=batch,
            backend_options=options), progress)
        records.append(record)
        if isinstance(record.error, Interrupted):
            print(f"isrlab: interrupted during run {i + 1}/{args.runs}; the runs are in "
                  f"{batch}: `isrlab check {batch}` checks them", file=sys.stderr)
            return record.error.exit_code
    results = batchcheck.check_batch_or_exit([r.run_dir for r in records], batch / INDEX, progress,
                                  use_server=flags.use_server(args))
    if isinstance(results, int):
        return results
    k = sum(r.verdict == VALID for r in results)
    expected = scenario.expect_for(args.protocol)
    code = batchcheck.reproduced_exit_code((r.anomalies, r.verdict) for r in results)
    if args.json:
        batchcheck.print_result_json("reproduce", code,
                                 [batchcheck.run_json(r, r.run_dir) for r in results], args.seed,
                                 scenario=scenario.name, protocol=args.protocol,
                                 reproduced=k, index=str(batch / INDEX))
    else:
        for r in results:
            print(f"{batchcheck.outcome_line(r)}  {r.run_dir}")
            for line in batchcheck.detail_lines(r, args.verbose):
                print(line)
        batchcheck.print_tally(results)
        print(f"reproduced {k}/{args.runs} (documented under {args.protocol}: "
              f"{', '.join(expected) or 'no anomaly'})")
        print(f"index: {batch / INDEX}")
    return code


# -- --all-variants, or --runs N with variants or assertions ---------------------


def reproduce_variants(args: argparse.Namespace) -> int:
    """The scenario's variants (all, or the one chosen) under one version, N runs
    each, checked in one batch; one verdict line per run."""
    base = flags.with_client(args, load_scenario(find_scenario(args.scenario), args.variant))
    rows = all_variants(base) if args.all_variants else [base]
    if not any(r.reachable_at(args.protocol) for r in rows):
        rows[0].require_reachable(args.protocol)  # nothing to run: exit 2, the reason
    if args.base_image:
        raise UsageError("--base-image is not supported with --all-variants or --runs here; "
                         "build the image first (isrlab docker build --base-image IMAGE)")
    options_at = cellrun.slot_options(args)  # a bad --hosts: before the batch
    progress = flags.progress_of(args)
    batch = batchcheck.new_batch(args.runs_dir, f"{base.name}-{args.protocol}")
    cells = cellrun.run_cells(rows, [args.protocol], args.runs, batch, args, progress,
                              options_at)
    if isinstance(cells, int):
        return cells
    outcomes = [(c, o) for c in cells for o in c.outcomes]
    unreached = [c for c in cells if c.not_reachable]
    code = batchcheck.reproduced_exit_code((o["anomalies"], o["verdict"]) for _, o in outcomes)
    if args.json:
        batchcheck.print_result_json(
            "reproduce", code, [cellrun.outcome_json(c, o) for c, o in outcomes], args.seed,
            scenario=base.name, protocol=args.protocol, batch=str(batch),
            not_reachable=[{"variant": c.row, "why": c.not_reachable} for c in unreached])
    else:
        for c in unreached:  # not run, no verdict: said, never skipped silently
            print(c.not_reachable)
        for c, o in outcomes:
            print(f"{c.row}: {o['result_line']}  {o['run_dir']}")
            for line in o["details"] if args.verbose else o["messages"]:
                print(f"  {line}")
        batchcheck.print_tally([o["result"] for _, o in outcomes if o.get("result") is not None])
        print(f"index: {batch / cellrun.RUNS_INDEX}")
    return code
