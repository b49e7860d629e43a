"""Network faults of a cluster (Jepsen's Net): partitions and delays.

One `Net` per backend keeps the current partition (the grudge: node -> the peers it
must not hear from) and the active delay plans, and validates both; a backend
supplies only how to make the network match a grudge (`apply`: the broker's
`net-block` on loopback, iptables in containers or on hosts, the simulator's
links) and, if it can, which partitions it cannot make (`check`). A backend that
cannot partition passes `apply=None`, and `partition` refuses.

Delays are the same everywhere: each process holds the messages itself (the
`net-delay` request, broker/netdelay.py), as neither iptables nor netem can hold a
link until told and then deliver in order. A node that restarts while a partition
or a delay lasts gets it again: its backend applies `grudge` to it and calls
`reapply_delays`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from harness.errors import UsageError
from nemesis import delays

Grudge = dict[str, list[str]]
Rules = list[dict[str, Any]]


@dataclass
class Net:
    backend: str
    nodes: list[str]
    _: KW_ONLY
    apply: Callable[[Grudge], None] | None
    send_rules: Callable[[str, Rules], None]
    reachable: Callable[[str], bool]
    monotonic: Callable[[], float]
    check: Callable[[Grudge], None] = lambda _grudge: None
    # The current partition; applied again to a node that restarts.
    grudge: Grudge = field(default_factory=dict)
    # Active `delay` plans and when each began (re-sent, shortened, to a node that
    # restarts while they last).
    _delays: list[tuple[delays.DelayPlan, float]] = field(default_factory=list)

    # -- partitions ------------------------------------------------------------

    def partition(self, grudge: Grudge) -> None:
        """Cut links: grudge[node] = the nodes it must not hear from (nodes absent
        from the grudge are cut from nobody). Replaces any earlier partition."""
        for node, peers in grudge.items():
            for n in (node, *peers):
                if n not in self.nodes:
                    raise UsageError(f"unknown node {n!r} in partition")
        self.check(grudge)
        self.grudge = {n: sorted(set(p)) for n, p in grudge.items() if p}
        self._apply()

    def heal(self) -> None:
        """Undo every partition (and end every delay)."""
        self.deliver()
        self.grudge = {}
        self._apply()

    def _apply(self) -> None:
        if self.apply is None:
            raise NotImplementedError(f"the {self.backend} backend cannot partition the network")
        self.apply(self.grudge)

    # -- delays ----------------------------------------------------------------

    def delay(self, plan: delays.DelayPlan) -> None:
        """Hold messages between nodes (nemesis.delays.plan), on top of any earlier
        delay."""
        for n in plan:
            if n not in self.nodes:
                raise UsageError(f"unknown node {n!r} in delay")
        self._delays.append((plan, self.monotonic()))
        for n in plan:
            self._send(n)

    def deliver(self) -> None:
        """End every delay: what is held is delivered now, in order."""
        held = {n for plan, _ in self._delays for n in plan}
        self._delays = []
        for n in sorted(held):
            self._send(n)

    def current_delays(self, node: str) -> Rules:
        now = self.monotonic()
        merged: delays.DelayPlan = {}
        for plan, began in self._delays:
            merged = delays.merge(merged, delays.remaining(plan, now - began))
        return merged.get(node, [])

    def _send(self, node: str) -> None:
        """Give a running node its current delay rules (a node that is down gets
        them when it starts: `reapply_delays`)."""
        if self.reachable(node):
            self.send_rules(node, self.current_delays(node))

    def reapply_delays(self, node: str) -> None:
        """After `node` (re)started: the delays that still last, if any."""
        if self.current_delays(node):
            self._send(node)
