"""Fault injection into isrlab itself: kill the harness at seeded points, then check
that every run directory it leaves is checkable and that nothing of it runs on.

    python bench/self_faults.py --runs 20 --seed 1 [--backend local|docker] [--port P]
                                [--scenario NAME|PATH ...] [--protocol V ...]
                                [--runs-dir DIR] [--batch-check]

Each run is one `isrlab reproduce SCENARIO --protocol V --runs-dir DIR` subprocess,
killed at a point chosen by what it has observably done, never by a clock: the
progress lines it prints (`run <id>`, `cluster up`, `step N`, `fault window
opens`, `final read`, `replicas collected`, `checking ...` and the checker's lines)
and, while the cluster starts, the node logs it creates. The phases:

    start       run.json written, nodes being started (before `cluster up`)
    steps       the scenario's steps, some inside an open fault window
    collection  after the final read: replicas collected, teardown, run.json closed
    checking    the Spark check `reproduce` runs on its run

At its kill point the harness is frozen (SIGSTOP), everything it printed so far is
read -- so the phase it was really in is known, not guessed -- the processes it
started are noted, and it gets its signal: SIGKILL mostly, some SIGINT or SIGTERM
(then SIGCONT). Afterwards `isrlab check DIR/<run>` runs on the run directory
(`--batch-check`: one `isrlab check DIR` over all runs) and each run must satisfy:

- the check judges it: writes check/summary.json with a verdict other than
  `error` (unreadable) and exits with it, without a traceback: 0 or 1, or, for
  a run that did not finish and was judged as a prefix (verdict `incomplete`),
  that verdict's 3 (an older checker gave such a run 0 or 1);
- run.json says complete, incomplete or crashed; a crashed run has collected_at
  and every broker's replicas/<broker>/{log.jsonl,state.json};
- a harness that got SIGINT/SIGTERM exits 3 with one `isrlab:` line and closes its
  run itself (complete or incomplete, never left `running`); one SIGKILLed before
  its check leaves `running` (then `crashed` after the check), one SIGKILLed in
  its check leaves `complete`;
- nothing is left: no process the harness started (brokers, controller, Spark's
  JVM) nor any of its session, no process naming the run directory or holding a
  data directory of it, no node address still taken, and on Docker no container,
  network or volume labelled with its run id and no iptables rule of it (the
  run's `ISRLAB` chain, its bridge, its published ports).

Prints one line per run and a summary table (runs, kill points per phase,
statuses, exit codes, leftovers, time); exits 1 if any run broke a rule above.
tests/test_self_faults.py runs a small seeded batch through the same code.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from contract import PROCESS_FAULTS, PROTOCOLS  # noqa: E402
from contract.rundir import readable_meta  # noqa: E402
from harness.backends.local import leftover_processes  # noqa: E402
from harness.backends.owner import process_start  # noqa: E402
from harness.backends.ports import address_free  # noqa: E402
from harness.scenario.loader import find_scenario, list_scenarios, load_scenario  # noqa: E402

PHASES = ("start", "steps", "collection", "checking")
STATUSES = ("complete", "incomplete", "crashed")
SOFT = (signal.SIGINT, signal.SIGTERM)

RUN_TIMEOUT = 900.0  # a reproduce that neither reaches its kill point nor exits: hung
EXIT_TIMEOUT = 120.0  # for a SIGINT/SIGTERM harness to tear down and exit
CHECK_TIMEOUT = 900.0
GRACE = 30.0  # for what the harness started (Spark's JVM) to notice it is gone

_PREFIX = re.compile(r"^\[\s*\d+\.\d+s\] ")  # harness.progress.Progress


def strip_prefix(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\r\n"), count=1)


# -- kill points ------------------------------------------------------------------

# A kill point fires at the nth (0-based) occurrence of its trigger:
#   run         the `run <id>: ...` line: run.json written, the controller starting
#   node-log    (local) the nth+1 node log appearing in logs/: that node starting
#   step        a `step N (line L): ...` line
#   fault       a `fault window opens` line
#   final-read  the final read's line: collection comes next
#   collected   `replicas collected`: teardown and run.json closing come next
#   check       `checking ...` (nth 0) or one of the checker's progress lines
TRIGGERS = {
    "run": "start", "node-log": "start", "step": "steps", "fault": "steps",
    "final-read": "collection", "collected": "collection", "check": "checking",
}


def phase_opened_by(msg: str) -> str | None:
    """The phase a progress line (without its time prefix) starts, or None."""
    if msg.startswith("run ") and not msg.startswith("run: "):
        return "start"
    if msg.startswith(("cluster up", "step ")):
        return "steps"
    if msg.startswith(("  final read ", "replicas collected", "replicas not collected")):
        return "collection"
    if msg.startswith("checking ..."):
        return "checking"
    if msg.startswith(("verdict:", "isrlab: ")):
        return "ended"
    return None


@dataclass(frozen=True)
class KillPoint:
    trigger: str
    nth: int = 0

    @property
    def phase(self) -> str:
        return TRIGGERS[self.trigger]

    def __str__(self) -> str:
        return f"{self.trigger}#{self.nth}"


@dataclass(frozen=True)
class Plan:
    index: int
    scenario: str  # a shipped name or a path
    protocol: str
    point: KillPoint
    sig: signal.Signals
    seed: int  # the reproduce's --seed


def _counts(scenario: str, protocol: str) -> tuple[int, int, int]:
    """(steps, fault windows at least opened, brokers) of a scenario under protocol."""
    s = load_scenario(find_scenario(scenario))
    steps = s.steps_for(protocol)
    opens = sum(len(st.args["nodes"]) for st in steps
                if st.kind in PROCESS_FAULTS and st.kind not in ("start", "resume"))
    opens += sum(1 for st in steps if st.kind == "partition")
    return len(steps), opens, len(s.cluster_spec(protocol).brokers)


def _reachable(scenario: str, protocols: list[str]) -> list[str]:
    s = load_scenario(find_scenario(scenario))
    return [p for p in protocols if s.reachable_at(p)]


def make_plans(runs: int, seed: int, *, backend: str = "local",
               scenarios: list[str] | None = None, protocols: list[str] | None = None,
               max_check_line: int = 5,
               signals: tuple[tuple[signal.Signals, int], ...] = (
                   (signal.SIGKILL, 3), (signal.SIGINT, 1), (signal.SIGTERM, 1)),
               ) -> list[Plan]:
    """`runs` seeded kill plans. Phases go round in a shuffled order per round, so
    every four consecutive runs hit all four; within a phase the trigger, its
    occurrence, the signal, scenario and protocol are drawn from `seed`."""
    rng = random.Random(seed)
    scenarios = scenarios or [s.name for s in list_scenarios()]
    protocols = protocols or list(PROTOCOLS)
    sigs, weights = zip(*signals, strict=True)
    plans: list[Plan] = []
    order: list[str] = []
    for i in range(runs):
        if not order:
            order = rng.sample(PHASES, len(PHASES))
        phase = order.pop(0)
        scenario = rng.choice(scenarios)
        # Only a version the scenario's path exists in (`reachable`): a run elsewhere is
        # refused before it starts, with nothing to kill.
        protocol = rng.choice(_reachable(scenario, protocols) or protocols)
        nsteps, nfaults, nbrokers = _counts(scenario, protocol)
        if phase == "start":
            point = (KillPoint("node-log", rng.randrange(1 + nbrokers))
                     if backend == "local" and rng.random() < 0.5 else KillPoint("run"))
        elif phase == "steps":
            point = (KillPoint("fault", rng.randrange(nfaults)) if nfaults and rng.random() < 0.5
                     else KillPoint("step", rng.randrange(nsteps)))
        elif phase == "collection":
            point = KillPoint(rng.choice(["final-read", "collected"]))
        else:
            point = KillPoint("check", rng.randint(0, max_check_line))
        plans.append(Plan(i, scenario, protocol, point, rng.choices(sigs, weights)[0],
                          rng.randrange(2**31)))
    return plans


# -- watching a harness ---------------------------------------------------------------


class Tracker:
    """Follows a harness's progress lines: the phase it is in, fault windows open,
    how often each trigger has been seen, and its run id."""

    def __init__(self) -> None:
        self.phase = "launch"  # before its first line: loading, images, run.json
        self.open_windows: set[tuple[str, str]] = set()
        self.seen: Counter[str] = Counter()
        self.run_id: str | None = None
        self.lines: list[str] = []

    def feed(self, msg: str) -> list[str]:
        """Take one line; returns the triggers it counts for."""
        self.lines.append(msg)
        opened = phase_opened_by(msg)
        if opened is not None:
            self.phase = opened
        hits = []
        if msg.startswith("run ") and opened == "start":
            self.run_id = msg[4:].split(":", 1)[0]
            hits.append("run")
        elif msg.startswith("step "):
            hits.append("step")
        elif m := re.match(r"  fault window opens: (\S+) (\S+)", msg):
            self.open_windows.add((m[1], m[2]))
            hits.append("fault")
        elif m := re.match(r"  fault window closes: (\S+) was (\S+)", msg):
            self.open_windows.discard((m[1], m[2]))
        elif msg.startswith("  final read "):
            hits.append("final-read")
        elif msg.startswith("replicas collected"):
            hits.append("collected")
        if self.phase == "checking" and opened in ("checking", None):
            hits.append("check")
        for h in hits:
            self.seen[h] += 1
        return hits

    @property
    def landed(self) -> str:
        if self.phase == "steps" and self.open_windows:
            return "steps (fault window)"
        return {"launch": "start"}.get(self.phase, self.phase)


class LineReader:
    """Lines from a pipe, read without blocking (what is buffered, now)."""

    def __init__(self, stream: Any) -> None:
        self.fd = stream.fileno()
        os.set_blocking(self.fd, False)
        self.buf = b""
        self.eof = False

    def wait(self, timeout: float) -> None:
        if not self.eof:
            select.select([self.fd], [], [], timeout)

    def read(self) -> list[str]:
        while not self.eof:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self.eof = True
            self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        if self.eof and self.buf:
            lines.append(self.buf)
            self.buf = b""
        return [x.decode(errors="replace") for x in lines]


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace").strip()
    except OSError:
        return ""


def _all_pids() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, start time) of every live process whose parent chain reaches pid."""
    children: dict[int, list[int]] = {}
    for p in _all_pids():
        st = _stat(p)
        if st is not None and st[0] not in ("Z", "X"):
            children.setdefault(int(st[1]), []).append(p)
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            start = process_start(c)
            if start is not None:
                out.append((c, start))
            todo.append(c)
    return out


def without_checker_server(procs: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """`procs` less the warm checker server a run may start and its JVM: the server
    outlives the run by design (until its idle timeout or `isrlab checker stop`),
    so it is not a leftover of the run."""
    servers = {p for p, _ in procs if "-m checker.server" in _cmdline(p)}
    theirs = servers | {p for s in servers for p, _ in descendants(s)}
    return [(p, s) for p, s in procs if p not in theirs]


def session_members(sid: int) -> list[int]:
    """Live processes of session `sid` (a harness started as a session leader)."""
    out = []
    for p in _all_pids():
        st = _stat(p)
        if st is not None and st[0] not in ("Z", "X") and int(st[3]) == sid:
            out.append(p)
    return out


def _freeze(pid: int) -> bool:
    """SIGSTOP pid and wait until it is stopped; False if it has exited."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        st = _stat(pid)
        if st is None or st[0] in ("Z", "X"):
            return False
        if st[0] in ("T", "t"):
            return True
        time.sleep(0.002)
    return True  # stopping under heavy load; it is signalled either way


# -- one run -----------------------------------------------------------------------


@dataclass
class Outcome:
    plan: Plan
    backend: str
    landed: str | None = None  # the phase it was frozen in; None: exited before
    in_fault: bool = False
    reproduce_exit: int | None = None
    reproduce_stderr: str = ""
    run_dir: Path | None = None
    run_id: str | None = None
    status_before: str | None = None
    status_after: str | None = None
    check_exit: int | None = None
    verdict: str | None = None  # check/summary.json's
    check_output: str = ""
    leftovers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    started: list[tuple[int, str]] = field(default_factory=list)
    sid: int | None = None
    ports: list[str] = field(default_factory=list)  # node addresses (host:port)
    networks: list[str] = field(default_factory=list)  # docker network ids seen

    @property
    def ok(self) -> bool:
        return not self.problems and not self.leftovers


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def isrlab_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args]


def free_port(backend: str, brokers: int) -> int:
    """local: a port free on every 127.0.0.x a cluster of `brokers` uses; docker: a
    base with one free port per node after it."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if backend == "local":
            addrs = [f"127.0.0.{i}:{port}" for i in range(1, brokers + 2)]
        else:
            addrs = [f"127.0.0.1:{p}" for p in range(port, port + brokers + 1)]
        if port + brokers + 1 < 65535 and all(address_free(a) for a in addrs):
            return port
    raise RuntimeError("no free port")


def run_one(plan: Plan, runs_dir: Path, backend: str = "local", port: int | None = None,
            say: Callable[[str], None] = lambda _m: None) -> Outcome:
    """Start `isrlab reproduce` for `plan`, kill it at its kill point, wait for it to
    end. The run's directory is the one under runs_dir/<index>/."""
    out = Outcome(plan, backend)
    t0 = time.monotonic()
    home = runs_dir / f"{plan.index:02d}"
    home.mkdir(parents=True, exist_ok=True)
    _, _, nbrokers = _counts(plan.scenario, plan.protocol)
    port = port or free_port(backend, nbrokers)
    err_path = home / "reproduce.stderr"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            isrlab_command("reproduce", plan.scenario, "--protocol", plan.protocol,
                           "--backend", backend, "--port", str(port), "--seed", str(plan.seed),
                           "--runs-dir", str(home)),
            stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, cwd=ROOT,
            env=_env(), start_new_session=True)  # its own session: its leftovers are findable
    out.sid = proc.pid
    reader = LineReader(proc.stdout)
    tracker = Tracker()
    try:
        fired = _watch(proc, reader, tracker, plan.point, home)
        if fired:
            # Frozen: everything it printed is in the pipe. Read it, note what it
            # started, then deliver the signal.
            for line in reader.read():
                tracker.feed(strip_prefix(line))
            out.landed = tracker.landed.split(" ")[0]
            out.in_fault = tracker.landed.endswith("(fault window)")
            out.started = without_checker_server(descendants(proc.pid))
            out.networks = _docker_networks(tracker.run_id) if backend == "docker" else []
            os.kill(proc.pid, plan.sig)
            if plan.sig != signal.SIGKILL:
                os.kill(proc.pid, signal.SIGCONT)
            say(f"  {plan.sig.name} at {plan.point} in {tracker.landed}")
        try:
            proc.wait(EXIT_TIMEOUT if fired else RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            out.problems.append(f"harness did not exit within {EXIT_TIMEOUT:.0f}s of "
                                f"{plan.sig.name}" if fired else "harness hung")
            proc.kill()
            proc.wait()
        for line in reader.read():
            tracker.feed(strip_prefix(line))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    out.reproduce_exit = proc.returncode
    out.reproduce_stderr = err_path.read_text(errors="replace")
    dirs = [d for d in home.iterdir() if d.is_dir()]
    if len(dirs) == 1:
        out.run_dir = dirs[0]
        meta = readable_meta(out.run_dir)
        out.run_id = meta.get("run_id") or out.run_dir.name
        out.status_before = meta.get("status")
        addresses = (meta.get("cluster") or {}).get("addresses") or {}
        out.ports = sorted(addresses.values()) if isinstance(addresses, dict) else []
    else:
        out.problems.append(f"{len(dirs)} run directories in {home}")
    if not fired:
        out.problems.append(f"never reached its kill point {plan.point} (reproduce exited "
                            f"{proc.returncode}; last line: "
                            f"{tracker.lines[-1] if tracker.lines else 'none'})")
    _judge_harness(out, fired)
    out.seconds = time.monotonic() - t0
    return out


def _watch(proc: subprocess.Popen, reader: LineReader, tracker: Tracker, point: KillPoint,
           home: Path) -> bool:
    """Follow the harness until its kill point, then freeze it (True); False if it
    exited first."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline:
        fs_wait = point.trigger == "node-log" and tracker.phase in ("launch", "start")
        reader.wait(0.005 if fs_wait else 0.5)
        for line in reader.read():
            if point.trigger in tracker.feed(strip_prefix(line)) \
                    and tracker.seen[point.trigger] == point.nth + 1:
                return _freeze(proc.pid)
        if fs_wait and tracker.run_id is not None:
            logs = home / tracker.run_id / "logs"
            n = sum(1 for p in logs.glob("*.log") if p.name != "harness.log") \
                if logs.is_dir() else 0
            if n >= point.nth + 1:
                return _freeze(proc.pid)
        if reader.eof and proc.poll() is not None:
            return False
    return False


def _judge_harness(out: Outcome, fired: bool) -> None:
    """What the killed harness itself must have done."""
    if not fired:
        return
    p, err = out.plan, out.reproduce_stderr
    if "Traceback" in err:
        out.problems.append("reproduce printed a traceback")
    if p.sig in SOFT:
        last = (err.strip().splitlines() or [""])[-1]
        if not last.startswith("isrlab: interrupted"):
            out.problems.append(f"reproduce's last line after {p.sig.name}: {last!r}")
        if out.reproduce_exit != 3:
            out.problems.append(f"reproduce exited {out.reproduce_exit} after {p.sig.name}, "
                                "not 3")
        if out.status_before not in ("complete", "incomplete"):
            out.problems.append(f"after {p.sig.name} in {out.landed} the harness left its "
                                f"run {out.status_before!r}, not complete/incomplete")
    else:
        # run.json is closed after teardown, a moment before `checking ...`.
        want = {"checking": ("complete",), "ended": ("complete",),
                "collection": ("running", "complete")}.get(out.landed or "", ("running",))
        if out.status_before not in want:
            out.problems.append(f"SIGKILL in {out.landed} left run.json {out.status_before!r}, "
                                f"expected {' or '.join(want)}")


# -- checking and leftovers -------------------------------------------------------------


def check_each(outcomes: list[Outcome], say: Callable[[str], None] = lambda _m: None) -> None:
    """`isrlab check RUN_DIR` for each run, then judge it."""
    for o in outcomes:
        if o.run_dir is None:
            continue
        t0 = time.time()
        r = subprocess.run(isrlab_command("check", str(o.run_dir)), capture_output=True,
                           text=True, cwd=ROOT, env=_env(), timeout=CHECK_TIMEOUT,
                           start_new_session=True)
        o.check_exit, o.check_output = r.returncode, r.stdout + r.stderr
        (o.run_dir.parent / "check.log").write_text(o.check_output)
        o.seconds += time.time() - t0
        judge(o, since=t0, own_check=True)
        say(f"  run {o.plan.index:02d} checked: exit {o.check_exit}, {o.verdict}, "
            f"{o.status_after}{'' if o.ok else ' -- ' + '; '.join(o.problems + o.leftovers)}")


def check_batch(outcomes: list[Outcome], runs_dir: Path) -> float:
    """One `isrlab check runs_dir` over every run (a nightly batch); each run's check
    exit is its summary.json's. Returns the seconds it took."""
    t0 = time.time()
    r = subprocess.run(isrlab_command("check", str(runs_dir)), capture_output=True,
                       text=True, cwd=ROOT, env=_env(), timeout=CHECK_TIMEOUT,
                       start_new_session=True)
    (runs_dir / "check.log").write_text(r.stdout + r.stderr)
    for o in outcomes:
        if o.run_dir is None:
            continue
        o.check_output = r.stdout + r.stderr
        o.check_exit = _summary(o.run_dir, t0).get("exit_code")
        judge(o, since=t0, own_check=False)
        if o.check_exit is None:
            o.problems.append(f"batch check exited {r.returncode}: "
                              f"{(r.stderr.strip().splitlines() or [''])[-1]}")
    return time.time() - t0


def _summary(run_dir: Path, since: float) -> dict[str, Any]:
    """check/summary.json if a check since `since` (a time.time()) wrote it, else {}."""
    path = run_dir / "check" / "summary.json"
    try:
        if path.stat().st_mtime < since - 1:
            return {}
        s = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return s if isinstance(s, dict) else {}


def judge(o: Outcome, since: float, own_check: bool) -> None:
    """After the check: a checked run directory, and nothing of the run left.

    Checked: the check wrote check/summary.json with a verdict and exited with it:
    0 or 1, or -- for a run that did not finish, judged as a prefix (verdict
    "incomplete") -- that verdict's 3; never 2 (unreadable: verdict "error")."""
    assert o.run_dir is not None
    summary = _summary(o.run_dir, since)
    o.verdict = summary.get("verdict")
    meta = readable_meta(o.run_dir)
    o.status_after = meta.get("status")
    allowed = (0, 1, 3) if o.verdict == "incomplete" else (0, 1)
    if not summary:
        o.problems.append("not checked: no check/summary.json written")
    elif o.verdict == "error":
        o.problems.append(f"uncheckable: {summary.get('error')}")
    elif o.verdict == "incomplete" and o.status_after not in ("incomplete", "crashed"):
        o.problems.append(f"verdict incomplete for a run.json {o.status_after!r}")
    elif own_check and summary.get("exit_code") != o.check_exit:
        o.problems.append(f"summary.json exit_code {summary.get('exit_code')} != check's "
                          f"{o.check_exit}")
    if o.check_exit not in allowed:
        o.problems.append(f"check exited {o.check_exit}: "
                          f"{(o.check_output.strip().splitlines() or [''])[-1]}")
    if "Traceback" in o.check_output:
        o.problems.append("check printed a traceback")
    if o.status_after not in STATUSES:
        o.problems.append(f"run.json status {o.status_after!r} after the check")
    if o.status_after == "crashed":
        if not meta.get("collected_at"):
            o.problems.append("crashed run without collected_at")
        for b in (meta.get("cluster") or {}).get("brokers") or []:
            for name in ("log.jsonl", "state.json"):
                if not (o.run_dir / "replicas" / b / name).is_file():
                    o.problems.append(f"crashed run without replicas/{b}/{name}")
    o.leftovers = leftovers(o)


def leftovers(o: Outcome) -> list[str]:
    """What of the run is still there, in words; [] when nothing is."""
    found: list[str] = []
    deadline = time.monotonic() + GRACE
    while True:
        alive = [(p, s) for p, s in o.started if process_start(p) == s]
        session = session_members(o.sid) if o.sid else []
        if not alive and not session or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    found += [f"process {p} ({_cmdline(p)[:100]})" for p, _ in alive]
    found += [f"process {p} of the harness's session ({_cmdline(p)[:100]})"
              for p in session if p not in {q for q, _ in alive}]
    if o.run_dir is not None:
        found += [f"{what} {node} (pid {pid})"
                  for pid, _, node, what in leftover_processes(o.run_dir)]
        real = os.path.realpath(o.run_dir)
        me = os.getpid()
        found += [f"process {p} naming the run directory ({_cmdline(p)[:100]})"
                  for p in _all_pids() if p != me and real in _cmdline(p)
                  and not any(p == q for q, _ in alive)]
    found += [f"address {a} still taken" for a in o.ports if not address_free(a)]
    if o.backend == "docker" and o.run_id:
        found += [f"docker {x}" for x in docker_objects(o.run_id)]
    found += [f"iptables: {x}" for x in iptables_leftovers(o)]
    return found


def docker_objects(run_id: str) -> list[str]:
    """Containers, networks and volumes labelled with run_id."""
    from harness.backends.docker_image import LABEL_RUN, docker_client

    client = docker_client()
    try:
        label = {"label": f"{LABEL_RUN}={run_id}"}
        return ([f"container {c.name}" for c in client.containers.list(all=True, filters=label)]
                + [f"network {n.name}" for n in client.networks.list(filters=label)]
                + [f"volume {v.name}" for v in client.volumes.list(filters=label)])
    finally:
        client.close()


def _docker_networks(run_id: str | None) -> list[str]:
    if run_id is None:
        return []
    from harness.backends.docker_image import LABEL_RUN, docker_client

    client = docker_client()
    try:
        return [n.id for n in client.networks.list(filters={"label": f"{LABEL_RUN}={run_id}"})]
    finally:
        client.close()


def iptables_rules() -> list[str] | None:
    """Every host iptables rule (nf_tables and legacy); None if they cannot be read."""
    rules: list[str] = []
    readable = False
    for cmd in ("iptables-save", "iptables-legacy-save"):
        if shutil.which(cmd) is None:
            continue
        try:
            r = subprocess.run([cmd], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            readable = True
            rules += [x for x in r.stdout.splitlines() if x and not x.startswith("#")]
    return rules if readable else None


def iptables_leftovers(o: Outcome) -> list[str]:
    """Host iptables rules of the run: an ISRLAB chain (isrlab's own chain lives only
    inside containers), the bridge of its Docker network, its published ports."""
    rules = iptables_rules()
    if rules is None:
        return []
    bridges = {f"br-{n[:12]}" for n in o.networks}
    ports = {a.rpartition(":")[2] for a in o.ports} if o.backend == "docker" else set()

    def of_run(rule: str) -> bool:
        words = rule.split()
        dports = {w for prev, w in zip(words, words[1:], strict=False) if prev == "--dport"}
        return "ISRLAB" in rule or bool(bridges & set(words)) or bool(ports & dports)

    return [r for r in rules if of_run(r)]


# -- the batch ---------------------------------------------------------------------


def run_batch(plans: list[Plan], runs_dir: Path, backend: str = "local",
              port: int | None = None, batch_check: bool = False,
              say: Callable[[str], None] = lambda _m: None) -> tuple[list[Outcome], float]:
    """Every plan, then the checks; returns the outcomes and the total seconds."""
    t0 = time.monotonic()
    outcomes = []
    for plan in plans:
        say(f"run {plan.index:02d}: {plan.scenario} --protocol {plan.protocol}, "
            f"{plan.sig.name} at {plan.point}")
        outcomes.append(run_one(plan, runs_dir, backend, port, say))
        o = outcomes[-1]
        say(f"  reproduce exited {o.reproduce_exit}; run.json {o.status_before}")
    if batch_check:
        say("checking every run in one `isrlab check` ...")
        took = check_batch(outcomes, runs_dir)
        say(f"  took {took:.1f}s")
    else:
        check_each(outcomes, say)
    return outcomes, time.monotonic() - t0


def _tally(values: list[Any]) -> str:
    c = Counter(str(v) for v in values)
    return ", ".join(f"{k} {n}" for k, n in sorted(c.items())) or "-"


def table(outcomes: list[Outcome], seconds: float) -> str:
    rows = ["| # | scenario | protocol | signal | kill point | phase | reproduce exit "
            "| run.json before → after check | verdict | check exit | leftovers | s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        p = o.plan
        phase = (o.landed or "-") + (" (fault)" if o.in_fault else "")
        rows.append(f"| {p.index} | {Path(p.scenario).stem} | {p.protocol} | {p.sig.name} "
                    f"| {p.point} | {phase} | {o.reproduce_exit} | {o.status_before} → "
                    f"{o.status_after} | {o.verdict} | {o.check_exit} | {len(o.leftovers)} "
                    f"| {o.seconds:.0f} |")
    landed = [o.landed or "never" for o in outcomes]
    summary = [
        "",
        "| | |",
        "|---|---|",
        f"| runs | {len(outcomes)} ({outcomes[0].backend if outcomes else '-'}) |",
        "| kill points per phase | " + ", ".join(
            f"{ph} {landed.count(ph)}" + (f" ({sum(o.in_fault for o in outcomes)} in a fault "
                                           "window)" if ph == "steps" else "")
            for ph in PHASES) + (f", never reached {landed.count('never')}"
                                 if "never" in landed else "") + " |",
        f"| signals | {_tally([o.plan.sig.name for o in outcomes])} |",
        f"| reproduce exit codes | {_tally([o.reproduce_exit for o in outcomes])} |",
        f"| run.json after the kill | {_tally([o.status_before for o in outcomes])} |",
        f"| run.json after the check | {_tally([o.status_after for o in outcomes])} |",
        f"| verdicts | {_tally([o.verdict for o in outcomes])} |",
        f"| check exit codes | {_tally([o.check_exit for o in outcomes])} |",
        f"| leftovers | {sum(len(o.leftovers) for o in outcomes)} |",
        f"| runs breaking a rule | {sum(not o.ok for o in outcomes)} |",
        f"| time | {seconds:.0f} s |",
    ]
    return "\n".join(rows + summary)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--port", type=int, help="default: a free one per run")
    ap.add_argument("--scenario", action="append",
                    help="a shipped name or a scenario file (default: every shipped one)")
    ap.add_argument("--protocol", action="append", choices=PROTOCOLS,
                    help="default: every version")
    ap.add_argument("--max-check-line", type=int, default=5,
                    help="kill in the check at most at its Nth progress line")
    ap.add_argument("--runs-dir", type=Path, help="default: a temporary directory")
    ap.add_argument("--batch-check", action="store_true",
                    help="check every run in one `isrlab check DIR` instead of one each")
    args = ap.parse_args(argv)
    runs_dir = args.runs_dir or Path(tempfile.mkdtemp(prefix="isrlab-self-faults-"))
    plans = make_plans(args.runs, args.seed, backend=args.backend, scenarios=args.scenario,
                       protocols=args.protocol, max_check_line=args.max_check_line)
    print(f"runs in {runs_dir}", flush=True)
    outcomes, seconds = run_batch(plans, runs_dir, args.backend, args.port, args.batch_check,
                                  say=lambda m: print(m, flush=True))
    print()
    print(table(outcomes, seconds))
    bad = [o for o in outcomes if not o.ok]
    for o in bad:
        print(f"run {o.plan.index:02d} ({o.run_dir}): " + "; ".join(o.problems + o.leftovers))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
