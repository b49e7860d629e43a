"""Delayed delivery between nodes (the `delay` nemesis), sans-IO.

Every message between two nodes of the cluster is a request from a broker and its
answer: fetches go follower -> leader, heartbeats, registrations and AlterPartition
broker -> controller. So a process can delay a link on its own, as it cuts one
(process.NetBlock): a rule `in` from peer P holds P's requests before they are
handled; a rule `out` to peer P holds the answers this process sends to P. The
harness installs `{from: X, to: Y}` as `in` from X at Y and `out` to Y at X
(nemesis.delays), which covers both kinds of traffic.

A held message is delivered when its rule ends -- at `until_ms` or when the
rules are cleared (`deliver`, `heal`) -- and messages held on one link are
delivered in the order they arrived (the shell queues them; `release_at` only
says when). `requests` limits a rule to some request types: in Kafka the
liveness channel (the ZooKeeper session up to 2.8; the KRaft heartbeat channel,
BrokerLifecycleManager, from 2.8) is a connection of its own, apart from the
AlterPartition channel (AlterPartitionManager, KIP-497 in 2.7), so one can stall
while the other flows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DIRECTIONS = ("in", "out")
FOREVER = math.inf  # held until the rules are cleared


@dataclass(frozen=True)
class DelayRule:
    peer: str
    direction: str  # "in": requests from peer; "out": answers to peer
    until_ms: float  # FOREVER: until cleared
    requests: frozenset[str] | None = None  # None: every request type

    def matches(self, peer: str, direction: str, request_type: str) -> bool:
        return (self.peer == peer and self.direction == direction
                and (self.requests is None or request_type in self.requests))


def parse_rules(raw: list[dict[str, Any]], now: float) -> list[DelayRule]:
    """Rules from a `net-delay` request: `{peer, direction, for_ms (absent: until
    cleared), requests (absent: all)}`; ValueError for a malformed one."""
    out = []
    for r in raw:
        direction = r.get("direction")
        if direction not in DIRECTIONS or not isinstance(r.get("peer"), str):
            raise ValueError(f"a delay rule needs peer and direction in/out: {r!r}")
        for_ms = r.get("for_ms")
        if for_ms is not None and (not isinstance(for_ms, (int, float)) or for_ms < 0):
            raise ValueError(f"for_ms must be a non-negative number: {r!r}")
        requests = r.get("requests")
        out.append(DelayRule(r["peer"], direction,
                             FOREVER if for_ms is None else now + for_ms,
                             None if requests is None else frozenset(requests)))
    return out


class DelayRules:
    """The delay rules of one process; the shell asks `release_at` per message."""

    def __init__(self) -> None:
        self.rules: list[DelayRule] = []
        # Bumped whenever the rules change, so a waiting message looks again.
        self.version = 0

    def set(self, rules: list[DelayRule]) -> None:
        """Replace the rules (messages held under the old ones look again)."""
        self.rules = list(rules)
        self.version += 1

    def clear(self) -> None:
        self.set([])

    def release_at(self, peer: str | None, direction: str, request_type: str,
                   now: float) -> float | None:
        """When a message on this link may go: None if no rule holds it now, else
        the time (ms, FOREVER for until cleared) its longest matching rule ends."""
        if peer is None or not self.rules:
            return None  # admin requests (no sender) are never delayed; no rule, no hold
        ends = [r.until_ms for r in self.rules
                if r.matches(peer, direction, request_type) and r.until_ms > now]
        return max(ends) if ends else None

    def active(self, now: float) -> list[DelayRule]:
        return [r for r in self.rules if r.until_ms > now]
