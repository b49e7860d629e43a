"""The `isrlab` command: scenarios, reproduce, check, collect, docker.

Every user error is one line on stderr and exit status 2; a run that cannot
complete is exit 3, and so is an interrupt (Ctrl-C, SIGTERM), also during the
check: one line, `isrlab: interrupted`. `check` exits with the verdicts of
docs/anomalies.md (0 valid, 1 invalid or not reproduced, 3 incomplete, 2 a run
that could not be read; checker.verdict.batch_exit_code) -- the CI gate.
`reproduce` answers a different question, "did the protocol keep its guarantees
in this run?": 1 when the run shows any consistency anomaly or its verdict is not
valid, 0 when it is clean (docs/exit-codes.md). `collect` finishes a run whose
harness was killed; `check` does the same first when it meets one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from checker import client
from checker.api import RunResult, write_junit
from checker.errors import CheckerError
from checker.spark import DEFAULT_MASTER, check_master, task_slices
from checker.verdict import ERROR, EXIT_CODES, INCOMPLETE, VALID, batch_exit_code
from contract import CHECK, CRASHED, PROTOCOLS, REPORT_HTML, RUNNING
from contract.rundir import RunDirError, discover, read_meta, run_status
from harness.backends import BACKENDS
from harness.backends.base import MAX_PORT
from harness.cli import chaos as cli_chaos
from harness.cli import checker as cli_checker
from harness.cli import matrix as cli_matrix
from harness.cli import shrink as cli_shrink
from harness.cli import ssh as cli_ssh
from harness.cli import swarm as cli_swarm
from harness.cli import trace as cli_trace
from harness.errors import HarnessError, Interrupted, RunIncomplete, UsageError, one_line
from harness.progress import Progress
from harness.run import assertions, reaper
from harness.run.collect import collect_crashed, owner_gone
from harness.run.runner import RunOptions, run_scenario
from harness.scenario.loader import find_scenario, load_scenario
from reports.render import INDEX, render_index, render_run

if TYPE_CHECKING:
    from pyspark import SparkContext

T = TypeVar("T")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, no usage block: the CLI contract for bad input.
        self.exit(2, f"isrlab: error: {message} (see isrlab {self.prog.split()[-1]} --help)\n"
                  if " " in self.prog else f"isrlab: error: {message}\n")


def _port(text: str) -> int:
    """An argparse type: a TCP port, 1..65535 (0 would let the nodes pick ports the
    harness never learns)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= n <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"port {n} is out of range; give 1..{MAX_PORT}")
    return n


def _seed(text: str) -> int:
    """An argparse type: a non-negative integer."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"seed {n} is negative; give an integer >= 0")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="isrlab", description="Fault-injection harness for Kafka's "
                                           "replication protocol.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("scenarios", help="list the shipped scenarios")

    r = sub.add_parser("reproduce", help="run one scenario and check it")
    r.add_argument("scenario", metavar="NAME|PATH")
    r.add_argument("--protocol", required=True, choices=PROTOCOLS)
    r.add_argument("--backend", default="local", choices=sorted(BACKENDS))
    r.add_argument("--seed", type=_seed, help="an integer >= 0 (default: random)")
    r.add_argument("--runs-dir", type=Path, default=Path("runs"))
    r.add_argument("--port", type=_port, default=19092,
                   help="local: the port of every node (one 127.0.0.x address each); "
                        "docker: the first of one host port per node (P..P+brokers)")
    add_hosts_flag(r)
    r.add_argument("--base-image", metavar="IMAGE",
                   help="docker: build the broker image on this base (e.g. python:3.11-slim) "
                        "instead of the debootstrapped one")
    add_network_flags(r)
    _output_flags(r)

    c = sub.add_parser("check", help="check run directories with the Spark checker")
    c.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    c.add_argument("--master", help="Spark master URL, e.g. spark://HOST:7077 "
                   f"(default: embedded {DEFAULT_MASTER}; ISRLAB_SPARK_MASTER overrides)")
    c.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML here")
    c.add_argument("--results", type=Path, metavar="DIR",
                   help="append every run's results to this Parquet table (trend pages)")
    c.add_argument("--index", type=Path, metavar="FILE",
                   help="write the batch's index page here (default: PATH/index.html "
                        "when one tree of several runs is checked)")
    c.add_argument("--no-report", action="store_true", help="skip the HTML reports")
    _output_flags(c)

    co = sub.add_parser("collect", help="finish a run whose isrlab process was killed: "
                                        "rebuild its replicas from the brokers' data")
    co.add_argument("run_dir", type=Path, metavar="RUN_DIR")

    d = sub.add_parser("docker", help="build the broker image, clean up crashed runs")
    dsub = d.add_subparsers(dest="docker_command", required=True, parser_class=_Parser)
    b = dsub.add_parser("build", help="build the base and broker images where missing")
    b.add_argument("--base-image", metavar="IMAGE", help="e.g. python:3.11-slim")
    b.add_argument("--quiet", action="store_true", help="no progress lines")
    cl = dsub.add_parser("clean", help="remove containers, networks and volumes of "
                                       "runs whose isrlab process is gone")
    cl.add_argument("--images", action="store_true", help="also remove stale broker images")
    cl.add_argument("--force", action="store_true",
                    help="remove every run's objects, also of runs still going or of "
                         "another host")
    cli_chaos.register(sub)  # chaos, export, reproduce --runs
    cli_matrix.register(sub)  # matrix, reproduce --variant/--all-variants
    cli_checker.register(sub)  # checker status|start|stop
    cli_ssh.register(sub)  # ssh hosts up|down, ssh clean, ssh check
    cli_swarm.register(sub)  # swarm
    cli_trace.register(sub)  # trace
    cli_shrink.register(sub)  # shrink
    for parser in (r, c):
        cli_checker.add_no_server_flag(parser)
    return p


def _output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--json", action="store_true", help="print one JSON summary on stdout")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    reaper.install_signal_handlers()
    code = _command(args)
    if _abandoned.is_set():
        # An interrupted check's thread is still inside a call into Spark's JVM:
        # leave without waiting for it (and without the py4j errors it would log on
        # the way out). The JVM exits by itself once its stdin, our pipe, closes.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _command(args: argparse.Namespace) -> int:
    try:
        for module in (cli_matrix, cli_chaos, cli_checker, cli_ssh, cli_swarm, cli_trace,
                       cli_shrink):
            done = module.dispatch(args)
            if done is not None:
                return done
        if args.command == "scenarios":
            return cmd_scenarios()
        if args.command == "reproduce":
            return cmd_reproduce(args)
        if args.command == "docker":
            return cmd_docker(args)
        if args.command == "collect":
            return cmd_collect(args)
        return cmd_check(args)
    except (HarnessError, RunDirError) as e:
        print(f"isrlab: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("isrlab: interrupted", file=sys.stderr)
        return RunIncomplete.exit_code


class CheckInterrupted(Interrupted):
    """SIGINT/SIGTERM/SIGHUP while the checker ran (exit 3, "isrlab: interrupted")."""

    def __init__(self) -> None:
        super().__init__("interrupted")


_abandoned = threading.Event()  # set once a check thread is left running


def _interruptible(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs) -- the Spark check -- run in a worker thread while this,
    the main thread, waits; an interrupt raises CheckInterrupted here at once.

    Why a thread: PySpark's SparkContext, created on the main thread, replaces the
    SIGINT handler with one that calls into the JVM from inside the handler, and
    py4j logs the call it interrupts (~48 lines of traceback) before the
    KeyboardInterrupt arrives. Created on another thread, it leaves ours in place,
    and nothing of the check's has to be unwound: main() exits without it."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
            box["error"] = e

    worker = threading.Thread(target=target, name="isrlab-check", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except (KeyboardInterrupt, Interrupted):
        _abandoned.set()
        logging.disable(logging.CRITICAL)  # py4j's complaints, as the JVM goes
        raise CheckInterrupted() from None
    if "error" in box:
        raise box["error"]
    return box["value"]


def cmd_scenarios() -> int:
    for line in cli_matrix.scenario_lines():
        print(line)
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    scenario = load_scenario(find_scenario(args.scenario), args.variant)
    progress = Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)
    options = backend_options(args)
    # The checker's JVM starts while the cluster runs (a warm server: nothing to do).
    client.prestart(use_server=cli_checker.use_server(args))
    record = run_scenario(
        scenario,
        RunOptions(protocol=args.protocol, backend=args.backend, seed=args.seed,
                   runs_dir=args.runs_dir, backend_options=options),
        progress,
    )
    summary: dict[str, Any] = {
        "run_id": record.run_id, "run_dir": str(record.run_dir), "scenario": scenario.name,
        "protocol": args.protocol, "backend": args.backend,
        "expect": scenario.expect_for(args.protocol), "elapsed_s": round(record.elapsed, 3),
    }
    if record.error is not None:
        return _finish(args, summary, record.error.exit_code, error=str(record.error),
                       incomplete=True)
    progress.line("checking ...")
    try:
        result = _interruptible(client.check, [record.run_dir],
                                progress=lambda m: progress.line(f"  {m}"),
                                use_server=cli_checker.use_server(args))[0]
    except CheckerError as e:
        return _finish(args, summary, e.exit_code, error=f"checker: {one_line(e)}")
    except CheckInterrupted as e:
        return _finish(args, summary, e.exit_code, error=str(e))
    if result.error is not None:  # the checker could not read what the run wrote
        return _finish(args, summary, result.exit_code, error=f"checker: {result.error}")
    _say_truncated([result])
    result = judged(result)
    failed = result.summary.get("assertions_failed") or []
    report = _render(record.run_dir)
    code = reproduce_exit_code(result)
    summary.update(verdict=result.verdict, anomalies=_plain(result.anomalies),
                   unexpected=result.unexpected, missing=result.missing,
                   report=str(report) if report else None, variant=scenario.variant,
                   assertions_failed=failed)
    if not args.json:
        print(f"verdict: {result.verdict}{_verdict_gloss(result)}")
        for a in summary["anomalies"]:
            print(f"  {_anomaly_line(a)}")
        for m in failed:
            print(f"  {m}")
        print(f"run: {record.run_dir}")
        if report:
            print(f"report: {report}")
    return _finish(args, summary, code)


def backend_options(args: argparse.Namespace, backend: str | None = None,
                    port: int | None = None) -> dict[str, Any]:
    """The backend's options from a command's flags: --port (local: every node's
    port; docker: the first of the host ports it maps; `port` overrides it),
    --base-image (docker only), --hosts (ssh only, parsed here so a bad file fails
    before anything starts) and quiet image builds and host checks."""
    backend = backend or args.backend
    hosts = getattr(args, "hosts", None)
    base_image = getattr(args, "base_image", None)
    if base_image and backend != "docker":
        raise UsageError("--base-image applies to --backend docker only")
    if backend == "ssh":
        if hosts is None:
            raise UsageError("--backend ssh needs --hosts HOSTS.yaml (docs/ssh.md); "
                             "`isrlab ssh hosts up 3 --out hosts.yaml` makes one here")
        from harness.backends.hostsfile import load_hosts

        return {"hosts": load_hosts(hosts)}
    if hosts is not None:
        raise UsageError("--hosts applies to --backend ssh only")
    options: dict[str, Any] = {"port": args.port if port is None else port}
    network = network_option(args)
    if network is not None:
        if backend != "sim":
            raise UsageError("--net-loss and --net-duplicate apply to --backend sim only "
                             "(docs/sim.md)")
        options["network"] = network
    if base_image:
        options["base_image"] = base_image
    if backend == "docker":
        # Image builds report progress on stderr unless the user asked for quiet.
        options["quiet"] = args.quiet
    return options


def _message_probability(text: str) -> float:
    return cli_chaos._number(text, float, "a number", lambda p: 0 <= p < 1,
                             "a probability in [0, 1)")


def add_network_flags(p: argparse.ArgumentParser) -> None:
    """The simulator's message faults (broker.sim_cluster.Network)."""
    probability = cli_chaos._type(_message_probability)
    p.add_argument("--net-loss", type=probability, default=0.0, metavar="P",
                   help="sim: lose each message (a request or its answer) with probability P; "
                        "its sender times out")
    p.add_argument("--net-duplicate", type=probability, default=0.0, metavar="P",
                   help="sim: handle each request twice with probability P (a resend)")


def network_option(args: argparse.Namespace) -> Any:
    """The --net-* flags as a broker.sim_cluster.Network; None when none is set."""
    loss, dup = getattr(args, "net_loss", 0.0), getattr(args, "net_duplicate", 0.0)
    if not loss and not dup:
        return None
    from broker.sim_cluster import Network

    return Network(loss=loss, duplicate=dup)


def add_hosts_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=Path, metavar="HOSTS.yaml",
                   help="ssh: which host runs which node (docs/ssh.md)")


def reproduce_exit_code(result: RunResult) -> int:
    """1 if the run shows a consistency anomaly (expected or not) or is not valid;
    but 3 for a run that did not finish (verdict incomplete) and 2 for one the
    checker could not read (error), as for `check`."""
    if result.verdict in (INCOMPLETE, ERROR):
        return EXIT_CODES[result.verdict]
    return 1 if result.anomalies or result.verdict != VALID else 0


def _verdict_gloss(result: RunResult) -> str:
    if result.verdict == INCOMPLETE:
        return (f" (the run did not finish: status {result.status}; only what it recorded "
                "was checked)")
    if result.verdict != VALID:
        return ""
    if result.anomalies:
        return " (the anomalies this scenario documents for this version reproduced)"
    return " (no anomaly: the protocol kept its guarantees)"


def _finish(args: argparse.Namespace, summary: dict[str, Any], code: int,
            error: str | None = None, incomplete: bool = False) -> int:
    summary["exit_code"] = code
    if error is not None:
        summary["error"] = error
        print(f"isrlab: {error}", file=sys.stderr)
        if not args.json:
            print(f"run: {summary['run_dir']}{' (incomplete)' if incomplete else ''}")
    if args.json:
        print(json.dumps(summary, default=str))
    return code


def judged(result: RunResult) -> RunResult:
    """The run's scenario figure assertions judged into its verdict (a failed one
    makes it invalid, its messages in summary `assertions_failed`); every command
    that checks runs does this before it renders their reports."""
    if result.error is not None:
        return result
    verdict, failed = assertions.judge(result.run_dir, result.verdict)
    if not failed:
        return result
    return dataclasses.replace(result, verdict=verdict, exit_code=max(result.exit_code, 1),
                               summary={**result.summary, "verdict": verdict,
                                        "assertions_failed": failed})


def _render(run_dir: Path) -> Path | None:
    """The HTML report; a failing renderer costs the report, not the verdict."""
    why = try_render(str(run_dir))
    if why is not None:
        print(f"isrlab: {why}", file=sys.stderr)
        return None
    return run_dir / CHECK / REPORT_HTML


def try_render(run_dir: str) -> str | None:
    """Render one run's report; None, or why it could not be (one line). A Spark task
    of render_reports, so it takes and returns plain values."""
    try:
        render_run(Path(run_dir))
    except Exception as e:  # noqa: BLE001 -- reported on one line, the verdict stands
        return f"no report for {run_dir}: {one_line(e)}"
    return None


def render_reports(run_dirs: list[Path], sc: SparkContext | None = None) -> None:
    """Every run's report: with ``sc``, as Spark tasks (a swarm's thousands of
    reports spread over its cores or its cluster, which hold its runs on shared
    storage); without, one after the other here."""
    if sc is None or len(run_dirs) < 2:
        for d in run_dirs:
            _render(d)
        return
    dirs = [str(d) for d in run_dirs]
    for why in sc.parallelize(dirs, task_slices(sc, len(dirs))).map(try_render).collect():
        if why is not None:
            print(f"isrlab: {why}", file=sys.stderr)


def _plain(x: Any) -> Any:
    """Checker objects (dataclasses or dicts) as JSON-able data."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.asdict(x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _anomaly_line(a: Any) -> str:
    if isinstance(a, dict):
        kind = a.get("kind") or a.get("type") or "anomaly"
        text = a.get("explanation") or a.get("summary") or ""
        return f"{kind}: {text}".rstrip(": ")
    return str(a)


def cmd_check(args: argparse.Namespace) -> int:
    # Paths may be run directories or trees of them; the checker finds the runs.
    for p in args.paths:
        if not p.exists():
            raise UsageError(f"no such run directory: {p}")
    progress = Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)
    try:
        run_dirs = discover(list(args.paths))
        check_master(args.master)  # before a crashed run is collected for nothing
        _collect_crashed_runs(run_dirs, progress)
        results = _interruptible(client.check, list(args.paths), master=args.master,
                                 progress=progress.line,
                                 use_server=cli_checker.use_server(args))
    except (CheckerError, RunDirError) as e:
        print(f"isrlab: {one_line(e)}", file=sys.stderr)
        return e.exit_code
    if not results:
        where = ", ".join(map(str, args.paths))
        raise UsageError(f"no run directory (with run.json) under {where}")
    for r in results:
        if r.error is not None:  # set aside, the rest of the batch checked
            print(f"isrlab: {r.error}", file=sys.stderr)
            # No report: the run was not checked, and an earlier one would not say so.
            (r.run_dir / CHECK / REPORT_HTML).unlink(missing_ok=True)
    _say_truncated(results)
    results = [judged(r) for r in results]
    if args.results is not None:
        try:
            client.append_results(results, args.results, master=args.master,
                                  progress=progress.line, use_server=cli_checker.use_server(args))
        except CheckerError as e:
            print(f"isrlab: {one_line(e)}", file=sys.stderr)
            return e.exit_code
    checked = [r for r in results if r.error is None]
    reports = {}
    if not args.no_report:
        progress.line(f"rendering {len(checked)} report(s)")
        reports = {r.run_id: _render(r.run_dir) for r in checked}
        index = args.index
        if index is None and len(results) > 1 and len(args.paths) == 1 and args.paths[0].is_dir():
            index = args.paths[0] / INDEX
        if index is not None:
            progress.line(f"index: {render_index([r.summary for r in results], index)}")
    if args.junit is not None:
        write_junit(results, args.junit)
    if args.json:
        runs = [{**r.summary, "report": reports.get(r.run_id)} for r in results]
        print(json.dumps({"runs": runs}, default=str))
    else:
        for r in results:
            print(f"{r.verdict:15} {r.run_dir}")
            if r.verdict == INCOMPLETE:
                print(f"  the run did not finish (status {r.status}): only what it recorded "
                      "was checked")
            for a in r.anomalies:
                print(f"  {_anomaly_line(a)}")
            for m in r.summary.get("assertions_failed") or []:
                print(f"  {m}")
            if r.unjudged:
                print(f"  not judged: {', '.join(r.unjudged)} (expected; not in what the "
                      "run recorded)")
    return batch_exit_code(r.verdict for r in results)


def _say_truncated(results: list[RunResult]) -> None:
    """One line on stderr per history, log or events file whose last line was cut
    off (an interrupted write): the checker skipped that line."""
    for r in results:
        for t in r.summary.get("truncated") or []:
            print(f"isrlab: run {r.run_dir}: {t['file']} line {t['line']} is cut off (an "
                  "interrupted write); checked the lines before it", file=sys.stderr)


def _collect_crashed_runs(run_dirs: list[Path], progress: Progress) -> None:
    """Collect every run among run_dirs still marked "running" whose harness is gone
    (harness.run.collect.collect_crashed), saying so on stderr; refuse (UsageError,
    nothing touched) if any of them is still going or cannot be checked from here."""
    # A run.json the checker cannot read is the checker's to report, with its line.
    running = [r for r in run_dirs if run_status(r) == RUNNING]
    for r in running:
        owner_gone(r, read_meta(r))  # all refused before any is touched
    for r in running:
        done = collect_crashed(r, say=lambda m: progress.line(f"  {m}"))
        if done is not None:
            print(f"isrlab: run {r} had crashed ({done.why}): collected its replicas from "
                  "the brokers' data; checking what it recorded", file=sys.stderr)


def cmd_collect(args: argparse.Namespace) -> int:
    run_dir: Path = args.run_dir
    if not run_dir.is_dir():
        raise UsageError(f"no such run directory: {run_dir}")
    status = read_meta(run_dir).get("status")
    done = collect_crashed(run_dir, say=print)
    if done is None:
        if status == CRASHED:
            print(f"run {run_dir} was collected already (status crashed): nothing to do")
        else:
            print(f"run {run_dir} ended (status {status}): nothing to collect")
        return 0
    print(f"run {run_dir}: status crashed; `isrlab check {run_dir}` checks what it recorded")
    return 0


def cmd_docker(args: argparse.Namespace) -> int:
    # Imported here: the docker SDK is only needed by those who use Docker.
    from harness.backends import docker_image

    if args.docker_command == "build":
        progress = Progress(sys.stderr, quiet=args.quiet)
        print(docker_image.ensure_images(args.base_image, quiet=args.quiet,
                                         progress=progress.line))
        return 0
    runs, errors = docker_image.sweep_leftovers(force=args.force)
    total = {"containers": 0, "networks": 0, "volumes": 0}
    for r in runs:
        if r.removed:
            print(f"removed run {r.run_id} ({_counts(r.counts, zeros=False)}): {r.why}")
            total = {k: n + r.counts[k] for k, n in total.items()}
        elif r.awaiting_collect:
            print(f"kept volumes of crashed run {r.run_id} until "
                  f"`isrlab collect {r.awaiting_collect}`")
        else:
            print(f"kept run {r.run_id}: {r.why}")
    kept = len({r.run_id for r in runs if not r.removed})
    line = f"removed {_counts(total)}"
    if kept:
        line += f"; kept {kept} run{'' if kept == 1 else 's'} still going or not checkable"
    print(line)
    if args.images:
        images = docker_image.prune_images()
        print(f"removed {len(images)} stale broker image{'' if len(images) == 1 else 's'}")
    if errors:
        raise docker_image.DockerImageError(
            f"could not remove {len(errors)} isrlab object(s): {errors[0]}")
    return 0


def _counts(counts: dict[str, int], zeros: bool = True) -> str:
    """{"containers": 1, "networks": 2, "volumes": 0} -> "1 container, 2 networks"
    (", 0 volumes" with `zeros`)."""
    return ", ".join(f"{n} {kind if n != 1 else kind[:-1]}" for kind, n in counts.items()
                     if n or zeros) or "nothing left"

