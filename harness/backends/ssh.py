"""SSH backend: the controller and each broker on a host of a hosts file, over paramiko.

Before anything starts, every host is connected and checked in parallel
(`check_addresses`): reachable, key accepted, host key known, python3 >= 3.9,
setsid, the node's port free, iptables where the run partitions. Then the broker
package (stdlib-only Python) goes by SFTP into the run's directory on each host,
`<workdir>/<run-id>/`: code/, cluster.json, run-node.sh, data/<node>/,
logs/<node>.log, pids/<node>.{pid,exit} and isrlab-run.json (the run and its owner,
for `isrlab ssh clean`). Nothing of a run lives outside that directory.

A node runs detached (`setsid -f sh run-node.sh`): the SSH session's end does not
touch it. The wrapper records its pid and, when it exits, its exit status, so
faults are plain signals to that pid: kill = SIGKILL, stop = SIGTERM, pause/resume
= SIGSTOP/SIGCONT, power-cycle = SIGKILL + `broker.storage.drop_unsynced` on its
data directory (the broker owns its file format). Partitions are iptables DROP
rules in a chain of the run's own (`ISRLAB-<8 hex of the run id>`) on each
grudging node's host: heal flushes it, teardown deletes it, and `isrlab ssh
clean` deletes those of runs whose harness is gone.

Nodes listen on, and advertise, their host's address from the hosts file.
Teardown stops every node, removes the rules, brings the logs back and removes
the run's directory from every host; data directories of nodes that were down
at the end come back by SFTP when the replicas are collected (`data_dir`).
"""

from __future__ import annotations

import atexit
import json
import shlex
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import broker
from contract import CONTROLLER, LOGS
from harness.backends.artefacts import Salvage
from harness.backends.base import Backend
from harness.backends.fanout import parallel
from harness.backends.hostsfile import MIN_PYTHON, Host, HostsFile, load_hosts
from harness.backends.net import Grudge
from harness.backends.nodes import DROP_UNSYNCED_PY, LOG_TAIL_LINES
from harness.backends.owner import Owner
from harness.backends.spec import ClusterSpec
from harness.backends.ssh_clean import discard_run, salvage_run
from harness.backends.ssh_remote import Remote
from harness.backends.ssh_run import (
    HOSTS_RECORD,
    MARKER,
    chain_name,
    iptables,
    kill_run,
    remove_chain_script,
)
from harness.errors import HarnessError, RunIncomplete, UsageError

BROKER_DIR = Path(broker.__file__).resolve().parent
STATE_TTL = 0.25  # seconds a probed process state is trusted by is_running()
PROBE_TIMEOUT = 5.0  # seconds a state probe may take before the last known state stands

# Runs one node detached; its pid and exit status go where the harness reads them.
# `wait` returns 128+N for a node killed by signal N.
_RUN_NODE = """#!/bin/sh
# isrlab: one node of a run, detached from the SSH session (harness/backends/ssh.py).
# usage (in the run's directory): sh run-node.sh NODE PYTHON ARGS...
node=$1; shift
echo "--- isrlab: starting $node at $(date +%s) ---" >> "logs/$node.log"
PYTHONPATH="$PWD/code" PYTHONUNBUFFERED=1 "$@" >> "logs/$node.log" 2>&1 < /dev/null &
child=$!
echo "$child" > "pids/$node.pid.tmp" && mv "pids/$node.pid.tmp" "pids/$node.pid"
wait "$child"
echo "$?" > "pids/$node.exit.tmp" && mv "pids/$node.exit.tmp" "pids/$node.exit"
"""
_PREFLIGHT = r"""
command -v {py} >/dev/null 2>&1 || {{ echo "NOPYTHON"; exit 0; }}
{py} -c 'import sys; print("PYTHON %d.%d" % sys.version_info[:2])'
command -v setsid >/dev/null 2>&1 || echo NOSETSID
if [ -e {workdir} ]; then [ -d {workdir} ] && [ -w {workdir} ] || echo NOWORKDIR
else [ -w "$(dirname {workdir})" ] || echo NOWORKDIR; fi
"""
_PORT_FREE = (
    "import socket,sys\n"
    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "try: s.bind((sys.argv[1], int(sys.argv[2])))\n"
    "except OSError as e: print('BUSY', e.strerror or e); sys.exit(0)\n"
    "print('FREE')\n"
)

def broker_files() -> dict[str, bytes]:
    """code/broker/... : what a host needs to run a node."""
    out = {}
    for path in sorted(BROKER_DIR.rglob("*.py")):
        if "__pycache__" not in path.parts:
            out[f"code/broker/{path.relative_to(BROKER_DIR).as_posix()}"] = path.read_bytes()
    return out


def _exit_code(text: str) -> int | None:
    """A pids/NODE.exit file's status as subprocess reports it (a signal N: -N);
    None if it holds none (the node still runs)."""
    text = text.strip()
    if not text.isdigit():
        return None
    n = int(text)
    return -(n - 128) if n > 128 else n


@dataclass
class _NodeState:
    pid: int | None = None
    state: str = "absent"  # absent, running, paused, exited
    checked: float = 0.0


class SshBackend(Backend):
    name = "ssh"

    def __init__(
        self,
        spec: ClusterSpec,
        run_dir: Path,
        *,
        hosts: Path | HostsFile | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 15.0,
    ) -> None:
        super().__init__(spec, run_dir)
        if hosts is None:
            raise UsageError("the ssh backend needs --hosts HOSTS.yaml (docs/ssh.md)")
        self.hosts_file = hosts if isinstance(hosts, HostsFile) else load_hosts(Path(hosts))
        self.hosts: dict[str, Host] = self.hosts_file.assign(spec.brokers)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.run_id = run_dir.name
        self.chain = chain_name(self.run_id)
        self._uses_partitions = False
        self._remotes: dict[str, Remote] = {}  # Host.target -> its connection
        self._nodes = {n: _NodeState() for n in self.nodes}
        self._lock = threading.RLock()
        self._chains: set[str] = set()  # targets where the run's chain exists
        self._installed: set[str] = set()
        self._torn_down = False
        self._logs_saved = False
        atexit.register(self._atexit)

    # -- where things are ------------------------------------------------------

    def address(self, node: str) -> str:
        return f"{self._host(node).address}:{self._host(node).port}"

    def _host(self, node: str) -> Host:
        try:
            return self.hosts[node]
        except KeyError:
            raise UsageError(f"unknown node {node!r}") from None

    def rdir(self, node: str) -> str:
        """The run's directory on the node's host."""
        return f"{self._host(node).workdir}/{self.run_id}"

    def _remote(self, node: str) -> Remote:
        host = self._host(node)
        with self._lock:
            remote = self._remotes.get(host.target)
        if remote is None:
            raise RunIncomplete(f"{host.label()}: not connected (the run has not started)")
        return remote

    def _targets(self, nodes: Iterable[str] | None = None) -> dict[str, list[str]]:
        """Host target -> the nodes on it (of `nodes`, default every node)."""
        out: dict[str, list[str]] = {}
        for n in (self.nodes if nodes is None else nodes):
            out.setdefault(self.hosts[n].target, []).append(n)
        return out

    # -- before the run: connect, check, install --------------------------------

    def expect(self, step_kinds: set[str]) -> None:
        self._uses_partitions = "partition" in step_kinds

    def check_addresses(self) -> None:
        """Connect to every host and check it, in parallel; UsageError naming the
        host for what is wrong. Nothing is copied or started yet."""
        try:
            parallel(self._targets().values(), self._preflight)
        except BaseException:
            self._close_all()
            raise

    def _preflight(self, nodes: list[str]) -> None:
        host = self.hosts[nodes[0]]
        remote = Remote(host).connect()
        with self._lock:
            self._remotes[host.target] = remote
        try:
            _, out = remote.run(_PREFLIGHT.format(py=shlex.quote(host.python),
                                                  workdir=shlex.quote(host.workdir)))
        except RunIncomplete as e:
            raise UsageError(str(e)) from None
        if "NOPYTHON" in out:
            raise UsageError(f"{host.label()}: no {host.python} on the host; install Python "
                             f">= {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or set `python:` in "
                             f"{self.hosts_file.path}")
        version = next((line.split()[1] for line in out.splitlines()
                        if line.startswith("PYTHON ")), "")
        major, _, minor = version.partition(".")
        if not (major.isdigit() and minor.isdigit()) or (int(major), int(minor)) < MIN_PYTHON:
            raise UsageError(f"{host.label()}: {host.python} is {version or 'unusable'}; "
                             f"the broker needs >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]}")
        if "NOSETSID" in out:
            raise UsageError(f"{host.label()}: no setsid (util-linux) on the host")
        if "NOWORKDIR" in out:
            raise UsageError(f"{host.label()}: {host.user} cannot write {host.workdir} (set "
                             f"`workdir:` in {self.hosts_file.path} to a directory it owns)")
        for n in nodes:
            h = self.hosts[n]
            _, free = remote.run(f"{shlex.quote(h.python)} -c {shlex.quote(_PORT_FREE)} "
                                 f"{shlex.quote(h.address)} {h.port}")
            if not free.startswith("FREE"):
                raise UsageError(f"{h.label()}: cannot listen on {h.address}:{h.port}: "
                                 f"{free.strip().removeprefix('BUSY ') or 'unknown error'}")
        if self._uses_partitions:
            code, out = remote.run(f"{iptables(host)} -n -L INPUT >/dev/null", check=False)
            if code != 0:
                raise UsageError(f"{host.label()}: the run partitions the network but "
                                 f"iptables does not work there: {out.strip()[-200:]}"
                                 + ("" if host.sudo else " (sudo: true in the hosts file?)"))
        code, out = remote.run(f"test ! -e {shlex.quote(self.rdir(nodes[0]))}", check=False)
        if code != 0:
            raise UsageError(f"{host.label()}: {self.rdir(nodes[0])} already exists")

    def _install(self, nodes: list[str]) -> None:
        host = self.hosts[nodes[0]]
        remote = self._remote(nodes[0])
        config = self.run_dir / "cluster.json"  # written before the parallel installs
        marker = {"run_id": self.run_id, "run_dir": str(self.run_dir.resolve()),
                  "owner": Owner.this_process().as_record(), "chain": self.chain,
                  "nodes": nodes}
        files = {
            MARKER: json.dumps(marker, indent=2).encode(),
            "cluster.json": config.read_bytes(),
            "run-node.sh": _RUN_NODE.encode(),
            **broker_files(),
        }
        rdir = self.rdir(nodes[0])
        with self._lock:
            self._installed.add(host.target)
        remote.put_files(rdir, files)
        remote.run(f"cd {shlex.quote(rdir)} && mkdir -p logs pids "
                   + " ".join(f"data/{shlex.quote(n)}" for n in nodes))

    def _write_hosts_record(self) -> None:
        record = {n: {"address": h.address, "port": h.port, "workdir": h.workdir}
                  for n, h in self.hosts.items()}
        path = self.run_dir / HOSTS_RECORD
        if not path.exists():
            path.write_text(json.dumps({"hosts_file": str(self.hosts_file.path.resolve()),
                                        "chain": self.chain, "nodes": record}, indent=2) + "\n")

    # -- lifecycle ---------------------------------------------------------------

    def start_controller(self) -> None:
        # The first start installs the broker on every host, in parallel (the run
        # directory exists now; a failure from here on is teardown's to clean up).
        if not self._installed:
            # Written once, here: the installs run in parallel and all copy it (one
            # writing while another read it sent a host an empty file).
            self.run_dir.mkdir(parents=True, exist_ok=True)
            config = self.run_dir / "cluster.json"
            if not config.exists():
                self.write_process_config(config)
            self._write_hosts_record()
            parallel(self._targets().values(), self._install)
        self._start(CONTROLLER)

    def start(self, node: str) -> None:
        self._host(node)  # validates the name
        self._start(node)

    def _command(self, node: str) -> list[str]:
        h = self.hosts[node]
        common = ["--listen", self.address(node), "--data-dir", f"data/{node}",
                  "--config", "cluster.json"]
        if node == CONTROLLER:
            return [h.python, "-m", "broker.controller", *common]
        return [h.python, "-m", "broker.server", "--id", node, *common,
                "--controller", self.address(CONTROLLER)]

    def start_script(self, node: str) -> str:
        """sh that starts `node` detached on its host (run-node.sh) and prints its
        pid; what a target hosts file's `kafka.start` of a node of this backend is."""
        q = shlex.quote
        pid_file, exit_file = f"pids/{q(node)}.pid", f"pids/{q(node)}.exit"
        argv = " ".join(q(a) for a in self._command(node))
        return (f"cd {q(self.rdir(node))} && rm -f {pid_file} {exit_file} && "
                f"setsid -f sh run-node.sh {q(node)} {argv} >/dev/null 2>&1 </dev/null; "
                f"i=0; while [ ! -s {pid_file} ]; do i=$((i+1)); "
                f"if [ $i -gt 500 ]; then echo 'no pid file' >&2; exit 1; fi; sleep 0.01; "
                f"done; cat {pid_file}")

    def _start(self, node: str) -> None:
        self.wait_exited(node, self.stop_timeout)
        _, out = self._remote(node).run(self.start_script(node))
        with self._lock:
            st = self._nodes[node]
            st.pid, st.state, st.checked = int(out.split()[-1]), "running", time.monotonic()
        self.wait_ready(node)
        self.net.reapply_delays(node)  # a delay outlives a restart (iptables rules do anyway)

    # -- state (thread-safe) --------------------------------------------------------

    def _probe(self, node: str, pid: int | None) -> str:
        """The node's state as its host sees it now: running, exited or absent."""
        q = shlex.quote
        _, out = self._remote(node).run(
            f"cd {q(self.rdir(node))} && if [ -s pids/{q(node)}.exit ]; then echo exited; "
            f"elif kill -0 {pid} 2>/dev/null; then echo running; else echo absent; fi",
            timeout=PROBE_TIMEOUT)
        return out.strip() or "absent"

    def _state(self, node: str, fresh: bool = False) -> str:
        """The node's state, probed on its host when the cached one is older than
        STATE_TTL (or `fresh`). The probe runs outside the lock, so a slow host
        delays only the threads asking about its own nodes."""
        with self._lock:
            st = self._nodes.get(node)
            if st is None:
                return "absent"
            now = time.monotonic()
            if st.state not in ("running", "paused") or (
                    not fresh and now - st.checked <= STATE_TTL):
                return st.state
            st.checked = now  # meanwhile, other threads take the cached state
            pid = st.pid
        try:
            seen = self._probe(node, pid)
        except RunIncomplete:
            seen = "running"  # the host hiccupped; keep the last known state
        with self._lock:
            # Only about the incarnation probed: a restart meanwhile has a new pid.
            if seen != "running" and st.pid == pid and st.state in ("running", "paused"):
                st.state = seen
            return st.state

    def _set_state(self, node: str, state: str) -> None:
        with self._lock:
            st = self._nodes[node]
            st.state, st.checked = state, time.monotonic()

    def is_running(self, node: str) -> bool:
        return self._state(node) in ("running", "paused")

    def is_paused(self, node: str) -> bool:
        return self._state(node) == "paused"

    # -- what the readiness wait (Nodes.wait_ready) asks -------------------------------

    def has_exited(self, node: str) -> bool:
        return self._state(node, fresh=True) not in ("running", "paused")

    def exit_status(self, node: str) -> int | None:
        code, out = self._remote(node).run(
            f"cat {shlex.quote(self.rdir(node))}/pids/{shlex.quote(node)}.exit", check=False)
        return _exit_code(out) if code == 0 else None

    def log_tail(self, node: str) -> str:
        try:
            _, out = self._remote(node).run(
                f"tail -n {LOG_TAIL_LINES} {shlex.quote(self.rdir(node))}/logs/"
                f"{shlex.quote(node)}.log", check=False)
        except RunIncomplete:
            return ""
        return out.rstrip("\n")

    def log_name(self, node: str) -> str:
        return f"{self._host(node).name}:{self.rdir(node)}/logs/{node}.log"

    def node_log(self, node: str) -> str | None:
        try:
            code, out = self._remote(node).run(
                f"cat {shlex.quote(self.rdir(node))}/logs/{shlex.quote(node)}.log",
                check=False)
        except RunIncomplete:
            return None
        return out if code == 0 else None

    # -- process faults ------------------------------------------------------------

    def _live_pid(self, node: str, what: str) -> int:
        state = self._state(node, fresh=True)
        if state not in ("running", "paused"):
            raise RunIncomplete(f"cannot {what} {node}: it is not running ({state})")
        pid = self._nodes[node].pid
        assert pid is not None
        return pid

    def _signal_and_wait(self, node: str, signals: list[str], timeout: float) -> int | None:
        """Send `signals` to the node's process, wait up to `timeout` s for it to exit;
        its exit status, or None if it still runs."""
        q = shlex.quote
        pid = self._nodes[node].pid
        exit_file = f"{q(self.rdir(node))}/pids/{q(node)}.exit"
        sends = "; ".join(f"kill -{s} {pid} 2>/dev/null" for s in signals)
        steps = max(1, int(timeout / 0.02))
        _, out = self._remote(node).run(
            f"{sends}; i=0; while [ ! -s {exit_file} ] && [ $i -lt {steps} ]; do "
            f"i=$((i+1)); sleep 0.02; done; cat {exit_file} 2>/dev/null || echo RUNNING",
            timeout=timeout + self._host(node).command_timeout, check=False)
        exit_code = _exit_code(out)
        if exit_code is not None:
            self._set_state(node, "exited")
        return exit_code

    def stop(self, node: str) -> int | None:
        self._live_pid(node, "stop")
        # SIGCONT first: a stopped process acts on SIGTERM only once it runs.
        code = self._signal_and_wait(node, ["CONT", "TERM"], self.stop_timeout)
        if code is None:
            self._signal_and_wait(node, ["KILL"], 10)
            raise RunIncomplete(
                f"{node} did not shut down within {self.stop_timeout:.0f}s of SIGTERM")
        return code

    def kill(self, node: str) -> None:
        self._live_pid(node, "kill")
        # As it is: a frozen process dies frozen, without answering what it holds.
        if self._signal_and_wait(node, ["KILL"], 10) is None:
            raise RunIncomplete(f"{node} did not die of SIGKILL within 10s")

    def pause(self, node: str) -> None:
        pid = self._live_pid(node, "pause")
        self._remote(node).run(f"kill -STOP {pid}")
        self._set_state(node, "paused")

    def resume(self, node: str) -> None:
        pid = self._live_pid(node, "resume")
        self._remote(node).run(f"kill -CONT {pid}")
        self._set_state(node, "running")

    def power_cycle(self, node: str) -> None:
        self.kill(node)
        self.drop_unsynced(node)

    def drop_unsynced(self, node: str) -> dict[str, int]:
        """broker.storage.drop_unsynced on the node's data directory, on its host."""
        q = shlex.quote
        h = self._host(node)
        _, out = self._remote(node).run(
            f"cd {q(self.rdir(node))} && PYTHONPATH=code {q(h.python)} -c "
            f"{q(DROP_UNSYNCED_PY)} data/{q(node)}")
        return json.loads(out.strip().splitlines()[-1]) if out.strip() else {}

    # -- network faults ----------------------------------------------------------------

    def check_grudge(self, grudge: Grudge) -> None:
        for node, peers in grudge.items():
            for p in peers:
                if self.hosts[p].address == self.hosts[node].address:
                    raise UsageError(
                        f"cannot cut {node} from {p}: both run on {self.hosts[p].address}; "
                        "partitions need a host address per node")

    def firewall(self) -> Callable[[Grudge], None]:
        return lambda _grudge: self._sync_rules()  # the rules read self.net.grudge

    def _rules(self, nodes: list[str]) -> str:
        """The whole rule set of one host: drop what its nodes must not hear."""
        ipt = iptables(self.hosts[nodes[0]])
        c = self.chain
        lines = [f"{ipt} -N {c} 2>/dev/null || {ipt} -F {c}",
                 f"{ipt} -C INPUT -j {c} 2>/dev/null || {ipt} -I INPUT -j {c}"]
        peers = sorted({p for n in nodes for p in self.net.grudge.get(n, [])})
        for p in peers:
            lines.append(f"{ipt} -A {c} -s {shlex.quote(self.hosts[p].address)} -j DROP")
        return "\n".join(lines)

    def _sync_rules(self) -> None:
        """Every host's rules as the current grudge says (hosts as rules are host-wide,
        a node restarted during a partition stays cut off)."""
        def one(nodes: list[str]) -> None:
            target = self.hosts[nodes[0]].target
            if not any(self.net.grudge.get(n) for n in nodes) and target not in self._chains:
                return
            self._remote(nodes[0]).run("set -e\n" + self._rules(nodes))
            with self._lock:
                self._chains.add(target)

        parallel(self._targets().values(), one)

    # -- observation ---------------------------------------------------------------------

    def data_dir(self, node: str) -> Path | None:
        """A copy of the node's data directory under run_dir/data/<node>, taken now."""
        dest = self.run_dir / "data" / node
        try:
            remote = self._remote(node)
        except RunIncomplete:
            return dest if dest.is_dir() else None
        shutil.rmtree(dest, ignore_errors=True)
        if not remote.get_tree(f"{self.rdir(node)}/data/{node}", dest):
            return None
        return dest

    def collect_logs(self, run_dir: Path) -> None:
        """Each node's log into run_dir/logs/<node>.log (teardown does it before it
        removes the hosts' copies; a later call keeps what was saved)."""
        if self._logs_saved:
            return

        def one(nodes: list[str]) -> None:
            for n in nodes:
                self._remote(n).get_file(f"{self.rdir(n)}/logs/{n}.log",
                                         run_dir / LOGS / f"{n}.log")

        with self._lock:
            connected = [ns for t, ns in self._targets().items()
                         if t in self._remotes and t in self._installed]
        parallel(connected, one)
        self._logs_saved = True

    # -- teardown -------------------------------------------------------------------------

    def teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        errors: list[str] = []
        with self._lock:
            started = [n for n in self.nodes if self._nodes[n].pid is not None]
        # Brokers first, all at once, so their controlled shutdown still finds the
        # controller; anything still there after 5 s is killed.
        for group in ([n for n in started if n != CONTROLLER],
                      [n for n in started if n == CONTROLLER]):
            self._stop_group(group, errors)
        try:
            self.collect_logs(self.run_dir)
        except HarnessError as e:
            errors.append(str(e))

        def clean(nodes: list[str]) -> None:
            host = self.hosts[nodes[0]]
            if host.target not in self._installed:
                return
            remote, rdir = self._remote(nodes[0]), self.rdir(nodes[0])
            kill_run(remote, rdir)  # whatever the stop above missed
            # The workdir too, once no run is left in it: nothing of isrlab stays behind.
            remote.run(f"{remove_chain_script(host, self.chain)}; rm -rf {shlex.quote(rdir)}; "
                       f"rmdir {shlex.quote(host.workdir)} 2>/dev/null; true")

        with self._lock:
            connected = [ns for t, ns in self._targets().items() if t in self._remotes]
        for nodes in connected:
            try:
                clean(nodes)
            except HarnessError as e:
                errors.append(str(e))
        self._close_all()
        for n in self.nodes:
            self._set_state(n, "absent")
        if errors:
            print(f"isrlab: ssh teardown of run {self.run_id} incomplete: {errors[0]}; "
                  f"run `isrlab ssh clean --hosts {self.hosts_file.path}`", file=sys.stderr)

    def _stop_group(self, nodes: list[str], errors: list[str]) -> None:
        def one(node: str) -> None:
            if self._state(node, fresh=True) not in ("running", "paused"):
                return
            if self._signal_and_wait(node, ["CONT", "TERM"], 5.0) is None:
                self._signal_and_wait(node, ["KILL"], 10.0)

        for node in nodes:
            try:
                one(node)
            except HarnessError as e:
                errors.append(str(e))

    def _close_all(self) -> None:
        with self._lock:
            remotes, self._remotes = list(self._remotes.values()), {}
        for r in remotes:
            r.close()

    def _atexit(self) -> None:
        # A harness that exits without reaching teardown still stops its nodes.
        if not self._torn_down and self._remotes:
            self.teardown()

    # -- a run whose harness died ---------------------------------------------------------

    @classmethod
    def salvage(cls, run_dir: Path, run_id: str, brokers: list[str]) -> Salvage:
        return salvage_run(run_dir, run_id, brokers)

    @classmethod
    def discard(cls, run_id: str) -> str | None:
        return discard_run(run_id)
