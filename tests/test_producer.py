"""Producer outcome rules against scripted brokers: ok / fail only when certainly
not written / info when it may have been."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import free_port

from contract.history import History
from contract.rundir import read_history
from harness.run.clock import RunClock
from workloads.client import ClusterClient
from workloads.consumer import Consumer, final_read
from workloads.producer import Producer


class Scripted:
    """A broker on 127.0.0.x answering metadata itself and produce/fetch from a script.
    A script entry is a reply dict, "close" (drop the connection after reading the
    request) or "hang" (never answer)."""

    def __init__(self, host: str, script: list) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, free_port()))
        self.sock.listen()
        host, port = self.sock.getsockname()
        self.addr = f"{host}:{port}"
        self.script = list(script)
        self.requests: list[dict] = []
        self.metadata_asked = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        f = conn.makefile("rb")
        with conn:
            for line in f:
                req = json.loads(line)
                if req["type"] == "metadata":
                    self.metadata_asked += 1
                    reply = {"error": None, "brokers": {"A": self.addr}, "partitions": [
                        {"topic": "t", "partition": 0, "leader": "A", "leader_epoch": 0,
                         "isr": ["A"], "replicas": ["A"]}]}
                else:
                    self.requests.append(req)
                    reply = self.script.pop(0)
                    if reply == "close":
                        return
                    if reply == "hang":
                        threading.Event().wait(5)
                        return
                conn.sendall(json.dumps(reply).encode() + b"\n")

    def close(self) -> None:
        # shutdown wakes the thread blocked in accept(); close alone would leave
        # the socket listening until that call returns.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


MakeScripted = Callable[[str, list], Scripted]


@pytest.fixture
def scripted() -> Iterator[MakeScripted]:
    """Make Scripted brokers that stop listening when the test ends, so that no
    later test finds their port taken."""
    made: list[Scripted] = []

    def make(host: str, script: list) -> Scripted:
        made.append(Scripted(host, script))
        return made[-1]

    yield make
    for b in made:
        b.close()


@pytest.fixture
def history(tmp_path: Path) -> History:
    h = History(tmp_path / "history.jsonl", RunClock())
    yield h
    h.close()


def producer(addr: str, history: History, **kw) -> Producer:
    return Producer(ClusterClient(lambda: {"A": addr}), history, 0, **kw)


def test_retries_not_leader_then_ok(history: History, scripted: MakeScripted) -> None:
    b = scripted("127.0.0.2", [{"error": "NOT_LEADER_OR_FOLLOWER", "offset": None},
                               {"error": None, "offset": 7}])
    op = producer(b.addr, history).send("t", 0, 42, label="m0")
    assert op["type"] == "ok" and op["offset"] == 7 and op["value"] == 42
    assert len(b.requests) == 2 and b.requests[0]["acks"] == "all"
    assert [o["type"] for o in read_history(history.path.parent)] == ["invoke", "ok"]  # one pair


@pytest.mark.parametrize("reply,type_", [
    ({"error": "NOT_ENOUGH_REPLICAS", "offset": None}, "fail"),
    ({"error": "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "offset": 3}, "info"),
    ({"error": "REQUEST_TIMED_OUT", "offset": None}, "info"),
    ("close", "info"),
])
def test_outcomes(history: History, reply, type_: str, scripted: MakeScripted) -> None:
    b = scripted("127.0.0.2", [reply])
    op = producer(b.addr, history, acks=1).send("t", 0, 1)
    assert op["type"] == type_
    assert op["acks"] == 1 and op["topic"] == "t"


def test_error_after_append_is_info_and_not_resent(history: History,
                                                   scripted: MakeScripted) -> None:
    """A leader deposed while the send waited for acks=all answers NOT_LEADER_OR_FOLLOWER
    for a record already in its log: maybe committed, so info -- a resend would
    write the value twice (a duplicate), and a later definite error would claim it
    was never written (an aborted read). Found by chaos on Docker under `latest`."""
    reply = {"error": "NOT_LEADER_OR_FOLLOWER", "offset": 5, "appended": True}
    b = scripted("127.0.0.2", [reply, {"error": None, "offset": 9}])
    op = producer(b.addr, history).send("t", 0, 1)
    assert op["type"] == "info" and op["error"] == "NOT_LEADER_OR_FOLLOWER"
    assert len(b.requests) == 1
    c = scripted("127.0.0.3", [reply, {"error": None, "offset": 9}])
    ops = producer(c.addr, history).send_batch("t", 0, [2, 3])
    assert [o["type"] for o in ops] == ["info", "info"] and len(c.requests) == 1


def test_timeout_after_sending_is_info(history: History, scripted: MakeScripted) -> None:
    b = scripted("127.0.0.2", ["hang"])
    op = producer(b.addr, history, timeout_ms=100).send("t", 0, 1)
    assert op["type"] == "info"


def test_not_leader_until_deadline_is_fail(history: History, scripted: MakeScripted) -> None:
    b = scripted("127.0.0.2", [{"error": "NOT_LEADER_OR_FOLLOWER"}] * 100)
    op = producer(b.addr, history, retry_ms=300).send("t", 0, 1)
    assert op["type"] == "fail" and op["error"] == "NOT_LEADER_OR_FOLLOWER"


def test_no_reachable_broker_is_fail(history: History) -> None:
    op = Producer(ClusterClient(lambda: {}), history, 0, retry_ms=200).send("t", 0, 1)
    assert op["type"] == "fail"


def test_refused_connection_is_retried_then_fail(history: History) -> None:
    port = free_port()  # nothing listens there: metadata itself fails
    op = producer(f"127.0.0.2:{port}", history, retry_ms=200).send("t", 0, 1)
    assert op["type"] == "fail"


def test_consumer_and_final_read_pages(history: History, scripted: MakeScripted) -> None:
    recs = [[i, 0, 100 + i] for i in range(5)]
    b = scripted("127.0.0.2", [
        {"error": None, "records": recs[:2], "hw": 5, "leo": 5, "leader_epoch": 0},
        {"error": None, "records": recs[:2], "hw": 5, "leo": 5, "leader_epoch": 0},
        {"error": None, "records": recs[2:4], "hw": 5, "leo": 5, "leader_epoch": 0},
        {"error": None, "records": recs[4:], "hw": 5, "leo": 5, "leader_epoch": 0},
    ])
    c = Consumer(ClusterClient(lambda: {"A": b.addr}), history, 1, "t", 0)
    op = c.poll()
    assert op["records"] == [[0, 100], [1, 101]] and op["hw"] == 5 and c.position == 2
    assert (op["node"], op["epoch"]) == ("A", 0)  # the reply's leader_epoch
    op = final_read(history, "A", b.addr, "t", 0, page=2)
    assert op["process"] == "final" and op["type"] == "ok" and op["hw"] == 5
    assert op["records"] == [[i, 100 + i] for i in range(5)]
    assert [r["offset"] for r in b.requests[1:]] == [0, 2, 4]


@pytest.mark.parametrize("cache", [False, True])
def test_chaos_consumer_keeps_its_leader_until_a_poll_fails(
        history: History, scripted: MakeScripted, cache: bool) -> None:
    """A chaos workload's consumer asks for metadata once and again only after a
    failed poll, as Kafka's does; a scenario's consumer asks before every poll."""
    ok = {"error": None, "records": [], "hw": 0, "leo": 0, "leader_epoch": 0}
    b = scripted("127.0.0.2", [ok, ok, {"error": "NOT_LEADER_OR_FOLLOWER"}, ok])
    c = Consumer(ClusterClient(lambda: {"A": b.addr}), history, 1, "t", 0, cache_leader=cache)
    types = [c.poll()["type"] for _ in range(4)]
    assert types == ["ok", "ok", "fail", "ok"]
    assert b.metadata_asked == (2 if cache else 4)


def test_batched_sends_keep_their_leader_until_a_send_fails(
        history: History, scripted: MakeScripted) -> None:
    """send_batch (every chaos send) asks for metadata once per leader it finds."""
    b = scripted("127.0.0.2", [{"error": None, "offset": 0}, {"error": None, "offset": 1},
                               {"error": "NOT_LEADER_OR_FOLLOWER"}, {"error": None, "offset": 2}])
    p = producer(b.addr, history)
    assert [op["type"] for v in (1, 2, 3) for op in p.send_batch("t", 0, [v])] == ["ok"] * 3
    assert b.metadata_asked == 2  # once, then again after NOT_LEADER_OR_FOLLOWER
