"""Admin requests to brokers and the controller (PROTOCOL.md, "Admin requests")."""

from __future__ import annotations

from typing import Any

from broker.wire import Connection, WireError
from harness.errors import RunIncomplete


def request(addr: str, msg: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
    """One request on a fresh connection; raises WireError if there was no answer."""
    with Connection(addr, timeout=timeout) as conn:
        return conn.request(msg, timeout=timeout)


def try_status(addr: str, timeout: float = 1.0) -> dict[str, Any] | None:
    try:
        reply = request(addr, {"type": "status"}, timeout)
    except WireError:
        return None
    return reply if reply.get("error") is None else None


def command(node: str, addr: str, op: str, timeout: float = 10.0, **fields: Any) -> dict:
    """An admin command that must succeed for the run to go on (flush, checkpoint-hw)."""
    try:
        reply = request(addr, {"type": op, **fields}, timeout)
    except WireError as e:
        raise RunIncomplete(f"{op} on {node} got no answer: {e}") from e
    if reply.get("error") is not None:
        raise RunIncomplete(f"{op} on {node} failed: {reply['error']}")
    return reply


def partition_status(status: dict[str, Any], topic: str, partition: int) -> dict | None:
    for p in status.get("partitions", []):
        if p.get("topic") == topic and p.get("partition") == partition:
            return p
    return None
