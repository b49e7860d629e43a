"""What the nemesis needs of a cluster, declared here so nemesis depends on no
backend: the harness's `Backend` (harness/backends/base.py) satisfies it, and a
test can pass any object that does.

Node names are the scenario's ("A", "B", ... and "controller"). Process faults
(`ProcessFaults`: the backend's Nodes) act on one node each; network faults
(`NetworkFaults`: its Net) replace or undo the whole partition.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class ProcessFaults(Protocol):
    @property
    def brokers(self) -> list[str]:
        """The broker nodes (the controller is not among them)."""
        ...

    def is_running(self, node: str) -> bool:
        """The process exists (paused or not)."""
        ...

    def is_paused(self, node: str) -> bool:
        """The process is frozen."""
        ...

    def start(self, node: str) -> None:
        """Start the node and return once it answers."""
        ...

    def stop(self, node: str) -> int | None:
        """SIGTERM: a clean shutdown. Returns the exit status."""
        ...

    def kill(self, node: str) -> None:
        """SIGKILL: written (page-cache) bytes survive."""
        ...

    def pause(self, node: str) -> None:
        """SIGSTOP: frozen, connections stay open."""
        ...

    def resume(self, node: str) -> None:
        """SIGCONT."""
        ...

    def power_cycle(self, node: str) -> None:
        """Kill and lose every byte not fsynced; the node stays down until `start`."""
        ...



@runtime_checkable
class NetworkFaults(Protocol):
    def partition(self, grudge: dict[str, list[str]]) -> None:
        """grudge[node] = the nodes it must not hear from; replaces any earlier
        partition. Raises NotImplementedError where the cluster cannot partition."""
        ...

    def heal(self) -> None:
        """Undo every partition and end every delay."""
        ...

    def delay(self, plan: dict[str, list[dict[str, Any]]]) -> None:
        """Hold messages between nodes (nemesis.delays.plan: node -> its rules)
        until the rules end, then deliver them in order; adds to earlier delays."""
        ...

    def deliver(self) -> None:
        """End every delay: deliver what is held, in order."""
        ...


@runtime_checkable
class Cluster(ProcessFaults, NetworkFaults, Protocol):
    """Both: what a run's backend is to the nemesis."""
