"""The `isrlab chaos`, `isrlab export` and `isrlab reproduce --runs N` commands.

Registered into harness/cli/__init__.py's parser by `register` and dispatched by
`dispatch`; like cli.py, this is a CLI module that wires the harness to the
checker and the reports (tests/test_layering.py). Several runs are always
checked together in ONE Spark batch (checker.client.check), with each run's
report and the batch's index page, as `isrlab check` of a tree does; the
helpers for the interrupt-safe check and the reports are cli.py's own.

Exit status of `chaos`: 1 if any run shows an anomaly (also the prefix of an
unfinished run), else 3 if a run could not complete or be checked, else 0; 2
for bad input, before anything starts. Ctrl-C stops the run going (its cluster
torn down, its history a checkable prefix), checks nothing and says how to
check the completed runs (docs/chaos.md).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from checker import client
from checker.api import RunResult, write_junit
from checker.errors import CheckerError
from checker.spark import DEFAULT_MASTER
from checker.verdict import ERROR, INCOMPLETE, VALID
from contract import PROTOCOLS
from contract.rundir import read_meta
from harness.backends import BACKENDS
from harness.chaos import nightly
from harness.chaos.export import export_scenario
from harness.chaos.runs import CHAOS, ChaosConfig, chaos_run, parse_sets, parse_time_limit
from harness.cli import checker as cli_checker
from harness.errors import HarnessError, Interrupted, UsageError, one_line
from harness.progress import Progress
from harness.run.runner import RunOptions, RunRecord, run_scenario
from harness.scenario.loader import find_scenario, load_scenario
from nemesis.schedule import FAULT_NAMES, FaultSpecError, parse_faults
from reports.render import INDEX, render_index

if TYPE_CHECKING:
    from pyspark import SparkContext

STATUS_EVERY = 5.0  # seconds between status lines during a chaos run
ACKS = {"0": 0, "1": 1, "-1": -1, "all": "all"}


def _type(parse: Any) -> Any:
    """An argparse type from a parser that raises UsageError or ValueError."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except (UsageError, FaultSpecError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def _number(text: str, convert: Callable[[str], Any], noun: str, ok: Callable[[Any], bool],
            bound: str) -> Any:
    try:
        x = convert(text)
    except ValueError:
        raise ValueError(f"{text!r} is not {noun}") from None
    if not ok(x):
        raise ValueError(f"{text} is not {bound}")
    return x


def _positive_int(text: str) -> int:
    return _number(text, int, "an integer", lambda n: n >= 1, ">= 1")


def _positive_float(text: str) -> float:
    return _number(text, float, "a number", lambda x: x > 0, "> 0")


def _probability(text: str) -> float:
    return _number(text, float, "a number", lambda x: 0 <= x <= 1, "in 0..1")


def _set_item(text: str) -> str:
    parse_sets([text])  # refused here, at parse time: nothing has started
    return text


def register(sub: argparse._SubParsersAction) -> None:
    """Add `chaos` and `export` to isrlab's subcommands, and `--runs` to `reproduce`."""
    cli = _cli()
    _output_flags, _port, _seed = cli._output_flags, cli._port, cli._seed

    c = sub.add_parser("chaos", help="random faults over a continuous workload: N runs, "
                                     "checked in one Spark batch")
    c.add_argument("--protocol", required=True, choices=PROTOCOLS)
    c.add_argument("--backend", default="local", choices=sorted(BACKENDS))
    cli_checker.add_no_server_flag(c)
    c.add_argument("--time-limit", required=True, type=_type(parse_time_limit),
                   metavar="DURATION", help="faults start during this long: 60s, 2m, 1m30s")
    c.add_argument("--runs", type=_type(_positive_int), default=1, metavar="N")
    c.add_argument("--seed", type=_seed, help="run i (from 0) uses seed S+i "
                                              "(default: random, printed)")
    c.add_argument("--faults", type=_type(parse_faults), default=parse_faults("kill"),
                   metavar="FAULT[:TARGET],...",
                   help=f"faults: {', '.join(FAULT_NAMES)}; targets: one, leader, minority, "
                        "all (default: kill)")
    c.add_argument("--acks", choices=sorted(ACKS), default="all")
    c.add_argument("--set", dest="sets", action="append", default=[], type=_type(_set_item),
                   metavar="KEY=VALUE", help="broker or controller config, e.g. "
                                             "min.insync.replicas=2 (repeatable)")
    c.add_argument("--runs-dir", type=Path, default=Path("runs"))
    c.add_argument("--port", type=_port, default=19092)
    cli.add_hosts_flag(c)
    cli.add_network_flags(c)
    c.add_argument("--brokers", type=_type(_positive_int), default=3)
    c.add_argument("--partitions", type=_type(_positive_int), default=3)
    c.add_argument("--producers", type=_type(_positive_int), default=4)
    c.add_argument("--rate", type=_type(_positive_float), default=2000.0,
                   help="target records per second over all producers (default 2000)")
    c.add_argument("--batch", type=_type(_positive_int), default=100,
                   help="records per produce request at most, Kafka's batch.size "
                        "(default 100; 1: one record per request)")
    c.add_argument("--linger", type=_type(_positive_float), default=0.005,
                   help="seconds a batch waits for more records, linger.ms (default 0.005)")
    c.add_argument("--interval", type=_type(_positive_float), default=3.0,
                   help="mean seconds before each fault (default 3)")
    c.add_argument("--duration", type=_type(_positive_float), default=4.0,
                   help="mean seconds a fault lasts (default 4)")
    c.add_argument("--overlap", type=_type(_probability), default=0.5,
                   help="probability that a package is compound: a second process fault "
                        "on another broker --gap later, both open together (default 0.5)")
    c.add_argument("--gap", type=_type(_positive_float), default=None,
                   help="mean seconds between a compound package's two faults (default: "
                        "half the controller's session timeout)")
    c.add_argument("--quiet-period", type=_type(_positive_float), default=2.0,
                   help="seconds of calm after each recovery (default 2)")
    c.add_argument("--keep", choices=("all", "anomalies"), default="all",
                   help="anomalies: delete the run directories that show none after the "
                        "check (default: keep all)")
    c.add_argument("--master", help=f"Spark master (default: embedded {DEFAULT_MASTER})")
    c.add_argument("--junit", type=Path, metavar="FILE")
    c.add_argument("--results", type=Path, metavar="DIR",
                   help="append the results to this Parquet table")
    _output_flags(c)

    e = sub.add_parser("export", help="a run's faults and workload as a scenario YAML")
    e.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    e.add_argument("--out", type=Path, metavar="FILE", help="default: stdout")

    n = sub.add_parser("nightly", help="a configured chaos matrix: one night, checked in one "
                                       "batch, JUnit, the night's index and the trend page")
    n.add_argument("config", type=Path, metavar="CONFIG.yaml")
    n.add_argument("--results", type=Path, required=True, metavar="DIR",
                   help="the nights, the Parquet results table and trend.html live here")
    n.add_argument("--port", type=_port, default=19092)
    cli.add_hosts_flag(n)
    n.add_argument("--master", help=f"Spark master (default: embedded {DEFAULT_MASTER})")
    cli_checker.add_no_server_flag(n)
    _output_flags(n)

    r = sub.choices["reproduce"]
    r.add_argument("--runs", type=_type(_positive_int), default=1, metavar="N",
                   help="run it N times, check them in one batch, print k/N reproduced")


def _cli() -> ModuleType:
    """harness.cli, imported here to dodge the import cycle with it."""
    import harness.cli

    return harness.cli


def dispatch(args: argparse.Namespace) -> int | None:
    """The exit status of a command of this module; None for cli.py's own."""
    if args.command == "chaos":
        return cmd_chaos(args)
    if args.command == "export":
        return cmd_export(args)
    if args.command == "nightly":
        return cmd_nightly(args)
    if args.command == "reproduce" and getattr(args, "runs", 1) > 1:
        return cmd_reproduce_runs(args)
    return None


# -- the batch check ---------------------------------------------------------


def check_batch(run_dirs: list[Path], index: Path, progress: Progress, *,
                master: str | None = None, junit: Path | None = None,
                results: Path | None = None, use_server: bool | None = None,
                reports_for_findings: bool = False,
                render_on: SparkContext | None = None) -> list[RunResult]:
    """Check `run_dirs` in one Spark batch (each run's figure assertions judged into
    its verdict); each run's report (``reports_for_findings``: only the runs that
    show an anomaly or are not valid -- a swarm's thousands of clean runs each
    cost a render; `isrlab check RUN_DIR` renders one later; ``render_on``: as tasks
    of that Spark context), the index page, JUnit.
    Raises CheckerError (its exit status) or CheckInterrupted."""
    cli = _cli()
    out = cli._interruptible(client.check, run_dirs, master=master, progress=progress.line,
                             use_server=use_server)
    for r in out:
        if r.error is not None:
            print(f"isrlab: {r.error}", file=sys.stderr)
    cli._say_truncated(out)
    out = [cli.judged(r) for r in out]
    if results is not None:
        client.append_results(out, results, master=master, progress=progress.line,
                              use_server=use_server)
    shown = [r for r in out if r.error is None
             and (not reports_for_findings or r.anomalies or r.verdict != "valid")]
    progress.line(f"rendering {len(shown)} report(s)")
    cli.render_reports([r.run_dir for r in shown], render_on)
    progress.line(f"index: {render_index([r.summary for r in out], index)}")
    if junit is not None:
        write_junit(out, junit)
    return out


def check_batch_or_exit(run_dirs: list[Path], index: Path, progress: Progress,
                        again: Path | None = None, **kwargs: Any) -> list[RunResult] | int:
    """check_batch with its progress line; on a checker failure or an interrupt, the
    exit status after saying why on stderr (and, with `again`, how to check the
    runs, which are complete)."""
    progress.line(f"checking {len(run_dirs)} run(s) in one Spark batch")
    try:
        return check_batch(run_dirs, index, progress, **kwargs)
    except CheckerError as e:
        print(f"isrlab: checker: {one_line(e)}", file=sys.stderr)
        return e.exit_code
    except Interrupted as e:
        print(f"isrlab: {e}" + (f"; `isrlab check {again}` checks the runs" if again else ""),
              file=sys.stderr)
        return e.exit_code


def _report(r: RunResult) -> str | None:
    p = r.run_dir / "check" / "report.html"
    return str(p) if p.exists() else None


# -- chaos -------------------------------------------------------------------


def cmd_chaos(args: argparse.Namespace) -> int:
    broker_cfg, controller_cfg = parse_sets(args.sets)
    cfg = ChaosConfig(protocol=args.protocol, time_limit=args.time_limit, faults=args.faults,
                      acks=ACKS[args.acks], broker_config=broker_cfg,
                      controller_config=controller_cfg, brokers=args.brokers,
                      partitions=args.partitions, producers=args.producers,
                      consumers=args.partitions, rate=args.rate, batch=args.batch,
                      linger=args.linger, interval=args.interval,
                      duration=args.duration, quiet=args.quiet_period,
                      overlap=args.overlap, gap=args.gap)
    cfg.broker_names()  # refuses a bad --brokers before anything starts
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(3), "big")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    batch_id = f"{stamp}-{CHAOS}-{args.protocol}-{secrets.token_hex(3)}"
    batch = args.runs_dir / batch_id
    progress = Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)
    options = _cli().backend_options(args)
    faults = ",".join(str(f) for f in cfg.faults)
    progress.line(f"chaos: {args.runs} run(s) of {cfg.time_limit:g}s under {args.protocol} "
                  f"on {args.backend}, faults {faults}, acks {args.acks}, seed {seed} "
                  f"(run i uses seed {seed}+i); runs in {batch}")
    records: list[RunRecord] = []
    interrupted: HarnessError | None = None
    for i in range(args.runs):
        scenario, meta = chaos_run(cfg, seed + i)
        meta["chaos"].update(batch=batch_id, run=i + 1, runs=args.runs)
        record = run_scenario(scenario, RunOptions(
            protocol=args.protocol, backend=args.backend, seed=seed + i, runs_dir=batch,
            backend_options=options, meta=meta, status_every=STATUS_EVERY,
            status_prefix=f"run {i + 1}/{args.runs}", time_limit=cfg.time_limit), progress)
        records.append(record)
        if record.error is not None:
            progress.line(f"run {i + 1}/{args.runs} did not complete: {record.error}")
            if isinstance(record.error, Interrupted):
                interrupted = record.error
                break
    summary: dict[str, Any] = {"batch": str(batch), "seed": seed, "protocol": args.protocol,
                               "faults": faults, "runs": []}
    if interrupted is not None:
        done = [r for r in records if r.error is None]
        print(f"isrlab: interrupted during run {len(records)}/{args.runs}; "
              f"{len(done)} completed run(s) and the interrupted one's prefix are in {batch}: "
              f"`isrlab check {batch}` checks them", file=sys.stderr)
        summary["runs"] = [{"run_id": r.run_id, "run_dir": str(r.run_dir),
                            "error": str(r.error) if r.error else None} for r in records]
        return _chaos_finish(args, summary, interrupted.exit_code)
    results = check_batch_or_exit([r.run_dir for r in records], batch / INDEX, progress,
                                  batch, master=args.master, junit=args.junit,
                                  results=args.results, use_server=cli_checker.use_server(args))
    if isinstance(results, int):
        return _chaos_finish(args, summary, results)
    shown = 0
    for i, r in enumerate(results):
        kinds = ", ".join(f"{k} ×{n}" for k, n in (r.summary.get("found") or {}).items())
        shown += bool(r.anomalies)
        line = (f"run {i + 1}/{len(results)} (seed {r.summary.get('seed')}): {r.verdict}"
                f"{': ' + kinds if kinds else ''} · anomalies so far: {shown} run(s)")
        if not args.json:
            print(line)
            if r.anomalies:
                print(f"  run: {r.run_dir}\n  report: {_report(r)}\n"
                      f"  export: isrlab export {r.run_dir} --out FILE")
        summary["runs"].append({"run_id": r.run_id, "run_dir": str(r.run_dir),
                                "seed": r.summary.get("seed"), "verdict": r.verdict,
                                "found": r.summary.get("found") or {},
                                "report": _report(r)})
    code = chaos_exit_code(results, records)
    if args.keep == "anomalies":
        for r in results:
            if not r.anomalies and r.verdict == VALID:
                shutil.rmtree(r.run_dir)
                progress.line(f"deleted {r.run_dir} (no anomaly; --keep anomalies)")
        render_index([r.summary for r in results if r.run_dir.exists()], batch / INDEX)
    summary["index"] = str(batch / INDEX)
    if not args.json:
        print(f"index: {batch / INDEX}")
        print(f"{shown} of {len(results)} run(s) show an anomaly")
    return _chaos_finish(args, summary, code)


def chaos_exit_code(results: list[RunResult], records: list[RunRecord]) -> int:
    """1 if any run shows an anomaly; else 3 if one did not complete or could not be
    checked; else 0."""
    if any(r.anomalies for r in results):
        return 1
    if any(r.error is not None for r in records) or any(r.verdict != VALID for r in results):
        return 3
    return 0


def _chaos_finish(args: argparse.Namespace, summary: dict[str, Any], code: int) -> int:
    summary["exit_code"] = code
    if args.json:
        print(json.dumps(summary, default=str))
    return code


# -- export ------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    if not args.run_dir.is_dir():
        raise UsageError(f"no such run directory: {args.run_dir}")
    name, text = export_scenario(args.run_dir)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote scenario {name} to {args.out}: "
          f"isrlab reproduce {args.out} --protocol {_protocol_of(args.run_dir)} --runs 20")
    return 0


def _protocol_of(run_dir: Path) -> str:
    return str(read_meta(run_dir).get("protocol"))


# -- reproduce --runs N --------------------------------------------------------


def cmd_reproduce_runs(args: argparse.Namespace) -> int:
    """The scenario N times, checked in one batch; "reproduced k/N": the runs whose
    verdict is valid (every expected kind found, nothing unexpected)."""
    scenario = load_scenario(find_scenario(args.scenario))
    progress = Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)
    options = _cli().backend_options(args)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    batch = args.runs_dir / f"{stamp}-{scenario.name}-{args.protocol}-x{args.runs}"
    records: list[RunRecord] = []
    for i in range(args.runs):
        progress.line(f"run {i + 1}/{args.runs}")
        record = run_scenario(scenario, RunOptions(
            protocol=args.protocol, backend=args.backend, seed=args.seed, runs_dir=batch,
            backend_options=options), progress)
        records.append(record)
        if isinstance(record.error, Interrupted):
            print(f"isrlab: interrupted during run {i + 1}/{args.runs}; the runs are in "
                  f"{batch}: `isrlab check {batch}` checks them", file=sys.stderr)
            return record.error.exit_code
    results = check_batch_or_exit([r.run_dir for r in records], batch / INDEX, progress,
                                  use_server=cli_checker.use_server(args))
    if isinstance(results, int):
        return results
    k = sum(r.verdict == VALID for r in results)
    expected = scenario.expect_for(args.protocol)
    if args.json:
        print(json.dumps({"scenario": scenario.name, "protocol": args.protocol,
                          "expect": expected, "reproduced": k, "runs": args.runs,
                          "index": str(batch / INDEX),
                          "results": [{"run_dir": str(r.run_dir), "verdict": r.verdict,
                                       "found": r.summary.get("found") or {}}
                                      for r in results]}, default=str))
    else:
        for r in results:
            kinds = ", ".join(sorted(r.summary.get("found") or {})) or "no anomaly"
            print(f"{r.verdict:15} {kinds:30} {r.run_dir}")
        print(f"reproduced {k}/{args.runs} (expect under {args.protocol}: "
              f"{', '.join(expected) or 'no anomaly'})")
        print(f"index: {batch / INDEX}")
    # As `reproduce`: 1 for any anomaly or a run not valid, but 3 when the only
    # trouble is runs that did not finish or could not be read.
    if any(r.anomalies or r.verdict not in (VALID, INCOMPLETE, ERROR) for r in results):
        return 1
    if any(r.verdict != VALID for r in results):
        return 3
    return 0


# -- nightly -------------------------------------------------------------------


def cmd_nightly(args: argparse.Namespace) -> int:
    """One night of the configured matrix (harness.chaos.nightly); exit 1 for an anomaly a
    row does not allow, 3 for a run that did not complete or could not be checked."""
    night_cfg = nightly.load_config(args.config)  # FILE:LINE errors: exit 2, nothing started
    seed = (night_cfg.seed if night_cfg.seed is not None
            else int.from_bytes(os.urandom(3), "big"))
    night = nightly.night_id()
    night_dir = args.results / "nights" / night
    progress = Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)
    total = sum(c.runs for c in night_cfg.cells)
    progress.line(f"nightly {night}: {len(night_cfg.cells)} cell(s), {total} run(s), seed "
                  f"{seed}; in {night_dir}")
    records: list[tuple[nightly.Cell, RunRecord]] = []
    interrupted: HarnessError | None = None
    done = 0
    # Every backend's options before the first run: a missing --hosts fails now.
    options_of = {b: _cli().backend_options(args, backend=b)
                  for b in sorted({c.backend for c in night_cfg.cells})}
    for cell in night_cfg.cells:
        options = options_of[cell.backend]
        for i in range(cell.runs):
            done += 1
            scenario, meta = chaos_run(cell.config, seed + i)
            meta["chaos"].update(batch=night, run=i + 1, runs=cell.runs, cell=cell.name,
                                 row=cell.row, sets=cell.sets, allow=cell.allow)
            record = run_scenario(scenario, RunOptions(
                protocol=cell.protocol, backend=cell.backend, seed=seed + i,
                runs_dir=night_dir / cell.name, backend_options=options, meta=meta,
                status_every=STATUS_EVERY, status_prefix=f"{cell.name} run {i + 1}/"
                f"{cell.runs} ({done}/{total})", time_limit=cell.config.time_limit), progress)
            records.append((cell, record))
            if isinstance(record.error, Interrupted):
                interrupted = record.error
                break
            if record.error is not None:
                progress.line(f"{cell.name} run {i + 1} did not complete: {record.error}")
        if interrupted is not None:
            break
    if interrupted is not None:
        print(f"isrlab: interrupted; the night's runs are in {night_dir}: `isrlab check "
              f"{night_dir}` checks them", file=sys.stderr)
        return interrupted.exit_code
    results = check_batch_or_exit([r.run_dir for _, r in records], night_dir / INDEX,
                                  progress, night_dir, master=args.master,
                                  junit=night_dir / "junit.xml",
                                  results=args.results / "results",
                                  use_server=cli_checker.use_server(args))
    if isinstance(results, int):
        return results
    by_dir = {r.run_dir.resolve(): r for r in results}
    runs_meta = []
    bad = 0
    for cell, record in records:
        r = by_dir.get(record.run_dir.resolve())
        found = (r.summary.get("found") or {}) if r is not None else {}
        not_allowed = sorted(k for k in found if k not in cell.allow)
        bad += bool(not_allowed)
        runs_meta.append({
            "run_id": record.run_id, "run_dir": str(record.run_dir), "row": cell.row,
            "cell": cell.name, "protocol": cell.protocol, "faults": cell.faults,
            "acks": cell.acks, "set": cell.set_name, "sets": cell.sets,
            "backend": cell.backend, "allow": cell.allow,
            "verdict": r.verdict if r is not None else None, "found": found,
            "not_allowed": not_allowed,
            "detection_s": nightly.detection_times(record.run_dir) if found else {},
            "throughput": nightly.throughput(r.summary) if r is not None else None,
            "report": _report(r) if r is not None else None})
        if not args.json:
            kinds = ", ".join(f"{k} ×{n}" for k, n in found.items())
            mark = f" NOT ALLOWED: {', '.join(not_allowed)}" if not_allowed else ""
            print(f"{cell.name} seed {r.summary.get('seed') if r else '?'}: "
                  f"{r.verdict if r else 'not checked'}{': ' + kinds if kinds else ''}{mark}")
    meta_out = {"night": night, "config": str(args.config), "seed": seed,
                "index": str(night_dir / INDEX), "junit": str(night_dir / "junit.xml"),
                "runs": runs_meta}
    (night_dir / "night.json").write_text(json.dumps(meta_out, indent=1, default=str),
                                          encoding="utf-8")
    from reports.trend import render_trend  # pandas: only the nightly needs it

    trend_page = render_trend(args.results)
    if bad:
        code = 1
    elif any(r.error is not None for _, r in records) or any(
            x.verdict not in (VALID, "invalid") for x in results):
        code = 3
    else:
        code = 0
    if args.json:
        print(json.dumps({"night": night, "seed": seed, "index": str(night_dir / INDEX),
                          "junit": str(night_dir / "junit.xml"), "trend": str(trend_page),
                          "runs": runs_meta, "exit_code": code}, default=str))
    else:
        print(f"night: {night_dir / INDEX}\ntrend: {trend_page}\n"
              f"{bad} of {len(records)} run(s) show an anomaly their row does not allow")
    return code
