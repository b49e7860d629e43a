"""Finding partition leaders, and a connection that tells 'never sent' from 'lost'.

Clients ask any reachable broker for `metadata` (which may be stale) and retry
while the answer is "not the leader". The distinction that matters for the
history is whether a request may have reached a broker: a refused connection
means it certainly did not; a timeout or a dropped connection after sending
means it may have.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from broker.wire import Connection, WireError, encode, parse_addr

# Reachable brokers right now: name -> address. Paused or stopped brokers are
# left out so a client never blocks on a frozen process just to ask who leads.
NodesFn = Callable[[], dict[str, str]]


class NotSent(WireError):
    """The connection could not be opened: the request never left the client."""


class ClientConnection(Connection):
    """`Connection` with an explicit connect step (see module doc)."""

    def send(self, msg: dict[str, Any]) -> None:
        """Write a request whose answer is not awaited."""
        assert self._sock is not None
        self._sock.sendall(encode(msg))

    def connect(self) -> None:
        if self._sock is not None:
            return
        host, port = parse_addr(self.addr)
        try:
            self._sock = socket.create_connection((host, port), timeout=self.timeout)
            self._file = self._sock.makefile("rb")
        except OSError as e:
            self.close()
            raise NotSent(f"{self.addr}: {type(e).__name__}: {e}") from e


def one_request(addr: str, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One request on a fresh connection. Raises NotSent if it could not connect,
    WireError if the answer was lost."""
    conn = ClientConnection(addr, timeout=min(timeout, 2.0))
    try:
        conn.connect()
        return conn.request(msg, timeout=timeout)
    finally:
        conn.close()


def send_only(addr: str, msg: dict[str, Any], timeout: float) -> None:
    """One request that gets no answer (a produce with acks 0) on a fresh
    connection: returns once it is written. Raises NotSent if it could not connect."""
    conn = ClientConnection(addr, timeout=min(timeout, 2.0))
    try:
        conn.connect()
        try:
            conn.send(msg)
        except OSError as e:
            raise WireError(f"{addr}: {type(e).__name__}: {e}") from e
    finally:
        conn.close()


class ClusterClient:
    """Leader discovery as KIP-320 clients do it: metadata answers carry leader
    epochs and the freshest (highest epoch) wins, so a deposed leader that still
    believes it leads -- cut off from the controller -- is not trusted over the
    broker the controller elected."""

    def __init__(self, nodes: NodesFn, metadata_timeout: float = 1.0) -> None:
        self.nodes = nodes
        self.metadata_timeout = metadata_timeout

    def metadata(self) -> list[dict[str, Any]]:
        """Every reachable broker's metadata answer (brokers that fail are skipped)."""
        answers = []
        for addr in self.nodes().values():
            try:
                reply = one_request(addr, {"type": "metadata"}, self.metadata_timeout)
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
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(backoff)
