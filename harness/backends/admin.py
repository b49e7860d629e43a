"""Admin requests to brokers and the controller (PROTOCOL.md, "Admin requests")."""

from __future__ import annotations

from typing import Any

from broker.wire import WireError
from harness.errors import RunIncomplete
from workloads.runtime import REAL, Runtime


def request(addr: str, msg: dict[str, Any], timeout: float = 2.0,
            rt: Runtime = REAL) -> dict[str, Any]:
    """One request on a connection the runtime keeps per address (opened anew only
    when none is idle); raises WireError if there was no answer."""
    return rt.request(addr, msg, timeout)


def try_status(addr: str, timeout: float = 1.0) -> dict[str, Any] | None:
    try:
        reply = request(addr, {"type": "status"}, timeout)
    except WireError:
        return None
    return reply if reply.get("error") is None else None


def foreign_cluster(status: dict[str, Any], cluster_id: str | None) -> str | None:
    """The cluster id a status answer names when it is not ``cluster_id`` -- a node
    of another run answered at this run's address -- else None. (A node that names
    none, the simulator's, is taken as the run's.)"""
    theirs = status.get("cluster_id")
    return theirs if cluster_id is not None and theirs not in (None, cluster_id) else None


def own_status(addr: str, cluster_id: str | None, timeout: float = 1.0) -> dict[str, Any] | None:
    """try_status, answered by a node of the cluster ``cluster_id`` only."""
    st = try_status(addr, timeout)
    return None if st is None or foreign_cluster(st, cluster_id) else st


def command(node: str, addr: str, op: str, timeout: float = 10.0, rt: Runtime = REAL,
            **fields: Any) -> dict:
    """An admin command that must succeed for the run to go on (flush, checkpoint-hw)."""
    try:
        reply = request(addr, {"type": op, **fields}, timeout, rt)
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
