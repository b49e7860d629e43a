"""Finding partition leaders (requests go through the client's runtime,
workloads.runtime, which tells 'never sent' from 'lost').

Clients ask any reachable broker for `metadata` (which may be stale) and retry
while the answer is "not the leader". The distinction that matters for the
history is whether a request may have reached a broker: a refused connection
means it certainly did not; a timeout or a dropped connection after sending
means it may have.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.wire import WireError
from workloads.runtime import REAL, NotSent, Runtime

# Reachable brokers right now: name -> address. Paused or stopped brokers are
# left out so a client never blocks on a frozen process just to ask who leads.
NodesFn = Callable[[], dict[str, str]]

__all__ = ["ClusterClient", "Leaders", "NodesFn", "NotSent"]


class ClusterClient:
    """Leader discovery as KIP-320 clients do it: metadata answers carry leader
    epochs and the freshest (highest epoch) wins, so a deposed leader that still
    believes it leads -- cut off from the controller -- is not trusted over the
    broker the controller elected."""

    def __init__(self, nodes: NodesFn, metadata_timeout: float = 1.0,
                 rt: Runtime = REAL) -> None:
        self.nodes = nodes
        self.metadata_timeout = metadata_timeout
        self.rt = rt  # clock, connections and threads of everything using this client

    def metadata(self) -> list[dict[str, Any]]:
        """Every reachable broker's metadata answer (brokers that fail are skipped)."""
        answers = []
        for addr in self.nodes().values():
            try:
                reply = self.rt.request(addr, {"type": "metadata"}, self.metadata_timeout)
            except WireError:
                continue
            if reply.get("error") is None:
                answers.append(reply)
        return answers

    def leader(self, topic: str, partition: int) -> tuple[str, str] | None:
        """(name, address) of the partition's leader in the freshest answer, if it is
        reachable; None means "no leader now", retry later."""
        best: dict[str, Any] | None = None
        for meta in self.metadata():
            for p in meta.get("partitions", []):
                if p.get("topic") == topic and p.get("partition") == partition and (
                        best is None or p.get("leader_epoch", -1) > best.get("leader_epoch", -1)):
                    best = p
        reachable = self.nodes()
        leader = best.get("leader") if best is not None else None
        if leader is None or leader not in reachable:
            return None
        return leader, reachable[leader]

    def wait_leader(
        self, topic: str, partition: int, deadline: float, backoff: float = 0.05
    ) -> tuple[str, str] | None:
        while True:
            found = self.leader(topic, partition)
            if found is not None or self.rt.monotonic() >= deadline:
                return found
            self.rt.sleep(backoff)


class Leaders:
    """A client's cached partition leaders, as Kafka's producer and consumer keep
    metadata: asked once, kept until a request to the leader fails, then asked
    again. (Asking every broker before every request would cost more than the
    request: in a simulated chaos run, 45% of all messages were metadata.)"""

    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self._known: dict[tuple[str, int], tuple[str, str]] = {}

    def get(self, topic: str, partition: int, deadline: float) -> tuple[str, str] | None:
        hit = self._known.get((topic, partition))
        if hit is not None:
            return hit
        found = self.client.wait_leader(topic, partition, deadline)
        if found is not None:
            self._known[(topic, partition)] = found
        return found

    def forget(self, topic: str, partition: int) -> None:
        self._known.pop((topic, partition), None)
