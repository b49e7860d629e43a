"""Faults on a cluster, each recorded in the history.

Every fault is an op pair of process "nemesis": `invoke` before, `info` after
(Jepsen's convention: a nemesis op has no ok/fail), `f` = the fault, `value` =
the node names. Network faults are `partition(grudge)` (value = the grudge)
and `heal()`; they dispatch to `Cluster.partition/heal`. The op names are the
vocabulary's (`contract.NEMESIS_FS`). The cluster is anything that satisfies
`nemesis.cluster.Cluster` (in a run, the harness's backend).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contract import FAULT_WINDOWS, NEMESIS_PROCESS, PROCESS_FAULTS
from contract.history import INFO, History
from nemesis.cluster import Cluster

# Process faults after which a node is down/frozen, and the ops that end that window.
_OPENS = {f: kind for f, (kind, _) in FAULT_WINDOWS.items() if f in PROCESS_FAULTS}
_CLOSES = {end: kind for f, (kind, end) in FAULT_WINDOWS.items() if f in PROCESS_FAULTS}


@dataclass
class FaultWindow:
    node: str
    kind: str  # "down", "paused" or "partitioned"
    fault: str
    start: int  # ns since run start
    end: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "kind": self.kind, "fault": self.fault,
                "start": self.start, "end": self.end}


class Nemesis:
    def __init__(
        self,
        cluster: Cluster,
        history: History,
        *,
        before_fault: Callable[[str], None] | None = None,
        on_window: Callable[[FaultWindow], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.history = history
        # Called with the node before a fault that may lose its in-memory state
        # (the events collector drains the node's events).
        self.before_fault = before_fault
        self.on_window = on_window
        self.windows: list[FaultWindow] = []
        self.delaying = False  # a `delay` is in force (heal or deliver ends it)

    def invoke(self, f: str, nodes: list[str]) -> dict[str, Any]:
        """A process fault on each of `nodes`, as one op pair."""
        if f not in PROCESS_FAULTS:
            raise ValueError(f"unknown process fault {f!r}; network faults: partition(), heal()")
        return self._recorded(f, list(nodes), lambda: [self._apply(f, n) for n in nodes])

    def partition(self, grudge: dict[str, list[str]]) -> dict[str, Any]:
        """Cut links: grudge[node] = the nodes it must not hear from. value = the grudge."""
        value = {n: sorted(peers) for n, peers in sorted(grudge.items())}

        def apply() -> None:
            self.cluster.partition(grudge)
            now = self.history.clock.now()
            for node in value:
                self._open(FaultWindow(node, "partitioned", "partition", now))

        return self._recorded("partition", value, apply)

    def heal(self) -> dict[str, Any]:
        """Undo every partition."""

        def apply() -> None:
            self.cluster.heal()
            self.delaying = False
            self._close(lambda w: w.kind == "partitioned")

        return self._recorded("heal", None, apply)

    def delay(self, spec: dict[str, Any], plan: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        """Hold messages between nodes (`spec` as the scenario step gives it, the
        op's value; `plan` its per-process rules, nemesis.delays.plan)."""
        def apply() -> None:
            self.cluster.delay(plan)
            self.delaying = True
        return self._recorded("delay", spec, apply)

    def deliver(self) -> dict[str, Any]:
        """Deliver every held message, in order, and stop delaying."""
        def apply() -> None:
            self.cluster.deliver()
            self.delaying = False
        return self._recorded("deliver", None, apply)

    def _recorded(self, f: str, value: Any, apply: Callable[[], Any]) -> dict[str, Any]:
        inv = self.history.invoke(NEMESIS_PROCESS, f, value)
        try:
            apply()
        except BaseException as e:
            self.history.complete(inv, INFO, error=str(e).splitlines()[0] if str(e) else repr(e))
            raise
        return self.history.complete(inv, INFO)

    def _apply(self, f: str, node: str) -> None:
        if f in ("kill", "stop", "power-cycle") and self.before_fault is not None:
            self.before_fault(node)
        if f == "kill":
            self.cluster.kill(node)
        elif f == "stop":
            self.cluster.stop(node)
        elif f == "power-cycle":
            self.cluster.power_cycle(node)
        elif f == "pause":
            self.cluster.pause(node)
        elif f == "resume":
            self.cluster.resume(node)
        elif f == "start":
            self.cluster.start(node)
        self._track(f, node)

    def _open(self, w: FaultWindow) -> None:
        self.windows.append(w)
        if self.on_window is not None:
            self.on_window(w)

    def _close(self, which: Callable[[FaultWindow], bool]) -> None:
        now = self.history.clock.now()
        for w in self.windows:
            if w.end is None and which(w):
                w.end = now
                if self.on_window is not None:
                    self.on_window(w)

    def _track(self, f: str, node: str) -> None:
        kind = _CLOSES.get(f)
        if kind is not None:
            self._close(lambda w: w.node == node and w.kind == kind)
        elif _OPENS.get(f) == "down":
            # The process is gone: a pause window ends with it.
            self._close(lambda w: w.node == node and w.kind == "paused")
        if f in _OPENS:
            self._open(FaultWindow(node, _OPENS[f], f, self.history.clock.now()))

    def heal_all(self) -> list[dict[str, Any]]:
        """Heal partitions, resume paused nodes, start stopped ones (before a final read)."""
        ops = []
        if self.delaying or any(w.kind == "partitioned" and w.end is None
                                for w in self.windows):
            ops.append(self.heal())
        paused = [n for n in self.cluster.brokers if self.cluster.is_paused(n)]
        if paused:
            ops.append(self.invoke("resume", paused))
        down = [n for n in self.cluster.brokers if not self.cluster.is_running(n)]
        if down:
            ops.append(self.invoke("start", down))
        return ops
