"""What the `isrlab` commands share: their common options and argparse types, the
interrupt-safe Spark check, and the check and reports of a batch of runs.

Every command module of harness/cli/ imports this module and non-CLI modules
only, never another command module (tests/test_layering.py). Like the command
modules, it wires the harness to the checker and the reports. Several runs are
always checked together in ONE Spark batch (checker.client.check), each run's
figure assertions judged into its verdict (harness.run.assertions), with each
run's report and the batch's index page.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import secrets
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from broker.protocol import VERSIONS
from broker.sim_cluster import Network
from checker import client
from checker.api import RunResult, write_junit
from checker.errors import CheckerError
from checker.spark import DEFAULT_MASTER, task_slices
from checker.verdict import ERROR, INCOMPLETE, VALID
from contract import ASSERTIONS_JSON, CHECK, REPORT_HTML
from harness.backends import BACKENDS
from harness.backends.hostsfile import load_hosts
from harness.backends.ports import MAX_PORT
from harness.chaos.runs import parse_sets, parse_time_limit
from harness.errors import Interrupted, UsageError, one_line
from harness.progress import Progress
from harness.run import assertions
from harness.run.runner import RunOptions, RunRecord, run_scenario
from harness.scenario.loader import Scenario
from nemesis.schedule import FAULT_NAMES, FaultSpecError, parse_faults
from reports.render import render_index, render_run

if TYPE_CHECKING:
    from pyspark import SparkContext

T = TypeVar("T")

# -- argparse types ------------------------------------------------------------


def typed(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a parser that raises UsageError or ValueError."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except (UsageError, FaultSpecError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def number(text: str, convert: Callable[[str], Any], noun: str, ok: Callable[[Any], bool],
           bound: str) -> Any:
    """`text` as a number (ValueError naming `noun` or `bound` otherwise)."""
    try:
        x = convert(text)
    except ValueError:
        raise ValueError(f"{text!r} is not {noun}") from None
    if not ok(x):
        raise ValueError(f"{text} is not {bound}")
    return x


def positive_int(text: str) -> int:
    return number(text, int, "an integer", lambda n: n >= 1, ">= 1")


def positive_float(text: str) -> float:
    return number(text, float, "a number", lambda x: x > 0, "> 0")


def probability(text: str) -> float:
    return number(text, float, "a number", lambda x: 0 <= x <= 1, "in 0..1")


def message_probability(text: str) -> float:
    return number(text, float, "a number", lambda p: 0 <= p < 1, "a probability in [0, 1)")


def port(text: str) -> int:
    """An argparse type: a TCP port, 1..65535 (0 would let the nodes pick ports the
    harness never learns)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= n <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"port {n} is out of range; give 1..{MAX_PORT}")
    return n


def seed(text: str) -> int:
    """An argparse type: a non-negative integer."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"seed {n} is negative; give an integer >= 0")
    return n


def set_item(text: str) -> str:
    parse_sets([text])  # refused here, at parse time: nothing has started
    return text


# -- options -------------------------------------------------------------------


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--json", action="store_true", help="print one JSON summary on stdout")


def progress_of(args: argparse.Namespace) -> Progress:
    """The progress lines of a command with output flags: on stderr under --json,
    so that stdout is the JSON alone."""
    return Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)


def add_master_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", help="Spark master URL, e.g. local[*] or spark://HOST:7077 "
                   f"(default: embedded {DEFAULT_MASTER}; ISRLAB_SPARK_MASTER overrides)")


def add_no_server_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-server", action="store_true",
                   help="check in this process, not on the warm checker server "
                        "(also ISRLAB_CHECKER_SERVER=0)")


def use_server(args: argparse.Namespace) -> bool | None:
    """None (the default: the server where it applies) or False (--no-server)."""
    return False if getattr(args, "no_server", False) else None


def add_seed_flag(p: argparse.ArgumentParser, help: str, default: int | None = None) -> None:
    p.add_argument("--seed", type=seed, default=default, help=help)


def add_runs_flag(p: argparse.ArgumentParser, help: str | None = None, default: int | None = 1,
                  required: bool = False) -> None:
    p.add_argument("--runs", type=typed(positive_int), default=default, required=required,
                   metavar="N", help=help)


def add_runs_dir_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs-dir", type=Path, default=Path("runs"))


def add_time_limit_flag(p: argparse.ArgumentParser, default: float | None = None) -> None:
    """--time-limit, required unless `default` (then virtual time, as a swarm's)."""
    p.add_argument("--time-limit", type=typed(parse_time_limit), metavar="DURATION",
                   required=default is None, default=default,
                   help="faults start during this long: 60s, 2m, 1m30s" +
                        ("" if default is None else f" (virtual time; default {default:g}s)"))


# The backend's options: --backend, --port, --hosts (ssh), --base-image (docker),
# --net-loss and --net-duplicate (sim); backend_options turns them into one dict.


def add_backend_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="local", choices=sorted(BACKENDS))


def add_port_flag(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--port", type=port, default=19092, help=help)


def add_hosts_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=Path, metavar="HOSTS.yaml",
                   help="ssh: which host runs which node (docs/ssh.md)")


def add_base_image_flag(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--base-image", metavar="IMAGE", help=help or "e.g. python:3.11-slim")


def add_network_flags(p: argparse.ArgumentParser) -> None:
    """The simulator's message faults (broker.sim_cluster.Network)."""
    p.add_argument("--net-loss", type=typed(message_probability), default=0.0, metavar="P",
                   help="sim: lose each message (a request or its answer) with probability P; "
                        "its sender times out")
    p.add_argument("--net-duplicate", type=typed(message_probability), default=0.0,
                   metavar="P",
                   help="sim: handle each request twice with probability P (a resend)")


def network_option(args: argparse.Namespace) -> Any:
    """The --net-* flags as a broker.sim_cluster.Network; None when none is set."""
    loss, dup = getattr(args, "net_loss", 0.0), getattr(args, "net_duplicate", 0.0)
    if not loss and not dup:
        return None
    return Network(loss=loss, duplicate=dup)


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


# A chaos run's fault mix, acks and configuration: chaos runs them as given
# (defaults kill and all); a swarm pins what they give and draws the rest per run.

ACKS = {"0": 0, "1": 1, "-1": -1, "all": "all"}


def add_chaos_flags(p: argparse.ArgumentParser, *, drawn: bool) -> None:
    """--faults, --acks and --set. `drawn` (a swarm): what a flag does not give,
    each run draws from its seed; else (chaos) --faults defaults to kill and
    --acks to all, and the config keys not set keep the broker's defaults."""
    p.add_argument("--faults", type=typed(parse_faults), metavar="FAULT[:TARGET],...",
                   default=None if drawn else parse_faults("kill"),
                   help=f"faults: {', '.join(FAULT_NAMES)}; targets: one, leader, minority, "
                        "all (default: " + ("each run draws its own mix" if drawn else "kill")
                        + ")")
    p.add_argument("--acks", choices=sorted(ACKS), default=None if drawn else "all",
                   help="the producers' acks (default: " +
                        ("each run draws all or 1" if drawn else "all") + ")")
    p.add_argument("--set", dest="sets", action="append", default=[], type=typed(set_item),
                   metavar="KEY=VALUE",
                   help="broker or controller config, e.g. min.insync.replicas=2 (repeatable)"
                        + ("; each run draws the keys not set" if drawn else ""))


def acks_of(args: argparse.Namespace) -> int | str | None:
    """--acks as the workload's value; None when not given (a swarm draws it)."""
    return ACKS[args.acks] if args.acks is not None else None


# -- the interrupt-safe check ----------------------------------------------------


class CheckInterrupted(Interrupted):
    """SIGINT/SIGTERM/SIGHUP while the checker ran (exit 3, "isrlab: interrupted")."""

    def __init__(self) -> None:
        super().__init__("interrupted")


abandoned = threading.Event()  # set once a check thread is left running


def interruptible(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
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
        abandoned.set()
        logging.disable(logging.CRITICAL)  # py4j's complaints, as the JVM goes
        raise CheckInterrupted() from None
    if "error" in box:
        raise box["error"]
    return box["value"]


# -- checked runs: verdicts, reports, output -------------------------------------


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


def say_truncated(results: list[RunResult]) -> None:
    """One line on stderr per history, log or events file whose last line was cut
    off (an interrupted write): the checker skipped that line."""
    for r in results:
        for t in r.summary.get("truncated") or []:
            print(f"isrlab: run {r.run_dir}: {t['file']} line {t['line']} is cut off (an "
                  "interrupted write); checked the lines before it", file=sys.stderr)


def render_report(run_dir: Path) -> Path | None:
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
            render_report(d)
        return
    dirs = [str(d) for d in run_dirs]
    for why in sc.parallelize(dirs, task_slices(sc, len(dirs))).map(try_render).collect():
        if why is not None:
            print(f"isrlab: {why}", file=sys.stderr)


def report_of(r: RunResult) -> str | None:
    """The run's report, if it has one."""
    p = r.run_dir / CHECK / REPORT_HTML
    return str(p) if p.exists() else None


def anomaly_line(a: Any) -> str:
    if isinstance(a, dict):
        kind = a.get("kind") or a.get("type") or "anomaly"
        text = a.get("explanation") or a.get("summary") or ""
        return f"{kind}: {text}".rstrip(": ")
    return str(a)


def print_json(summary: dict[str, Any]) -> None:
    print(json.dumps(summary, default=str))


# -- a batch of runs -----------------------------------------------------------


STATUS_EVERY = 5.0  # seconds between status lines during a chaos run


def random_seed() -> int:
    """A seed when none is given (printed, so that the runs can be made again)."""
    return int.from_bytes(os.urandom(3), "big")


def stamp() -> str:
    """Now, as a batch's name starts: 20250101T120000Z."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def new_batch(runs_dir: Path, what: str) -> Path:
    """A batch's directory under runs_dir: <time>-<what>-<hex>."""
    return runs_dir / f"{stamp()}-{what}-{secrets.token_hex(3)}"


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
    out = interruptible(client.check, run_dirs, master=master, progress=progress.line,
                        use_server=use_server)
    for r in out:
        if r.error is not None:
            print(f"isrlab: {r.error}", file=sys.stderr)
    say_truncated(out)
    out = [judged(r) for r in out]
    if results is not None:
        client.append_results(out, results, master=master, progress=progress.line,
                              use_server=use_server)
    shown = [r for r in out if r.error is None
             and (not reports_for_findings or r.anomalies or r.verdict != VALID)]
    progress.line(f"rendering {len(shown)} report(s)")
    render_reports([r.run_dir for r in shown], render_on)
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


def chaos_exit_code(results: list[RunResult], records: list[RunRecord]) -> int:
    """1 if any run shows an anomaly; else 3 if one did not complete or could not be
    checked; else 0."""
    if any(r.anomalies for r in results):
        return 1
    if any(r.error is not None for r in records) or any(r.verdict != VALID for r in results):
        return 3
    return 0


def reproduced_exit_code(outcomes: Iterable[tuple[Any, str]]) -> int:
    """A scenario's batch of runs, as `reproduce` judges one: 1 for any anomaly or a
    run not valid, but 3 when the only trouble is runs that did not finish or could
    not be read; `outcomes`: each run's (anomalies, verdict)."""
    outcomes = list(outcomes)
    if any(anomalies or verdict not in (VALID, INCOMPLETE, ERROR)
           for anomalies, verdict in outcomes):
        return 1
    return 3 if any(verdict != VALID for _, verdict in outcomes) else 0


# -- scenario x protocol cells (matrix, reproduce --all-variants) --------------

RUNS_INDEX = "runs.html"  # the checker's per-run index page of the batch
OK_MARK = "✓"
DOCKER_PORT_STRIDE = 16  # host ports per docker run: one per node, and room to spare


def expect_line(scenario: Scenario) -> str:
    """Compact expectations per version: `0.10 lost-write · 0.11+ none`."""
    parts: list[str] = []
    last: list[str] | None = None
    for v in VERSIONS:
        kinds = sorted(scenario.expect_for(v))
        if kinds != last:
            parts.append(f"{v}+ {','.join(kinds) or 'none'}")
            last = kinds
    if parts and len(parts) == 1:
        return parts[0].replace(f"{VERSIONS[0]}+ ", "all ")
    # An entry that holds for one version only is written without its +.
    out = []
    for i, p in enumerate(parts):
        v = p.split()[0][:-1]
        nxt = parts[i + 1].split()[0][:-1] if i + 1 < len(parts) else None
        following = VERSIONS[VERSIONS.index(v) + 1] if v != VERSIONS[-1] else None
        out.append(p.replace(f"{v}+", v, 1) if nxt is not None and nxt == following else p)
    return " · ".join(out)


@dataclass
class Cell:
    row: str  # the scenario (or scenario-variant) name
    protocol: str
    records: list[RunRecord] = field(default_factory=list)
    # Per run: (verdict with assertions, found kinds, unexpected, missing, failed assertions)
    outcomes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return bool(self.outcomes) and all(o["verdict"] == VALID for o in self.outcomes)

    def text(self) -> str:
        if self.matches:
            return OK_MARK
        bad = [o for o in self.outcomes if o["verdict"] != VALID]
        diff = _difference(bad[0]) if bad else "not run"
        n = len(self.outcomes)
        return f"{n - len(bad)}/{n} {diff}" if n > 1 else diff


def _difference(o: dict[str, Any]) -> str:
    if o["verdict"] in (INCOMPLETE, ERROR):
        return o["verdict"]
    parts = [f"+{k}" for k in o["unexpected"]] + [f"-{k}" for k in o["missing"]]
    parts += [f"assert {a['figure']}" for a in o["failed_assertions"]]
    return " ".join(parts) or o["verdict"]


def run_cells(rows: list[Scenario], protocols: list[str], runs: int, batch: Path,
              args: argparse.Namespace, progress: Progress) -> list[Cell] | int:
    """Run every row x protocol `runs` times into `batch`, check them in one batch and
    judge the assertions; an exit status instead when interrupted or the checker fails."""
    stride = DOCKER_PORT_STRIDE if args.backend == "docker" else 1
    jobs = getattr(args, "jobs", 1)
    if args.backend == "ssh" and jobs > 1:
        raise UsageError("--jobs > 1 needs ports of its own per run; the ssh backend takes "
                         "its ports from the hosts file: run the matrix with --jobs 1")
    options_at = {slot: backend_options(args, port=args.port + slot * stride)
                  for slot in range(jobs)}  # before the first run: a bad --hosts fails now
    cells: list[Cell] = []
    plan: list[tuple[Cell, Scenario, int]] = []
    for s in rows:
        for p in protocols:
            cell = Cell(s.run_name, p)
            cells.append(cell)
            plan += [(cell, s, i) for i in range(runs)]
    total = len(plan)
    records: list[RunRecord | None] = [None] * total
    slots = list(range(jobs))  # free job slots: slot k runs on port + k * stride
    lock = threading.Lock()
    stop = threading.Event()
    # Parallel runs' step lines would interleave: then only the run lines show.
    run_progress = progress if jobs == 1 else Progress(quiet=True)

    def run(n: int) -> None:
        cell, s, i = plan[n]
        if stop.is_set():
            return
        with lock:
            slot = slots.pop()
            progress.line(f"[{n + 1}/{total}] {s.run_name} under {cell.protocol}")
        options = options_at[slot]
        try:
            record = run_scenario(s, RunOptions(
                protocol=cell.protocol, backend=args.backend, seed=(args.seed or 0) + i,
                runs_dir=batch, backend_options=options), run_progress)
        finally:
            with lock:
                slots.append(slot)
        records[n] = record
        if isinstance(record.error, Interrupted):
            stop.set()

    if jobs == 1:
        for n in range(total):
            run(n)
            if stop.is_set():
                break
    else:
        # Ctrl-C reaches this (the main) thread: no new run starts, the runs in
        # flight end as they would, and the batch is left checkable.
        with ThreadPoolExecutor(jobs, thread_name_prefix="isrlab-run") as pool:
            futures = [pool.submit(run, n) for n in range(total)]
            try:
                for f in futures:
                    while not f.done():
                        wait([f], timeout=0.1)
                    f.result()
            except (KeyboardInterrupt, Interrupted):
                stop.set()
    done = [r for r in records if r is not None]
    if stop.is_set():
        print(f"isrlab: interrupted; the runs are in {batch}: "
              f"`isrlab check {batch}` checks them", file=sys.stderr)
        return Interrupted.exit_code
    for (cell, _, _), record in zip(plan, done, strict=True):
        cell.records.append(record)
    results = check_batch_or_exit([r.run_dir for c in cells for r in c.records],
                                  batch / RUNS_INDEX, progress, batch,
                                  use_server=use_server(args))
    if isinstance(results, int):
        return results
    by_dir = {r.run_dir.resolve(): r for r in results}
    for c in cells:
        for rec in c.records:
            c.outcomes.append(judge(rec, by_dir.get(rec.run_dir.resolve())))
    return cells


def judge(record: RunRecord, result: RunResult | None) -> dict[str, Any]:
    """One run's outcome: its verdict (check_batch judged the figure assertions)."""
    if result is None:
        return {"run_dir": record.run_dir, "verdict": ERROR, "found": [], "unexpected": [],
                "missing": [], "failed_assertions": [], "messages": ["not checked"],
                "anomalies": []}
    messages = list(result.summary.get("assertions_failed") or [])
    failed: list[dict[str, Any]] = []
    path = record.run_dir / CHECK / ASSERTIONS_JSON
    if messages and path.exists():
        failed = [a for a in json.loads(path.read_text())["assertions"] if not a["ok"]]
    return {"run_dir": record.run_dir, "verdict": result.verdict,
            "found": sorted({a["kind"] for a in result.anomalies}),
            "unexpected": result.unexpected, "missing": result.missing,
            "failed_assertions": failed, "messages": messages,
            "anomalies": result.anomalies}
