"""Clients keep one connection per client and node (workloads.runtime's pool), and
the broker serves many requests on one: a real local cluster serving a workload
accepts O(clients x nodes) connections, not O(requests). A request that timed out
never leaves its late answer for the next one on a reused socket, and a request
to a process that is gone still raises NotSent ("certainly not sent")."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import descendants, free_port

from broker.process import Listener
from broker.wire import WireError, decode, encode
from contract.history import History
from harness.backends import make_backend
from harness.backends.base import CONTROLLER, ClusterSpec
from harness.run.clock import RunClock
from workloads.client import ClusterClient
from workloads.consumer import Consumer
from workloads.producer import Producer
from workloads.runtime import NotSent, Runtime

SPEC = ClusterSpec(protocol="latest", brokers=["A", "B", "C"],
                   topics=[{"name": "t", "partitions": 1, "replicas": [["A", "B", "C"]]}])
SENDS = 100


def test_listener_serves_many_requests_per_connection_and_closes_idle_ones(port: int) -> None:
    """The process's listener: any number of requests on one connection; when the
    process stops taking requests, a client's idle connection is closed at once and
    a busy one once its answer is written; a new one is refused; a peer's (its
    requests name their sender) is still served."""

    async def main() -> None:
        started, gate = asyncio.Event(), asyncio.Event()

        async def handler(msg: dict) -> dict:
            if msg["type"] == "slow":
                started.set()
                await gate.wait()
            return {"error": None, "n": msg["n"]}

        listener = Listener(handler)
        await listener.start(f"127.0.0.1:{port}")
        idle_r, idle_w = await asyncio.open_connection("127.0.0.1", port)
        for n in range(5):
            idle_w.write(encode({"type": "echo", "n": n}))
            assert decode(await idle_r.readline())["n"] == n
        peer_r, peer_w = await asyncio.open_connection("127.0.0.1", port)
        peer_w.write(encode({"type": "fetch", "replica_id": "B", "n": 1}))
        assert decode(await peer_r.readline())["n"] == 1
        busy_r, busy_w = await asyncio.open_connection("127.0.0.1", port)
        busy_w.write(encode({"type": "slow", "n": 9}))
        await started.wait()
        assert listener.accepted == 3
        listener.close()
        assert await asyncio.wait_for(idle_r.readline(), 5) == b""
        gate.set()
        assert decode(await asyncio.wait_for(busy_r.readline(), 5))["n"] == 9
        assert await asyncio.wait_for(busy_r.readline(), 5) == b""
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        peer_w.write(encode({"type": "fetch", "replica_id": "B", "n": 2}))
        assert decode(await asyncio.wait_for(peer_r.readline(), 5))["n"] == 2
        for w in (idle_w, busy_w, peer_w):
            w.close()

    asyncio.run(main())


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator:
    backend = make_backend("local", SPEC, tmp_path, port=free_port())
    try:
        backend.start_controller()
        for b in SPEC.brokers:
            backend.start(b)
        yield backend
    finally:
        backend.teardown()
        assert descendants(os.getpid()) == []


def accepted(rt: Runtime, backend, node: str) -> int:
    return rt.request(backend.address(node), {"type": "status"}, 2.0)["connections_accepted"]


def wait_leader(rt: Runtime, backend) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        (p,) = rt.request(backend.address(CONTROLLER), {"type": "status"}, 2.0)["partitions"]
        if p["leader"] and p["isr"] == SPEC.brokers:
            return p["leader"]
        time.sleep(0.05)
    raise AssertionError("no leader with the whole ISR within 10 s")


@pytest.mark.e2e
def test_a_workload_keeps_one_connection_per_client_and_node(cluster, tmp_path: Path) -> None:
    rt = Runtime()
    leader = wait_leader(rt, cluster)
    before = {b: accepted(rt, cluster, b) for b in SPEC.brokers}
    history = History(tmp_path / "history.jsonl", RunClock())
    client = ClusterClient(lambda: {b: cluster.address(b) for b in SPEC.brokers}, rt=rt)
    producer = Producer(client, history, 0)
    consumer = Consumer(client, history, 1, "t", 0)
    ops = [producer.send("t", 0, v) for v in range(SENDS)]
    polls = [consumer.poll() for _ in range(SENDS // 10)]
    history.close()
    assert [op["type"] for op in ops] == ["ok"] * SENDS
    assert all(op["type"] == "ok" for op in polls)
    after = {b: accepted(rt, cluster, b) for b in SPEC.brokers}
    # Each send asked every broker for metadata and the leader to produce: at least
    # SENDS requests per broker, on the one connection this client keeps to it (a
    # peer broker may open one of its own meanwhile: a few, not one per request).
    new = {b: after[b] - before[b] for b in SPEC.brokers}
    assert all(n <= 3 for n in new.values()), new
    # Everything the broker ever accepted -- peers, controller, harness, this
    # client -- is a handful, not one per request.
    assert after[leader] < 15, after


@pytest.mark.e2e
def test_a_timed_out_request_leaves_no_late_answer_behind(cluster) -> None:
    """A request whose answer did not come in time closes its connection: the
    answer the process sends later never passes for the next request's."""
    rt = Runtime()
    wait_leader(rt, cluster)
    addr = cluster.address("A")
    accepted(rt, cluster, "A")  # one connection, kept
    cluster.pause("A")
    with pytest.raises(WireError):
        rt.request(addr, {"type": "status"}, 0.3)
    cluster.resume("A")  # now it answers the status it holds, on the old connection
    reply = rt.request(addr, {"type": "dump-log", "topic": "t", "partition": 0}, 2.0)
    assert "records" in reply and "node" not in reply  # dump-log's answer, not status's


@pytest.mark.e2e
@pytest.mark.parametrize("end", ["kill", "stop"])
def test_a_request_to_a_process_that_is_gone_is_not_sent(cluster, end: str) -> None:
    """The kept connection of a process killed, or stopped (its listener closes
    idle connections as it stops taking requests), is dropped before use: the next
    request is refused, NotSent, not "lost" (WireError: may have been handled)."""
    rt = Runtime()
    wait_leader(rt, cluster)
    addr = cluster.address("B")
    accepted(rt, cluster, "B")  # a connection kept to B
    getattr(cluster, end)("B")
    with pytest.raises(NotSent):
        rt.request(addr, {"type": "status"}, 2.0)
