"""The reference broker's Kafka-protocol listener, driven by real Kafka clients
(kafka-python, confluent-kafka/librdkafka, kcat) against a real local cluster: what
they produce is in every replica's log, what they consume is the log below the
HW; the ApiVersions answer is the release's; bad frames close their own
connection and nothing else."""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import descendants, free_port, kcat_or_skip

from broker.kafka import codec, versions
from broker.wire import parse_addr
from harness.backends import make_backend
from harness.backends.base import CONTROLLER, ClusterSpec
from workloads.runtime import Runtime

pytestmark = [pytest.mark.e2e]

BROKERS = ["A", "B", "C"]


def spec(protocol: str) -> ClusterSpec:
    return ClusterSpec(protocol=protocol, brokers=BROKERS,
                       topics=[{"name": "t", "partitions": 2,
                                "replicas": [["A", "B", "C"], ["B", "C", "A"]]}],
                       broker_config={"min.insync.replicas": 2})


def start(protocol: str, tmp: Path):
    backend = make_backend("local", spec(protocol), tmp, port=free_port())
    backend.start_controller()
    for b in BROKERS:
        backend.start(b)
    rt = Runtime()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        parts = rt.request(backend.address(CONTROLLER), {"type": "status"}, 2.0)["partitions"]
        if all(p["leader"] and len(p["isr"]) == 3 for p in parts):
            return backend
        time.sleep(0.05)
    backend.teardown()
    raise AssertionError("no leaders with the whole ISR within 15 s")


@pytest.fixture(scope="module")
def latest(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    backend = start("latest", tmp_path_factory.mktemp("latest"))
    try:
        yield backend
    finally:
        backend.teardown()
        assert descendants(os.getpid()) == []


def bootstrap(backend) -> str:
    return backend.kafka_bootstrap()


def replica_values(backend, partition: int) -> dict[str, list[int]]:
    rt = Runtime()
    return {b: [r[2] for r in rt.request(backend.address(b),
                                         {"type": "dump-log", "topic": "t",
                                          "partition": partition}, 2.0)["records"]]
            for b in BROKERS}


def wait_replicated(backend, partition: int, n: int) -> dict[str, list[int]]:
    deadline = time.monotonic() + 10
    while True:
        logs = replica_values(backend, partition)
        if all(len(v) >= n for v in logs.values()) or time.monotonic() > deadline:
            return logs
        time.sleep(0.05)


def test_kafka_python_produces_and_consumes(latest) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap(latest), acks="all",
                             enable_idempotence=True, linger_ms=5,
                             value_serializer=lambda v: str(v).encode())
    sent = list(range(1000, 1200))
    futures = [producer.send("t", v, partition=0) for v in sent]
    offsets = [f.get(timeout=20).offset for f in futures]
    producer.close()
    assert offsets == sorted(offsets) and len(set(offsets)) == len(sent)
    logs = wait_replicated(latest, 0, offsets[-1] + 1)
    for b, values in logs.items():
        assert [values[o] for o in offsets] == sent, b

    consumer = KafkaConsumer(bootstrap_servers=bootstrap(latest), enable_auto_commit=False,
                             group_id=None, auto_offset_reset="earliest")
    tp = TopicPartition("t", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: dict[int, int] = {}
    deadline = time.monotonic() + 20
    while len(got) < offsets[-1] + 1 and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            got.update((r.offset, int(r.value)) for r in recs)
    consumer.close()
    assert [got[o] for o in offsets] == sent


def test_confluent_kafka_produces_and_consumes(latest) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(latest), "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5})
    delivered: dict[int, int] = {}

    def report(err, msg) -> None:
        assert err is None, err
        delivered[int(msg.value())] = msg.offset()

    sent = list(range(5000, 6000))
    for v in sent:
        producer.produce("t", str(v).encode(), partition=1, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert sorted(delivered) == sent
    logs = wait_replicated(latest, 1, max(delivered.values()) + 1)
    for b, values in logs.items():
        assert all(values[o] == v for v, o in delivered.items()), b

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap(latest),
                                         "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("t", 1, confluent_kafka.OFFSET_BEGINNING)])
    got: dict[int, int] = {}
    deadline = time.monotonic() + 20
    while len(got) < len(logs["A"]) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got[msg.offset()] = int(msg.value())
    consumer.close()
    assert {v: got[o] for v, o in delivered.items()} == {v: v for v in sent}


def test_kcat_produces_and_consumes(latest) -> None:
    """kcat through isrlab's drivers: 200 values in one kcat run are each
    acknowledged with the offset every replica holds it at (one request in
    flight: its reports follow the values), and so is a value sent alone; its
    consumer reads them back from the tracked offset,
    offset for offset as every replica's log has them, and a poll at the end of
    the partition returns nothing, at once."""
    kcat_or_skip()
    from workloads.kafka_clients.kcat import Consumer as KcatConsumer
    from workloads.kafka_clients.kcat import Producer as KcatProducer

    before = max(len(v) for v in replica_values(latest, 1).values())
    producer = KcatProducer(bootstrap(latest), "all", 5000, 10000, {})
    sent = list(range(20000, 20200))
    deliveries = producer.produce("t", 1, sent, 30)
    assert [(d.error, d.offset) for d in deliveries] == [
        (None, before + i) for i in range(len(sent))]
    alone = [producer.produce("t", 1, [v], 30)[0] for v in (20200, 20201)]
    assert [(d.error, d.offset) for d in alone] == [(None, before + 200), (None, before + 201)]
    end = before + 202
    logs = wait_replicated(latest, 1, end)
    for b, values in logs.items():
        assert values[before:end] == [*sent, 20200, 20201], b

    consumer = KcatConsumer(bootstrap(latest), "t", 1, before, {}, "isrlab-test")
    got: list[list[int]] = []
    deadline = time.monotonic() + 20
    while len(got) < end - before and time.monotonic() < deadline:
        records, error = consumer.poll(50, 1.0)
        assert error is None and len(records) <= 50
        got += records
    for b, values in logs.items():
        assert got == [[o, values[o]] for o in range(before, end)], b
    assert consumer.poll(50, 1.0) == ([], None)
    assert consumer.last_exit == 0  # -e: kcat exits at the end, not killed at its deadline


def test_one_client_config_serves_kafka_python_producers_and_consumers(latest) -> None:
    """kafka-python refuses a key its class does not know: a producer-only setting
    (enable_idempotence=false, its default being true) still reaches the producers,
    and the consumers are built without it."""
    from workloads.kafka_clients import consumer_driver, producer_driver

    config = {"enable_idempotence": False, "fetch_min_bytes": 1}
    p = producer_driver("kafka-python", bootstrap(latest), "all", 5000, 5000, config)
    assert p._p.config["enable_idempotence"] is False
    sent = p.produce("t", 1, [7001, 7002], 20.0)
    p.close()
    assert [d.error for d in sent] == [None, None], sent
    c = consumer_driver("kafka-python", bootstrap(latest), "t", 1, sent[0].offset, config, "c")
    got: list[list[int]] = []
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        got += c.poll(10, 0.5)[0]
    c.close()
    assert got[:2] == [[sent[0].offset, 7001], [sent[1].offset, 7002]]


@pytest.mark.parametrize(("client", "config", "said"), [
    ("confluent-kafka", {"no.such.setting": 1},
     'confluent-kafka refused the producer settings: KafkaError{code=_INVALID_ARG,val=-186,'
     'str="No such configuration property: "no.such.setting""}'),
    ("confluent-kafka", {"fetch.wait.max.ms": "soon"},  # a consumer's, checked by both
     'confluent-kafka refused the producer settings: KafkaError{code=_INVALID_ARG,val=-186,'
     'str="Invalid value for configuration property "fetch.wait.max.ms""}'),
    ("kafka-python", {"no_such_setting": 1, "enable_idempotence": False},
     "kafka-python refused the settings: unknown setting no_such_setting"),
    ("kcat", {"no.such.setting": 1},
     'kcat refused the producer settings: % ERROR: No such configuration property: '
     '"no.such.setting"')])
def test_a_refused_setting_is_found_before_anything_starts(client: str, config: dict,
                                                           said: str) -> None:
    """require_client builds the client's producer and consumer with no bootstrap
    (nothing dialled): a setting it refuses is the client's own words, at once."""
    from workloads.kafka_clients import ClientConfigError, require_client

    if client == "kcat":
        kcat_or_skip()
    with pytest.raises(ClientConfigError) as e:
        require_client(client, config)
    assert str(e.value).startswith(said), str(e.value)
    require_client(client, {})  # the defaults pass


def test_kcat_failures_are_info_or_fail(tmp_path: Path) -> None:
    """What kcat could not deliver is never `ok`: values for a partition that does
    not exist are refused unsent (Delivery.sent false); with every broker down
    each value of the run is an error that may have been written (sent), after
    librdkafka's own retries until message.timeout.ms; a setting kcat does not
    know is a ClientConfigError naming it."""
    kcat_or_skip()
    from workloads.kafka_clients import ClientConfigError
    from workloads.kafka_clients.kcat import Producer as KcatProducer

    backend = start("latest", tmp_path)
    try:
        producer = KcatProducer(backend.kafka_bootstrap(), "all", 500, 1000, {})
        refused = producer.produce("t", 7, [1, 2, 3], 10)
        assert [(d.error, d.sent) for d in refused] == [("Local: Unknown partition", False)] * 3
        for b in BROKERS:
            backend.kill(b)
        down = producer.produce("t", 0, [4, 5, 6], 10)
        assert all(d.error is not None and d.sent and d.offset is None for d in down), down
        assert "Message timed out" in down[0].error
        with pytest.raises(ClientConfigError, match="no.such.setting"):
            KcatProducer(backend.kafka_bootstrap(), "all", 500, 1000, {"no.such.setting": 1})
    finally:
        backend.teardown()


def _frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _exactly(sock, 4))[0]
    return _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _connect(backend, broker: str = "A") -> socket.socket:
    return socket.create_connection(parse_addr(backend.kafka_address(broker)), timeout=5)


def api_versions(backend, version: int = 0, answered: int | None = None) -> tuple[int, dict]:
    """ApiVersions at `version`, its answer read at `answered` (default: the same)."""
    with _connect(backend) as s:
        s.sendall(codec.encode_request(codec.RequestHeader(18, version, 7, "t"), {}))
        return codec.decode_response(18, version if answered is None else answered, _frame(s))


def test_api_versions_are_the_releases(latest, tmp_path: Path) -> None:
    """ApiVersions answers the ranges the release's broker offered; an ApiVersions
    version it does not offer gets UNSUPPORTED_VERSION in v0 with those ranges."""
    old = start("0.10", tmp_path)
    try:
        for backend, release in ((latest, "4.1"), (old, "0.10")):
            cid, body = api_versions(backend)
            assert cid == 7 and body["error_code"] == 0
            assert {k["api_key"]: (k["min_version"], k["max_version"])
                    for k in body["api_keys"]} == versions.api_versions(release)
        cid, body = api_versions(old, 3, answered=0)  # 0.10.2 offered ApiVersions v0 only
        assert body["error_code"] == 35 and len(body["api_keys"]) == len(
            versions.api_versions("0.10"))
    finally:
        old.teardown()


def still_serves(backend) -> None:
    assert api_versions(backend)[1]["error_code"] == 0


def test_bad_frames_close_their_connection_only(latest) -> None:
    """An oversized frame, a malformed one, and a request of a version the broker
    does not offer each close that connection; another connection, opened before
    and used after, is served throughout, and the broker keeps running."""
    with _connect(latest) as other:
        with _connect(latest) as s:
            s.sendall(struct.pack(">i", 200 * 1024 * 1024))  # over socket.request.max.bytes
            assert s.recv(1) == b""
        with _connect(latest) as s:
            # Metadata v1 whose topic array claims a million entries it lacks.
            s.sendall(struct.pack(">ihhihi", 14, 3, 1, 5, -1, 1_000_000))
            assert s.recv(1) == b""
        with _connect(latest) as s:
            # Produce v99: a version no release offered.
            s.sendall(struct.pack(">ihhih", 10, 0, 99, 1, -1))
            assert s.recv(1) == b""
        other.sendall(codec.encode_request(codec.RequestHeader(18, 0, 9, "t"), {}))
        assert codec.decode_response(18, 0, _frame(other))[0] == 9
    still_serves(latest)


def leader_of(backend, partition: int) -> str:
    rt = Runtime()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for p in rt.request(backend.address(CONTROLLER), {"type": "status"}, 2.0)["partitions"]:
            if p["partition"] == partition and p["leader"]:
                return p["leader"]
        time.sleep(0.05)
    raise AssertionError(f"no leader of t-{partition} within 15 s")


@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_idempotent_confluent_producer_across_a_leader_change(tmp_path: Path, fault: str) -> None:
    """librdkafka with enable.idempotence and acks=all keeps sending while the
    leader is killed (or stopped cleanly): its in-flight batches are retried on
    the new leader, which knows their sequences from the batches it replicated,
    so every acknowledged value is in the log exactly once, and nothing is in it
    twice (without sequence checks a retried batch was stored twice, or a later
    in-flight batch accepted past a lost one)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    backend = start("latest", tmp_path)
    try:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": backend.kafka_bootstrap(), "acks": "all",
            "enable.idempotence": True, "linger.ms": 2, "message.timeout.ms": 60000,
            "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 500})
        delivered: dict[int, int] = {}
        failed: list[int] = []

        def report(err, msg) -> None:
            if err is not None:
                failed.append(int(msg.value()))
            else:
                delivered[int(msg.value())] = msg.offset()

        old = leader_of(backend, 0)
        for v in range(4000):
            producer.produce("t", str(v).encode(), partition=0, on_delivery=report)
            producer.poll(0)
            if v == 1500:
                getattr(backend, fault)(old)
            if v % 100 == 0:
                time.sleep(0.01)  # spread the sends over the fault
        assert producer.flush(90) == 0
        backend.start(old)
        logs = wait_replicated(backend, 0, max(delivered.values()) + 1)
        assert leader_of(backend, 0) is not None
        for b, values in logs.items():
            assert len(values) == len(set(values)), f"{b} holds a value twice"
        final = logs[leader_of(backend, 0)]
        assert all(final[o] == v for v, o in delivered.items())
        assert len(delivered) + len(failed) == 4000 and len(delivered) > 3000
    finally:
        backend.teardown()
