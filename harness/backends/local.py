"""Local backend: the controller and the brokers as subprocesses on 127.0.0.x.

The controller listens on 127.0.0.1:PORT and broker i on 127.0.0.(i+2):PORT, so
every node has an address of its own while sharing one port number (Linux routes
all of 127/8 to loopback). Each process runs in its own session/process group
(signals reach the whole group, and a Ctrl-C at the terminal reaches only the
harness, which then shuts the cluster down in order), writes stdout and stderr
to logs/<node>.log, and keeps its data under data/<node>/ in the run directory.

Every process asks the kernel to SIGKILL it when the harness dies, so a SIGKILLed
harness leaves its data directories behind but (almost) no process; `salvage`
finds any that is left by its command line (`--data-dir` under the run's data/)
and kills it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from contract import CONTROLLER, LOGS
from harness.backends import reaper
from harness.backends.admin import command
from harness.backends.artefacts import Salvage
from harness.backends.base import Backend
from harness.backends.net import Grudge
from harness.backends.nodes import log_tail
from harness.backends.owner import process_start
from harness.backends.ports import address_free, address_in_use, check_port_range
from harness.backends.spec import ClusterSpec
from harness.errors import RunIncomplete, UsageError

DATA = "data"  # run_dir/data/<node>/: each node's data directory
_MODULES = {"broker.server": "broker", "broker.controller": "controller"}

# Runs in the child before the broker: asks the kernel to SIGKILL it if the
# harness dies without cleaning up (even by SIGKILL), then execs the real
# command. An exec wrapper instead of preexec_fn because preexec_fn is unsafe
# while other threads (the events collector) run.
_PDEATHSIG = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


@dataclass
class _Proc:
    popen: subprocess.Popen[bytes]
    log: IO[bytes]
    paused: bool = False


class LocalBackend(Backend):
    name = "local"

    def __init__(
        self,
        spec: ClusterSpec,
        run_dir: Path,
        *,
        port: int = 19092,
        host_prefix: str = "127.0.0.",
        python: str = sys.executable,
        start_timeout: float = 20.0,
        stop_timeout: float = 15.0,
    ) -> None:
        super().__init__(spec, run_dir)
        # Every node listens on the same port, and a broker's Kafka listener on the
        # next one (broker/PROTOCOL.md).
        check_port_range(self.name, port, 2)
        self.port = port
        self.host_prefix = host_prefix
        self.modules = {CONTROLLER: "broker.controller", "broker": "broker.server"}
        self.python = python
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._procs: dict[str, _Proc] = {}
        self._lock = threading.Lock()
        self._config_path = run_dir / "cluster.json"
        self._pythonpath = [str(Path(__file__).resolve().parents[2])]

    # -- addresses ---------------------------------------------------------

    def address(self, node: str) -> str:
        if node == CONTROLLER:
            return f"{self.host_prefix}1:{self.port}"
        try:
            i = self.spec.brokers.index(node)
        except ValueError:
            raise UsageError(f"unknown node {node!r}") from None
        return f"{self.host_prefix}{i + 2}:{self.port}"

    def data_dir(self, node: str) -> Path:
        return node_data_dir(self.run_dir, node)

    def log_path(self, node: str) -> Path:
        return self.run_dir / LOGS / f"{node}.log"

    # -- state -------------------------------------------------------------

    def is_running(self, node: str) -> bool:
        with self._lock:
            proc = self._procs.get(node)
        return proc is not None and proc.popen.poll() is None

    def is_paused(self, node: str) -> bool:
        with self._lock:
            proc = self._procs.get(node)
        return proc is not None and proc.paused and proc.popen.poll() is None

    def pid(self, node: str) -> int | None:
        with self._lock:
            proc = self._procs.get(node)
        return proc.popen.pid if proc is not None and proc.popen.poll() is None else None

    # -- lifecycle ---------------------------------------------------------

    def start_controller(self) -> None:
        self._start(CONTROLLER)

    def start(self, node: str) -> None:
        if node == CONTROLLER:
            self._start(CONTROLLER)
            return
        self.address(node)  # validates the name
        self._start(node)

    def _command(self, node: str) -> list[str]:
        if not self._config_path.exists():
            self.write_process_config(self._config_path)
        common = [
            "--listen", self.address(node),
            "--data-dir", str(self.data_dir(node)),
            "--config", str(self._config_path),
        ]
        if node == CONTROLLER:
            return [self.python, "-m", self.modules[CONTROLLER], *common]
        return [
            self.python, "-m", self.modules["broker"], "--id", node, *common,
            "--controller", self.address(CONTROLLER),
        ]

    def _start(self, node: str) -> None:
        self.wait_exited(node, self.stop_timeout)
        with self._lock:
            exited = node in self._procs
        if exited:
            self._reap(node)  # its exit status and log handle
        addr = self.address(node)
        kafka = [] if node == CONTROLLER else [self.kafka_address(node)]
        busy = [a for a in (addr, *kafka) if not address_free(a)]
        if busy:
            raise address_in_use(busy[0], node)
        self.data_dir(node).mkdir(parents=True, exist_ok=True)
        log_path = self.log_path(node)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "ab")  # noqa: SIM115 - owned by _Proc, closed on reap
        log.write(f"--- isrlab: starting {node} at {time.time():.3f} ---\n".encode())
        log.flush()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [*self._pythonpath, *filter(None, [env.get("PYTHONPATH")])]
        )
        env["PYTHONUNBUFFERED"] = "1"
        cmd = [self.python, "-I", "-S", "-c", _PDEATHSIG, str(os.getpid()), *self._command(node)]
        popen = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,  # own process group: killpg reaches it, Ctrl-C does not
        )
        reaper.register(popen.pid)
        with self._lock:
            self._procs[node] = _Proc(popen, log)
        self.wait_ready(node)
        if self.net.grudge.get(node):
            self._net_block(node, self.net.grudge[node])  # a partition outlives a restart
        self.net.reapply_delays(node)  # so does a delay

    # -- what the readiness wait (Nodes.wait_ready) asks -----------------------

    def has_exited(self, node: str) -> bool:
        with self._lock:
            proc = self._procs.get(node)
        return proc is None or proc.popen.poll() is not None

    def exit_status(self, node: str) -> int | None:
        return self._reap(node)

    def log_tail(self, node: str) -> str:
        return log_tail(self.log_path(node))

    def log_name(self, node: str) -> str:
        return str(self.log_path(node))

    def node_log(self, node: str) -> str | None:
        try:
            return self.log_path(node).read_text(errors="replace")
        except OSError:
            return None

    def _signal(self, node: str, sig: signal.Signals) -> _Proc:
        with self._lock:
            proc = self._procs.get(node)
        if proc is None or proc.popen.poll() is not None:
            raise RunIncomplete(f"cannot send {sig.name} to {node}: it is not running")
        try:
            os.killpg(proc.popen.pid, sig)
        except ProcessLookupError:
            pass
        return proc

    def _reap(self, node: str) -> int | None:
        with self._lock:
            proc = self._procs.pop(node, None)
        if proc is None:
            return None
        code = proc.popen.wait()
        # The group leader is gone; anything else in the group must go too.
        reaper.kill_group(proc.popen.pid)
        reaper.unregister(proc.popen.pid)
        proc.log.close()
        return code

    def stop(self, node: str) -> int | None:
        proc = self._signal(node, signal.SIGCONT)  # SIGTERM waits while a process is stopped
        proc.paused = False
        os.killpg(proc.popen.pid, signal.SIGTERM)
        try:
            proc.popen.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            reaper.kill_group(proc.popen.pid)
            self._reap(node)
            raise RunIncomplete(
                f"{node} did not shut down within {self.stop_timeout:.0f}s of SIGTERM"
            ) from None
        return self._reap(node)

    def kill(self, node: str) -> None:
        self._signal(node, signal.SIGKILL)
        self._reap(node)

    def pause(self, node: str) -> None:
        self._signal(node, signal.SIGSTOP).paused = True

    def resume(self, node: str) -> None:
        self._signal(node, signal.SIGCONT).paused = False

    def power_cycle(self, node: str) -> None:
        self.kill(node)
        from broker.storage import drop_unsynced  # the broker owns its file format

        drop_unsynced(str(self.data_dir(node)))

    # -- network faults ------------------------------------------------------

    def firewall(self) -> Callable[[Grudge], None]:
        return self._net_block_all

    def _net_block_all(self, grudge: Grudge) -> None:
        """Loopback has no network to cut, so each process cuts itself off with the
        broker's `net-block` admin request: node X stops answering and sending to
        every peer in grudge[X] (both directions, at X). Clients and the harness
        still reach every node."""
        for node in self.nodes:
            if self.is_running(node):
                self._net_block(node, grudge.get(node, []))

    def _net_block(self, node: str, peers: list[str]) -> None:
        if self.is_paused(node):
            raise RunIncomplete(f"cannot change {node}'s partition while it is paused")
        command(node, self.address(node), "net-block", peers=peers)

    def collect_logs(self, run_dir: Path) -> None:
        # Processes already write into run_dir/logs; nothing to copy.
        return None

    @classmethod
    def salvage(cls, run_dir: Path, run_id: str, brokers: list[str]) -> Salvage:
        stopped = []
        for pid, start, node, what in leftover_processes(run_dir):
            try:
                own_group = os.getpgid(pid) == pid
            except ProcessLookupError:
                continue
            if own_group:
                reaper.kill_group(pid)
            else:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        break
            deadline = time.monotonic() + 10.0
            while process_start(pid) == start and time.monotonic() < deadline:
                time.sleep(0.02)
            stopped.append(f"{what if what == node else f'{what} {node}'} (pid {pid})")
        return Salvage(stopped, {b: node_data_dir(run_dir, b) for b in brokers})

    def teardown(self) -> None:
        with self._lock:
            nodes = list(self._procs)
        brokers = [n for n in nodes if n != CONTROLLER]
        # Brokers first, all at once, so their controlled shutdown still finds
        # the controller; then the controller.
        for group in (brokers, [n for n in nodes if n == CONTROLLER]):
            for node in group:
                with self._lock:
                    proc = self._procs.get(node)
                if proc is None:
                    continue
                for sig in (signal.SIGCONT, signal.SIGTERM):
                    try:
                        os.killpg(proc.popen.pid, sig)
                    except ProcessLookupError:
                        break
            deadline = time.monotonic() + 5.0
            for node in group:
                with self._lock:
                    proc = self._procs.get(node)
                if proc is None:
                    continue
                try:
                    proc.popen.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    reaper.kill_group(proc.popen.pid)
                self._reap(node)


def node_data_dir(run_dir: Path, node: str) -> Path:
    """Where the local backend keeps `node`'s data: run_dir/data/<node>."""
    return run_dir / DATA / node


def leftover_processes(run_dir: Path) -> list[tuple[int, str, str, str]]:
    """(pid, start time, node, "broker" or "controller") of every live broker or
    controller process whose data directory is in run_dir/data/ -- what a killed
    harness may have left running. Found in /proc: the `--data-dir` of each
    process's command line, taken relative to its working directory."""
    data = os.path.realpath(run_dir / DATA)
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue  # gone, or another user's
        args = argv.split("\0")
        what = next((_MODULES[a] for a in args if a in _MODULES), None)
        if what is None or "--data-dir" not in args[:-1]:
            continue
        data_dir = os.path.realpath(os.path.join(cwd, args[args.index("--data-dir") + 1]))
        start = process_start(pid)
        if os.path.dirname(data_dir) == data and start is not None:
            found.append((pid, start, os.path.basename(data_dir), what))
    return sorted(found)
