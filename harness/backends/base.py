"""The cluster interface every backend implements (Jepsen's DB protocol).

A backend owns the controller and broker processes of one run: it starts and
stops them, injects process-level faults, and knows the address under which the
harness reaches each node. It never judges and never talks the client protocol
beyond the readiness check. Node names are the broker ids of the scenario ("A",
"B", ...); the controller is the node named CONTROLLER.

Network faults are `partition()`/`heal()`: the local backend asks each process
to cut itself off (the broker's `net-block`), the docker backend uses iptables;
a backend that cannot do either keeps the default, which refuses.
"""

from __future__ import annotations

import json
import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

CONTROLLER = "controller"


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

    def __init__(self, spec: ClusterSpec, run_dir: Path) -> None:
        self.spec = spec
        self.run_dir = run_dir

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

    # -- lifecycle ---------------------------------------------------------

    def check_addresses(self) -> None:
        """Raise ConfigError (exit 2) if any address a node needs on this host is
        taken; call before starting."""
        for node in self.nodes:
            addr = self.address(node)
            if not address_free(addr):
                raise ConfigError(f"address in use: {addr} (needed by {node}); try --port")

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

    # -- network faults (issue 4) -------------------------------------------

    def partition(self, grudge: dict[str, list[str]]) -> None:
        """Cut links: grudge[node] = the nodes it must not hear from (nodes absent
        from the grudge are cut from nobody). Replaces any earlier partition."""
        raise NotImplementedError(f"the {self.name} backend cannot partition the network")

    def heal(self) -> None:
        """Undo every partition."""
        raise NotImplementedError(f"the {self.name} backend cannot partition the network")

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

    def is_reachable(self, node: str) -> bool:
        return self.is_running(node) and not self.is_paused(node)

    def data_dir(self, node: str) -> Path | None:
        """The node's data directory, readable by the harness, or None (remote backends)."""
        return None

    @abstractmethod
    def collect_logs(self, run_dir: Path) -> None:
        """Make sure every process log is under run_dir/logs/."""

    @abstractmethod
    def teardown(self) -> None:
        """Stop everything this backend started. Idempotent; never raises for a
        process that is already gone."""
