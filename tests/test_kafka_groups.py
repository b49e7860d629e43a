"""Consumer groups on the reference broker, driven by real Kafka clients
(kafka-python, confluent-kafka/librdkafka, kcat's -G) against a real local cluster: a member
subscribes, consumes, commits and leaves (closes, or is killed and its session
expires); the next member of the group resumes exactly at the committed offsets
and gets every record after them -- also when the broker the first member used
as its coordinator has been killed (the group lives in the controller)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import descendants, free_port, kcat_or_skip

from broker.protocol import PROTOCOLS
from harness.backends import make_backend
from harness.backends.base import CONTROLLER, ClusterSpec
from workloads.runtime import Runtime

pytestmark = [pytest.mark.e2e]

BROKERS = ["A", "B", "C"]
PER_PARTITION = 200
MEMBER = Path(__file__).resolve().parent / "kafka_group_member.py"
CLIENTS = ["kafka-python", "confluent-kafka"]


def start(tmp: Path, protocol: str = "latest"):
    spec = ClusterSpec(protocol=protocol, brokers=BROKERS,
                       topics=[{"name": "t", "partitions": 2,
                                "replicas": [["A", "B", "C"], ["B", "C", "A"]]}],
                       # Small group timings so a rebalance takes well under a second.
                       broker_config={"min.insync.replicas": 1,
                                      "group.initial.rebalance.delay.ms": 100,
                                      "group.min.session.timeout.ms": 500},
                       controller_config={"broker.session.timeout.ms": 2000})
    backend = make_backend("local", spec, tmp, port=free_port())
    backend.start_controller()
    for b in BROKERS:
        backend.start(b)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if all(p["leader"] and len(p["isr"]) == 3 for p in status(backend)["partitions"]):
            produce(backend)
            return backend
        time.sleep(0.05)
    backend.teardown()
    raise AssertionError("no leaders with the whole ISR within 15 s")


def status(backend) -> dict:
    return Runtime().request(backend.address(CONTROLLER), {"type": "status"}, 2.0)


def produce(backend, bootstrap: str | None = None, count: int = PER_PARTITION) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap or backend.kafka_bootstrap(),
                             acks="all", value_serializer=lambda v: str(v).encode())
    futures = [producer.send("t", p * 1000 + i, partition=p)
               for p in (0, 1) for i in range(count)]
    for f in futures:
        f.get(timeout=20)
    producer.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator:
    backend = start(tmp_path)
    try:
        yield backend
    finally:
        backend.teardown()
        assert descendants(os.getpid()) == []


def first_member(client: str, bootstrap: str, group: str, then: str,
                 ) -> tuple[subprocess.Popen, dict[int, int]]:
    """The first member, in a process of its own; its committed offsets."""
    proc = subprocess.Popen([sys.executable, str(MEMBER), client, bootstrap, group, "t", "10",
                             then], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line, f"the first member exited with {proc.wait()} before committing"
        committed = {int(p): o for p, o in json.loads(line)["committed"].items()}
        assert set(committed) == {0, 1}, committed
        assert all(10 <= o < PER_PARTITION for o in committed.values()), committed
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, committed


def end_member(proc: subprocess.Popen, then: str) -> None:
    try:
        if then == "kill":
            os.kill(proc.pid, signal.SIGKILL)  # no LeaveGroup: its session must expire
        assert proc.wait(timeout=30) in (0, -signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]


def resume(client: str, bootstrap: str, group: str) -> dict[int, list[int]]:
    """The second member: every offset it receives, per partition, until each
    partition's end."""
    got: dict[int, list[int]] = {0: [], 1: []}
    done = lambda: all(o and o[-1] == PER_PARTITION - 1 for o in got.values())  # noqa: E731
    deadline = time.monotonic() + 60
    if client == "kafka-python":
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        c = KafkaConsumer("t", bootstrap_servers=bootstrap, group_id=group,
                          enable_auto_commit=False, auto_offset_reset="earliest",
                          session_timeout_ms=1500, heartbeat_interval_ms=300,
                          max_poll_interval_ms=10_000, request_timeout_ms=10_000)
        while not done() and time.monotonic() < deadline:
            try:
                polled = c.poll(timeout_ms=200)
            except KafkaError as e:
                # A killed broker stays in the metadata until its session expires
                # (as in Kafka); kafka-python 3.0 raises the refused connection of a
                # FindCoordinator sent to it out of poll, and a consumer polls again.
                if not e.retriable:
                    raise
                continue
            for tp, recs in polled.items():
                got[tp.partition].extend(r.offset for r in recs)
    else:
        import confluent_kafka

        c = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 1500,
            "heartbeat.interval.ms": 300, "max.poll.interval.ms": 10_000})
        c.subscribe(["t"])
        while not done() and time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.2):
                if m.error() is None:
                    got[m.partition()].append(m.offset())
    c.close()
    return got


def check_resumed(got: dict[int, list[int]], committed: dict[int, int]) -> None:
    for p, offsets in got.items():
        assert offsets, f"nothing consumed from t-{p}"
        assert offsets[0] == committed[p], (p, offsets[:3], committed)
        assert offsets == list(range(committed[p], PER_PARTITION)), p


@pytest.mark.parametrize("then", ["close", "kill"])
@pytest.mark.parametrize("client", CLIENTS)
def test_the_next_member_resumes_at_the_committed_offsets(cluster, client: str,
                                                          then: str) -> None:
    if client == "confluent-kafka":
        pytest.importorskip("confluent_kafka")
    proc, committed = first_member(client, cluster.kafka_bootstrap(), "g",
                                   "close" if then == "close" else "wait")
    end_member(proc, then)
    check_resumed(resume(client, cluster.kafka_bootstrap(), "g"), committed)
    group = status(cluster)["groups"]["g"]
    assert [group["offsets"][i][2] for i in (0, 1)] == [committed[0], committed[1]]


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_the_coordinator_broker(cluster, client: str) -> None:
    """The broker the first member's group requests came through is killed after
    the commit; a new member finds another coordinator and resumes there."""
    if client == "confluent-kafka":
        pytest.importorskip("confluent_kafka")
    proc, committed = first_member(client, cluster.kafka_bootstrap(), "g", "wait")
    coordinator = status(cluster)["groups"]["g"]["via"]
    assert coordinator in BROKERS
    cluster.kill(coordinator)
    end_member(proc, "kill")
    others = ",".join(cluster.kafka_address(b) for b in BROKERS if b != coordinator)
    check_resumed(resume(client, others, "g"), committed)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("release", [v for v in PROTOCOLS if v not in ("latest", "4.1")])
def test_every_release_line(tmp_path: Path, release: str, client: str) -> None:
    """The same hand-over under each older release line's API versions (JoinGroup
    v0 to v9, with and without KIP-394's MEMBER_ID_REQUIRED; OffsetFetch before and
    after v8's batches); the first member is killed, so its session must expire."""
    if client == "confluent-kafka":
        pytest.importorskip("confluent_kafka")
    backend = start(tmp_path, release)
    try:
        proc, committed = first_member(client, backend.kafka_bootstrap(), "g", "wait")
        end_member(proc, "kill")
        check_resumed(resume(client, backend.kafka_bootstrap(), "g"), committed)
    finally:
        backend.teardown()


def kcat_member(bootstrap: str, group: str, count: int, *extra: str) -> subprocess.Popen:
    """kcat's balanced consumer (-G, librdkafka's KafkaConsumer): `count` records,
    one "partition offset" line each; librdkafka stores each one's offset as it is
    handed out and commits them (auto commit, and on close)."""
    return subprocess.Popen(
        ["kcat", "-q", "-b", bootstrap, "-G", group, "-c", str(count), "-f", "%p %o\\n",
         "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=1500",
         "-X", "heartbeat.interval.ms=300", *extra, "t"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kcat_offsets(lines: list[str]) -> dict[int, list[int]]:
    got: dict[int, list[int]] = {0: [], 1: []}
    for line in lines:
        p, o = line.split()
        got[int(p)].append(int(o))
    return got


def committed_offsets(backend, group: str) -> dict[int, int]:
    """The group's committed offsets by partition ({} before its first commit)."""
    g = (status(backend).get("groups") or {}).get(group) or {}
    return {p: o for _, p, o in g.get("offsets") or []}


@pytest.mark.parametrize("then", ["close", "kill-coordinator"])
def test_kcat_member_hands_over_at_the_committed_offsets(cluster, then: str) -> None:
    """kcat -G. close: the first member consumes 30 records and exits, committing on
    close; the next member starts at each partition's committed offset (earliest
    where none was) and gets every record after it. kill-coordinator: the first
    member consumes everything and auto-commits; the broker its group requests came
    through is killed, and so is it (no LeaveGroup); 50 more records per partition
    are written; the next member, through the other brokers, gets exactly those."""
    kcat_or_skip()
    boot, end = cluster.kafka_bootstrap(), PER_PARTITION
    first = kcat_member(boot, "g", 30 if then == "close" else 10_000,
                        "-X", "auto.commit.interval.ms=100")
    try:
        if then == "close":
            out, err = first.communicate(timeout=60)
            assert first.returncode == 0, err
            consumed = kcat_offsets(out.splitlines())
            assert sum(map(len, consumed.values())) == 30
            committed = committed_offsets(cluster, "g")
            # what it handed out, committed on close: the next offset per partition
            assert committed == {p: offs[-1] + 1 for p, offs in consumed.items() if offs}
        else:
            everything = {0: PER_PARTITION, 1: PER_PARTITION}
            deadline = time.monotonic() + 60
            while (committed := committed_offsets(cluster, "g")) != everything \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            assert committed == everything, "no auto-commit of every record within 60 s"
            coordinator = status(cluster)["groups"]["g"]["via"]
            cluster.kill(coordinator)
            first.kill()  # no LeaveGroup: its session must expire
            first.communicate(timeout=30)
            boot = ",".join(cluster.kafka_address(b) for b in BROKERS if b != coordinator)
            produce(cluster, boot, 50)
            end += 50
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    start = {p: committed.get(p, 0) for p in (0, 1)}
    second = kcat_member(boot, "g", sum(end - o for o in start.values()))
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    got = kcat_offsets(out.splitlines())
    assert got == {p: list(range(start[p], end)) for p in (0, 1)}, (start, err)
