"""The cluster interface every backend implements (Jepsen's DB protocol).

A backend owns the controller and broker processes of one run: it starts and
stops them, injects process-level faults, and knows the address under which the
harness reaches each node. It never judges and never talks the client protocol
beyond the readiness check. Node names are the broker ids of the scenario ("A",
"B", ...); the controller is the node named CONTROLLER.

Network faults are `partition()`/`heal()`: the local backend asks each process
to cut itself off (the broker's `net-block`), the docker backend uses iptables;
a backend that cannot do either keeps the default, which refuses.

A Backend is what the nemesis drives: it satisfies `nemesis.Cluster` (nemesis
declares what it needs and never imports the harness).

Readiness is one policy for every backend (`_wait_ready`): poll until the node
answers `status`; a node that exits first is a usage error if the process
refused its configuration (exit 2) or its address (exit 3, "address in use"),
else an incomplete run, with the last LOG_TAIL_LINES lines of its log. A backend
supplies only how to see that its process exited, its exit status, and its log.
"""

from __future__ import annotations

import json
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract import CONTROLLER
from harness.errors import RunIncomplete, UsageError
from harness.run import admin
from harness.run.admin import try_status
from nemesis import delays
from workloads.runtime import REAL, Runtime

LOG_TAIL_LINES = 15  # of a node's log, in the error when it dies before it is ready
MAX_PORT = 65535

# `python3 -c DROP_UNSYNCED_PY DATA_DIR`: a power cycle's second half where the data
# directory is not readable from here (a container's volume, an SSH host); the broker
# owns its file format. Prints what was dropped, as JSON.
DROP_UNSYNCED_PY = (
    "import json, sys\n"
    "from broker.storage import drop_unsynced\n"
    "print(json.dumps(drop_unsynced(sys.argv[1])))\n"
)

# Exit statuses of a broker or controller process (broker.process.run_main) that
# mean "your configuration", not "the run failed".
_EXIT_BAD_CONFIG = 2
_EXIT_ADDRESS_IN_USE = 3


def check_port_range(backend: str, first: int, count: int) -> None:
    """Raise UsageError unless ports first..first+count-1 are all valid TCP ports."""
    last = first + count - 1
    if first < 1 or last > MAX_PORT:
        what = f"port {first}" if count == 1 else f"ports {first}..{last}"
        fix = f"; give --port 1..{MAX_PORT - count + 1}" if MAX_PORT - count + 1 >= 1 else ""
        raise UsageError(f"the {backend} backend needs {what}, outside 1..{MAX_PORT}{fix}")


def address_free(addr: str) -> bool:
    """True if a listening socket could bind addr. SO_REUSEADDR as asyncio's
    servers use it, so TIME_WAIT leftovers of a previous run do not count as busy."""
    host, _, port = addr.rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(port)))
            s.listen(1)
        except OSError:
            return False
    return True


def address_in_use(addr: str, node: str) -> UsageError:
    """The "address in use" error, naming the isrlab container that holds the port
    if one does (a leftover of a crashed Docker run: `isrlab docker clean`)."""
    holder = None
    try:
        # Imported here: the docker SDK is only needed by those who use Docker, and
        # this is asked only once an address is taken.
        from harness.backends.docker_image import port_holder

        holder = port_holder(int(addr.rpartition(":")[2]))
    except ImportError:
        pass
    return UsageError(f"address in use: {addr} (needed by {node}); "
                      f"{holder or 'try another --port'}")


@dataclass
class Salvage:
    """What `Backend.salvage` found of a crashed run."""

    stopped: list[str]  # what still ran and was stopped, in words ("broker A (pid 123)")
    data_dirs: dict[str, Path | None]  # broker -> its data directory here (None: no data)


@dataclass(frozen=True)
class ClusterSpec:
    """What to run: the part of a scenario a backend needs."""

    protocol: str
    brokers: list[str]
    topics: list[dict[str, Any]]
    broker_config: dict[str, Any] = field(default_factory=dict)
    controller_config: dict[str, Any] = field(default_factory=dict)

    def process_config(self, addresses: dict[str, str]) -> dict[str, Any]:
        """The JSON document shared by the controller and every broker (PROTOCOL.md)."""
        return {
            "protocol": self.protocol,
            "brokers": {b: addresses[b] for b in self.brokers},
            "topics": self.topics,
            "broker": self.broker_config,
            "controller": self.controller_config,
        }


class Backend(ABC):
    """One run's cluster. Every method is called from the harness's main thread,
    except `address`, `is_running` and `is_paused`, which must be thread-safe
    (the events collector and the clients call them)."""

    name: str = "abstract"
    start_timeout: float = 20.0  # seconds a starting node has to answer `status`
    # Clock, connections and threads of the run (the sim backend: virtual ones).
    rt: Runtime = REAL
    # A backend whose runs a seed decides entirely (the simulator) takes `seed=`.
    deterministic: bool = False

    def __init__(self, spec: ClusterSpec, run_dir: Path) -> None:
        self.spec = spec
        self.run_dir = run_dir
        # Active `delay` plans and when each began (re-sent, shortened, to a node
        # that restarts while they last).
        self._delays: list[tuple[delays.DelayPlan, float]] = []
        # The current partition (`partition`): node -> the peers it must not hear
        # from; backends apply it again to a node that restarts.
        self._grudge: dict[str, list[str]] = {}

    @property
    def brokers(self) -> list[str]:
        return list(self.spec.brokers)

    @property
    def nodes(self) -> list[str]:
        """Every process of the cluster, controller first."""
        return [CONTROLLER, *self.spec.brokers]

    def write_process_config(self, path: Path) -> Path:
        addresses = {b: self.listen_address(b) for b in self.spec.brokers}
        path.write_text(json.dumps(self.spec.process_config(addresses), indent=2) + "\n")
        return path

    def run_meta(self) -> dict[str, Any]:
        """run.json fields this backend's runs add (the sim backend: its network)."""
        return {}

    # -- what a run observes it with ------------------------------------------

    def run_clock(self) -> Any:
        """The run's time axis (harness.run.clock.RunClock: the wall clock)."""
        from harness.run.clock import RunClock

        return RunClock()

    def events_collector(self, clock: Any, path: Path) -> Any:
        """What gathers every node's protocol events into events.jsonl."""
        from harness.run.events import EventsCollector

        return EventsCollector(self, clock, path)

    def observer(self, collector: Any) -> Any:
        """What scenario steps read status and events through."""
        from harness.run.observe import Observer

        return Observer(self, collector)

    def collect_replicas(self, run: Any) -> dict[str, str]:
        """Write every broker's final log and state into the run directory."""
        from harness.run.collect import collect_replicas

        return collect_replicas(self, run)

    # -- lifecycle ---------------------------------------------------------

    def expect(self, step_kinds: set[str]) -> None:
        """What the run will ask (its step kinds), told before `check_addresses`, so a
        backend that must check a capability up front can (ssh: iptables on every
        host when a step partitions)."""
        return None

    def check_addresses(self) -> None:
        """Raise UsageError (exit 2) if any address a node needs on this host is
        taken; call before starting."""
        for node in self.nodes:
            addr = self.address(node)
            if not address_free(addr):
                raise address_in_use(addr, node)

    @abstractmethod
    def start_controller(self) -> None:
        """Start the controller and return once its `status` answers."""

    @abstractmethod
    def start(self, node: str) -> None:
        """Start a broker and return once its `status` answers (RunIncomplete otherwise)."""

    def _wait_ready(self, node: str) -> None:
        """Return once the just-started `node` answers `status`; raise UsageError or
        RunIncomplete (with its log's tail) if it exits first or takes longer than
        `start_timeout`. Every backend's `start` ends here."""
        deadline = self.rt.monotonic() + self.start_timeout
        while True:
            if self._has_exited(node):
                code = self._exit_status(node)
                tail = self._log_tail(node)
                last = tail.splitlines()[-1] if tail else ""
                if code == _EXIT_BAD_CONFIG or (
                    code == _EXIT_ADDRESS_IN_USE and "address in use" in last
                ):
                    # The process itself refused its config or its address: a
                    # configuration error, not a failed run.
                    raise UsageError(f"{node} exited with status {code}: {last}")
                raise RunIncomplete(
                    f"{node} exited with status {code} before it was ready; "
                    f"last lines of {self._log_name(node)}:\n{tail}"
                )
            if try_status(self.address(node), timeout=0.5) is not None:
                return
            if self.rt.monotonic() > deadline:
                raise RunIncomplete(
                    f"{node} did not answer status within {self.start_timeout:.0f}s; "
                    f"last lines of {self._log_name(node)}:\n{self._log_tail(node)}"
                )
            self.rt.sleep(0.05)

    # What _wait_ready asks of a backend.

    @abstractmethod
    def _has_exited(self, node: str) -> bool:
        """The node's process has exited, as of now (not a cached state)."""

    @abstractmethod
    def _exit_status(self, node: str) -> int | None:
        """The exit status of the node's exited process (None if unknown), reaping
        whatever the backend keeps of it."""

    @abstractmethod
    def _log_tail(self, node: str) -> str:
        """The last LOG_TAIL_LINES lines of the node's log ("" if unreadable)."""

    @abstractmethod
    def _log_name(self, node: str) -> str:
        """How an error message names the node's log (a path, "its container log")."""

    @abstractmethod
    def stop(self, node: str) -> int | None:
        """SIGTERM: clean shutdown (controlled shutdown moves leadership). Returns the exit code."""

    @abstractmethod
    def kill(self, node: str) -> None:
        """SIGKILL: the process dies, the written (page-cache) bytes survive."""

    @abstractmethod
    def pause(self, node: str) -> None:
        """SIGSTOP: the process is frozen, connections stay open."""

    @abstractmethod
    def resume(self, node: str) -> None:
        """SIGCONT."""

    @abstractmethod
    def power_cycle(self, node: str) -> None:
        """Kill and lose every byte not fsynced; the node stays down until `start`."""

    # -- network faults ------------------------------------------------------

    def partition(self, grudge: dict[str, list[str]]) -> None:
        """Cut links: grudge[node] = the nodes it must not hear from (nodes absent
        from the grudge are cut from nobody). Replaces any earlier partition."""
        for node, peers in grudge.items():
            for n in (node, *peers):
                if n not in self.nodes:
                    raise UsageError(f"unknown node {n!r} in partition")
        self._check_grudge(grudge)
        self._grudge = {n: sorted(set(p)) for n, p in grudge.items() if p}
        self._apply_grudge()

    def heal(self) -> None:
        """Undo every partition (and end every delay)."""
        self.deliver()
        self._grudge = {}
        self._apply_grudge()

    def _check_grudge(self, grudge: dict[str, list[str]]) -> None:
        """UsageError for a partition this backend cannot make (names are checked)."""
        return None

    def _apply_grudge(self) -> None:
        """Make the network match self._grudge, the whole current partition."""
        raise NotImplementedError(f"the {self.name} backend cannot partition the network")

    def delay(self, plan: delays.DelayPlan) -> None:
        """Hold messages between nodes (nemesis.delays.plan), on top of any earlier
        delay. Every backend does it the same way: each process holds the messages
        itself (the `net-delay` request, broker/netdelay.py), as neither iptables
        nor netem can hold a link until told and then deliver in order."""
        for n in plan:
            if n not in self.nodes:
                raise UsageError(f"unknown node {n!r} in delay")
        self._delays.append((plan, self.rt.monotonic()))
        for n in plan:
            self._send_delays(n)

    def deliver(self) -> None:
        """End every delay: what is held is delivered now, in order."""
        held = {n for plan, _ in self._delays for n in plan}
        self._delays = []
        for n in sorted(held):
            self._send_delays(n)

    def _current_delays(self, node: str) -> list[dict[str, Any]]:
        now = self.rt.monotonic()
        merged: delays.DelayPlan = {}
        for plan, began in self._delays:
            merged = delays.merge(merged, delays.remaining(plan, now - began))
        return merged.get(node, [])

    def _send_delays(self, node: str) -> None:
        """Give a running node its current delay rules (a node that is down gets
        them when it starts: backends call this after a start)."""
        if not self.is_reachable(node):
            return
        admin.command(node, self.address(node), "net-delay", rules=self._current_delays(node))

    def _reapply_delays(self, node: str) -> None:
        if self._current_delays(node):
            self._send_delays(node)

    # -- observation -------------------------------------------------------

    @abstractmethod
    def address(self, node: str) -> str:
        """host:port under which the harness reaches the node."""

    def listen_address(self, node: str) -> str:
        """host:port the node listens on and advertises to its peers (may differ
        from `address` when the harness reaches it through a port mapping)."""
        return self.address(node)

    @abstractmethod
    def is_running(self, node: str) -> bool:
        """The process exists (paused or not)."""

    @abstractmethod
    def is_paused(self, node: str) -> bool:
        """The process is frozen: requests to it would block."""

    def wait_exited(self, node: str, timeout: float) -> None:
        """Before starting `node`: a broker that halted itself (0.10-2.0
        handleOffsetOutOfRange: controlled shutdown, then exit) may still be
        finishing -- give it `timeout` seconds; RunIncomplete if it still runs (or
        is paused: a frozen process is not on its way out)."""
        deadline = self.rt.monotonic() + timeout
        while (self.is_running(node) and not self.is_paused(node)
               and self.rt.monotonic() < deadline):
            self.rt.sleep(0.05)
        if self.is_running(node):
            raise RunIncomplete(f"cannot start {node}: it is already running")

    def is_reachable(self, node: str) -> bool:
        return self.is_running(node) and not self.is_paused(node)

    def data_dir(self, node: str) -> Path | None:
        """The node's data directory, readable by the harness (docker: a copy taken
        now), or None if the harness cannot read it."""
        return None

    @abstractmethod
    def collect_logs(self, run_dir: Path) -> None:
        """Make sure every process log is under run_dir/logs/."""

    @abstractmethod
    def teardown(self) -> None:
        """Stop everything this backend started. Idempotent; never raises for a
        process that is already gone."""

    # -- a run whose harness died -------------------------------------------

    @classmethod
    def salvage(cls, run_dir: Path, run_id: str, brokers: list[str]) -> Salvage:
        """For run `run_id` (directory `run_dir`), whose harness died without a
        teardown: stop (SIGKILL) whatever of it still runs, so its files stop
        changing, save what logs only the backend holds under run_dir/logs/, and
        return each broker's data directory, readable here."""
        raise UsageError(f"the {cls.name} backend cannot collect a crashed run")

    @classmethod
    def discard(cls, run_id: str) -> str | None:
        """Remove what is left of crashed run `run_id` once its replicas are written;
        what was removed, in words (None: nothing to remove)."""
        return None
