"""Node lifecycle (Jepsen's DB, Kafka's broker processes): the interface every
backend implements to start, stop and fault the controller and the brokers, and
the one readiness policy they share.

Readiness (`Nodes.wait_ready`): poll until the node answers `status`; a node that
exits first is a usage error if the process refused its configuration (exit 2) or
its address (exit 3, "address in use"), else an incomplete run, with the last
LOG_TAIL_LINES lines of its log. A backend supplies only how to see that its
process exited, its exit status, and its log.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from harness.backends.admin import foreign_cluster, try_status
from harness.errors import RunIncomplete, UsageError
from workloads.runtime import REAL, Runtime

LOG_TAIL_LINES = 15  # of a node's log, in the error when it dies before it is ready

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


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of the log at `path` ("" if unreadable)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


class Nodes(ABC):
    """Start, stop and fault the nodes of one run. Called from the harness's main
    thread, except `address`, `is_running` and `is_paused`, which must be
    thread-safe (the events collector and the clients call them)."""

    start_timeout: float = 20.0  # seconds a starting node has to answer `status`
    # Clock, connections and threads of the run (the sim backend: virtual ones).
    rt: Runtime = REAL
    exit_poll: float = 0.05  # seconds between looks at a node on its way out (wait_exited)
    # The run's cluster id (its run id): every node of the run has it, and a node
    # of another run answering at one of its addresses is refused (broker/admin.py).
    cluster_id: str | None = None

    @abstractmethod
    def start_controller(self) -> None:
        """Start the controller and return once its `status` answers."""

    @abstractmethod
    def start(self, node: str) -> None:
        """Start a broker and return once its `status` answers (RunIncomplete otherwise)."""

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

    @abstractmethod
    def teardown(self) -> None:
        """Stop everything this backend started. Idempotent; never raises for a
        process that is already gone."""

    # -- where and how the nodes are -------------------------------------------

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

    def is_reachable(self, node: str) -> bool:
        return self.is_running(node) and not self.is_paused(node)

    def wait_exited(self, node: str, timeout: float) -> None:
        """Before starting `node`: a broker that halted itself (0.10-2.0
        handleOffsetOutOfRange: controlled shutdown, then exit) may still be
        finishing -- give it `timeout` seconds; RunIncomplete if it still runs (or
        is paused: a frozen process is not on its way out)."""
        deadline = self.rt.monotonic() + timeout
        while (self.is_running(node) and not self.is_paused(node)
               and self.rt.monotonic() < deadline):
            self.rt.sleep(self.exit_poll)
        if self.is_running(node):
            raise RunIncomplete(f"cannot start {node}: it is already running")

    # -- readiness -----------------------------------------------------------------

    def wait_ready(self, node: str) -> None:
        """Return once the just-started `node` answers `status`; raise UsageError or
        RunIncomplete (with its log's tail) if it exits first or takes longer than
        `start_timeout`. Every backend's `start` ends here."""
        deadline = self.rt.monotonic() + self.start_timeout
        while True:
            if self.has_exited(node):
                code = self.exit_status(node)
                tail = self.log_tail(node)
                last = tail.splitlines()[-1] if tail else ""
                if code == _EXIT_BAD_CONFIG or (
                    code == _EXIT_ADDRESS_IN_USE and "address in use" in last
                ):
                    # The process itself refused its config or its address: a
                    # configuration error, not a failed run.
                    raise UsageError(f"{node} exited with status {code}: {last}")
                raise RunIncomplete(
                    f"{node} exited with status {code} before it was ready; "
                    f"last lines of {self.log_name(node)}:\n{tail}"
                )
            st = try_status(self.address(node), timeout=0.5)
            if st is not None and (theirs := foreign_cluster(st, self.cluster_id)):
                # Another run's node holds the address: this node cannot bind it
                # (and must not be taken for it).
                raise UsageError(f"{node}'s address {self.address(node)} is in use by a "
                                 f"node of another run (cluster {theirs})")
            if st is not None:
                return
            if self.rt.monotonic() > deadline:
                raise RunIncomplete(
                    f"{node} did not answer status within {self.start_timeout:.0f}s; "
                    f"last lines of {self.log_name(node)}:\n{self.log_tail(node)}"
                )
            self.rt.sleep(0.05)

    # What wait_ready asks of a backend.

    @abstractmethod
    def has_exited(self, node: str) -> bool:
        """The node's process has exited, as of now (not a cached state)."""

    @abstractmethod
    def exit_status(self, node: str) -> int | None:
        """The exit status of the node's exited process (None if unknown), reaping
        whatever the backend keeps of it."""

    @abstractmethod
    def log_tail(self, node: str) -> str:
        """The last LOG_TAIL_LINES lines of the node's log ("" if unreadable)."""

    @abstractmethod
    def log_name(self, node: str) -> str:
        """How an error message names the node's log (a path, "its container log")."""
