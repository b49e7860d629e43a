"""Waiting on observable cluster state: broker/controller status and events.

Scenario steps never sleep a fixed time; they poll a predicate until it holds
or a deadline passes. A timeout means the run could not reach the state the
scenario needs (exit 3), and the error says what was last seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from broker.wire import Connection, WireError
from harness.backends.admin import partition_status
from harness.backends.base import Backend
from harness.errors import RunIncomplete
from harness.run.event_collector import EventsCollector
from workloads.runtime import REAL, Runtime

T = TypeVar("T")


class WaitTimeout(RunIncomplete):
    pass


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    *,
    what: str = "condition",
    interval: float = 0.02,
    last_seen: Callable[[], Any] | None = None,
    rt: Runtime = REAL,
) -> T:
    """Call `predicate` until it returns something truthy and return that.
    Raises WaitTimeout after `timeout` seconds, naming `what` and `last_seen()`."""
    deadline = rt.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if rt.monotonic() >= deadline:
            seen = f"; last seen: {last_seen()}" if last_seen is not None else ""
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}{seen}")
        rt.sleep(interval)


class Observer:
    """Fresh status and collected events of one run's cluster."""

    # The final read waits for the replicas to converge and reads the leader
    # (harness.run.execute); False where isrlab cannot see them.
    sees_replicas = True

    def __init__(self, backend: Backend, collector: EventsCollector) -> None:
        self.backend = backend
        self.collector = collector
        # One connection per node, kept across polls: a wait polls every 20 ms and
        # a fresh connection each time would pile up sockets in TIME_WAIT.
        self._conns: dict[str, Connection] = {}

    def status(self, node: str) -> dict[str, Any] | None:
        """The node's status now, or None if it is down, paused or not answering."""
        if not self.backend.is_reachable(node):
            return None
        addr = self.backend.address(node)
        conn = self._conns.get(node)
        if conn is None or conn.addr != addr:
            conn = self._conns[node] = Connection(addr, timeout=1.0)
        try:
            reply = conn.request({"type": "status"})
        except WireError:
            return None  # the connection closed itself; the next poll reconnects
        return reply if reply.get("error") is None else None

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def partition(self, node: str, topic: str, partition: int) -> dict[str, Any] | None:
        """One partition's entry of the node's status (controller or broker)."""
        st = self.status(node)
        return None if st is None else partition_status(st, topic, partition)

    def events(self, *, node: str | None = None, type: str | None = None,
               since: int | None = None, match: dict[str, Any] | None = None) -> list[dict]:
        """Collected events, filtered; `since` in ns since the run started."""
        match = match or {}

        def keep(e: dict[str, Any]) -> bool:
            return (
                (node is None or e.get("node") == node)
                and (type is None or e.get("type") == type)
                and (since is None or e.get("time", 0) >= since)
                and all(e.get(k) == v for k, v in match.items())
            )

        return self.collector.events(keep)
