"""Real Kafka clients as the workload's transport: librdkafka (confluent-kafka)
and kafka-python, over the reference broker's Kafka listener (or any Kafka
cluster's).

A driver does what a service using that client does -- hand values to the
client's producer and wait for its delivery reports, or poll its consumer --
and says what the client said, nothing more: the client's own retries,
batching, idempotence and leader-epoch handling decide. workloads.client_ops
turns what a driver reports into the history's ops.

Every driver takes the user's client settings (`config`, the client's own key
names) over isrlab's defaults, which only tie the client's timeouts to the
workload's (`timeout_ms` per request, `retry_ms` for retrying) so a send's
outcome is known within the workload's time.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

CLIENTS = ("confluent-kafka", "kafka-python")


class ClientConfigError(ValueError):
    """A client setting the client refused (a user error, exit 2)."""


@dataclass(frozen=True)
class Delivery:
    """What the client reported for one value: acknowledged (no `error`; its
    `offset`, unless acks 0), or the `error` it gave up with and whether the
    value certainly never reached a broker (`sent` false: refused before
    sending, e.g. an unknown partition or a full queue)."""

    offset: int | None = None
    error: str | None = None
    sent: bool = True


class ProducerDriver(Protocol):
    def produce(self, topic: str, partition: int, values: list[int],
                timeout: float) -> list[Delivery]: ...

    def close(self) -> None: ...


class ConsumerDriver(Protocol):
    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], str | None]:
        """Records [[offset, value], ...] the client returned, and an error it
        reported instead (None)."""
        ...

    def close(self) -> None: ...


def client_logger(path: Path | None) -> logging.Logger:
    """Where the clients' own log lines go: the run's `logs/clients.log` (not the
    terminal, which the harness's progress lines own); nowhere without a path.
    librdkafka logs through the logger given in its settings, kafka-python
    through its module loggers ("kafka"), which this takes over for the run."""
    logger = logging.getLogger("isrlab.clients")
    kafka_logger = logging.getLogger("kafka")
    for lg in (logger, kafka_logger):
        for h in list(lg.handlers):
            lg.removeHandler(h)
            h.close()
        lg.propagate = False
        lg.setLevel(logging.INFO)
    handler: logging.Handler = logging.NullHandler()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    kafka_logger.addHandler(handler)
    return logger


def _int_value(raw: bytes | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


# -- librdkafka (confluent-kafka) ---------------------------------------------------


class ConfluentProducer:
    """librdkafka's producer: values go to its queue, the delivery reports say
    each one's fate (offset, or the error it gave up with)."""

    def __init__(self, bootstrap: str, acks: int | str, timeout_ms: int, retry_ms: int,
                 config: dict[str, Any]) -> None:
        import confluent_kafka
        self._ck = confluent_kafka
        settings = {"bootstrap.servers": bootstrap, "acks": str(acks),
                    "request.timeout.ms": timeout_ms,
                    # The client retries until this passes, then reports the error.
                    "message.timeout.ms": timeout_ms + retry_ms,
                    "linger.ms": 5, "retry.backoff.ms": 50,
                    "topic.metadata.refresh.interval.ms": 1000,
                    "logger": logging.getLogger("isrlab.clients"), **config}
        try:
            self._p = confluent_kafka.Producer(settings)
        except confluent_kafka.KafkaException as e:
            raise ClientConfigError(f"confluent-kafka refused the producer settings: {e}") \
                from None
        self._lock = threading.Lock()

    def produce(self, topic: str, partition: int, values: list[int],
                timeout: float) -> list[Delivery]:
        got: dict[int, Delivery] = {}

        def report(i: int, err: Any, msg: Any) -> None:
            if err is None:
                off = msg.offset()
                got[i] = Delivery(offset=off if off is not None and off >= 0 else None)
            else:
                got[i] = Delivery(error=err.name(), sent=err.code() not in self._never_sent())

        with self._lock:  # one batch at a time: its reports are this call's
            for i, v in enumerate(values):
                try:
                    self._p.produce(topic, str(v).encode(), partition=partition,
                                    on_delivery=lambda err, msg, i=i: report(i, err, msg))
                except BufferError as e:
                    got[i] = Delivery(error=f"queue full: {e}", sent=False)
                except self._ck.KafkaException as e:
                    got[i] = Delivery(error=str(e), sent=False)
            deadline = time.monotonic() + timeout
            while len(got) < len(values) and time.monotonic() < deadline:
                self._p.poll(0.02)
        return [got.get(i, Delivery(error="no delivery report in time")) for i in
                range(len(values))]

    def _never_sent(self) -> set[int]:
        e = self._ck.KafkaError
        return {e._UNKNOWN_PARTITION, e._UNKNOWN_TOPIC, e.MSG_SIZE_TOO_LARGE,
                e._INVALID_ARG, e._QUEUE_FULL}

    def close(self) -> None:
        self._p.flush(1.0)


class ConfluentConsumer:
    """librdkafka's consumer assigned one partition from `offset` (no group)."""

    def __init__(self, bootstrap: str, topic: str, partition: int, offset: int,
                 config: dict[str, Any], name: str) -> None:
        import confluent_kafka
        settings = {"bootstrap.servers": bootstrap, "group.id": name,
                    "enable.auto.commit": False, "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
                    "logger": logging.getLogger("isrlab.clients"), **config}
        try:
            self._c = confluent_kafka.Consumer(settings)
        except confluent_kafka.KafkaException as e:
            raise ClientConfigError(f"confluent-kafka refused the consumer settings: {e}") \
                from None
        self._c.assign([confluent_kafka.TopicPartition(topic, partition, offset)])

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], str | None]:
        records, error = [], None
        for m in self._c.consume(num_messages=max_records, timeout=timeout):
            if m.error() is not None:
                error = m.error().name()
                continue
            value = _int_value(m.value())
            if value is not None:
                records.append([m.offset(), value])
        return records, error if not records else None

    def close(self) -> None:
        self._c.close()


# -- kafka-python -------------------------------------------------------------------


class KafkaPythonProducer:
    """kafka-python's KafkaProducer: each value's future gives its offset or error."""

    def __init__(self, bootstrap: str, acks: int | str, timeout_ms: int, retry_ms: int,
                 config: dict[str, Any]) -> None:
        import kafka
        import kafka.errors
        self._errors = kafka.errors
        settings = {"bootstrap_servers": bootstrap.split(","),
                    "acks": "all" if acks in ("all", -1) else int(acks),
                    "request_timeout_ms": timeout_ms,
                    "delivery_timeout_ms": timeout_ms + retry_ms, "linger_ms": 5,
                    "retry_backoff_ms": 50, "max_block_ms": retry_ms,
                    "metadata_max_age_ms": 1000, **config}
        try:
            self._p = kafka.KafkaProducer(**settings)
        except (kafka.errors.KafkaConfigurationError, TypeError, AssertionError) as e:
            raise ClientConfigError(f"kafka-python refused the producer settings: {e}") \
                from None

    def produce(self, topic: str, partition: int, values: list[int],
                timeout: float) -> list[Delivery]:
        futures: list[Any] = []
        for v in values:
            try:
                futures.append(self._p.send(topic, str(v).encode(), partition=partition))
            except self._errors.KafkaTimeoutError as e:  # no metadata: never sent
                futures.append(Delivery(error=f"KafkaTimeoutError: {e}", sent=False))
        deadline = time.monotonic() + timeout
        out = []
        for f in futures:
            if isinstance(f, Delivery):
                out.append(f)
                continue
            try:
                md = f.get(timeout=max(deadline - time.monotonic(), 0.001))
                out.append(Delivery(offset=md.offset if md.offset >= 0 else None))
            except self._errors.KafkaTimeoutError:
                out.append(Delivery(error="no delivery report in time"))
            except self._errors.KafkaError as e:
                out.append(Delivery(error=type(e).__name__))
        return out

    def close(self) -> None:
        self._p.close(timeout=1)


class KafkaPythonConsumer:
    """kafka-python's KafkaConsumer assigned one partition from `offset` (no group)."""

    def __init__(self, bootstrap: str, topic: str, partition: int, offset: int,
                 config: dict[str, Any], name: str) -> None:
        import kafka
        import kafka.errors
        self._errors = kafka.errors
        settings = {"bootstrap_servers": bootstrap.split(","), "group_id": None,
                    "client_id": name, "enable_auto_commit": False,
                    "auto_offset_reset": "earliest", "fetch_max_wait_ms": 100,
                    "metadata_max_age_ms": 1000, **config}
        try:
            self._c = kafka.KafkaConsumer(**settings)
        except (kafka.errors.KafkaConfigurationError, TypeError, AssertionError) as e:
            raise ClientConfigError(f"kafka-python refused the consumer settings: {e}") \
                from None
        self._tp = kafka.TopicPartition(topic, partition)
        self._c.assign([self._tp])
        self._c.seek(self._tp, offset)

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], str | None]:
        try:
            batches = self._c.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        except self._errors.KafkaError as e:
            return [], type(e).__name__
        records = []
        for r in batches.get(self._tp, []):
            value = _int_value(r.value)
            if value is not None:
                records.append([r.offset, value])
        return records, None

    def close(self) -> None:
        self._c.close()


def producer_driver(client: str, bootstrap: str, acks: int | str, timeout_ms: int,
                    retry_ms: int, config: dict[str, Any]) -> ProducerDriver:
    if client == "confluent-kafka":
        return ConfluentProducer(bootstrap, acks, timeout_ms, retry_ms, config)
    if client == "kafka-python":
        return KafkaPythonProducer(bootstrap, acks, timeout_ms, retry_ms, config)
    raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def consumer_driver(client: str, bootstrap: str, topic: str, partition: int, offset: int,
                    config: dict[str, Any], name: str) -> ConsumerDriver:
    if client == "confluent-kafka":
        return ConfluentConsumer(bootstrap, topic, partition, offset, config, name)
    if client == "kafka-python":
        return KafkaPythonConsumer(bootstrap, topic, partition, offset, config, name)
    raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


# -- an existing cluster: metadata and the final read ----------------------------


class ClusterUnreachable(RuntimeError):
    """The client could not get the cluster's metadata (a user error on an
    external target: a wrong --bootstrap, exit 2)."""


@dataclass(frozen=True)
class TopicMetadata:
    """What the client's metadata says of one topic: its partitions' leaders and
    replicas (broker ids as strings; a leader None while there is none), and every
    broker's host:port. `exists` false: the cluster does not know the topic."""

    exists: bool
    leaders: dict[int, str | None]
    replicas: dict[int, list[str]]
    brokers: dict[str, str]


def topic_metadata(client: str, bootstrap: str, topic: str, config: dict[str, Any],
                   timeout: float) -> TopicMetadata:
    """The topic's metadata as `client` sees it, within `timeout` seconds; raises
    ClusterUnreachable. Asks for every topic, never this one by name: a metadata
    request naming a topic may create it on a broker that auto-creates topics."""
    if client == "confluent-kafka":
        return _confluent_metadata(bootstrap, topic, config, timeout)
    if client == "kafka-python":
        return _kafka_python_metadata(bootstrap, topic, config, timeout)
    raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def _confluent_metadata(bootstrap: str, topic: str, config: dict[str, Any],
                        timeout: float) -> TopicMetadata:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient
    # Only the connection's settings apply to an admin client: the producer's
    # and consumer's keys (acks, enable.idempotence) would be refused here.
    settings = {"bootstrap.servers": bootstrap,
                "logger": logging.getLogger("isrlab.clients"),
                **{k: v for k, v in config.items()
                   if k.startswith(("security.", "sasl.", "ssl.", "socket.", "client."))}}
    try:
        md = AdminClient(settings).list_topics(timeout=timeout)
    except confluent_kafka.KafkaException as e:
        raise ClusterUnreachable(f"confluent-kafka got no metadata from {bootstrap}: "
                                 f"{e.args[0].str() if e.args else e}") from None
    brokers = {str(b.id): f"{b.host}:{b.port}" for b in md.brokers.values()}
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return TopicMetadata(False, {}, {}, brokers)
    leaders = {p.id: (str(p.leader) if p.leader >= 0 else None)
               for p in t.partitions.values()}
    replicas = {p.id: [str(r) for r in p.replicas] for p in t.partitions.values()}
    return TopicMetadata(True, leaders, replicas, brokers)


def _kafka_python_metadata(bootstrap: str, topic: str, config: dict[str, Any],
                           timeout: float) -> TopicMetadata:
    import kafka
    import kafka.errors
    try:
        admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap.split(","),
                                       request_timeout_ms=int(timeout * 1000),
                                       bootstrap_timeout_ms=int(timeout * 1000))
    except kafka.errors.KafkaError as e:
        raise ClusterUnreachable(f"kafka-python got no metadata from {bootstrap}: "
                                 f"{type(e).__name__}") from None
    try:
        brokers = {str(b["broker_id"]): f"{b['host']}:{b['port']}"
                   for b in admin.describe_cluster()["brokers"]}
        if topic not in admin.list_topics():
            return TopicMetadata(False, {}, {}, brokers)
        (t,) = admin.describe_topics([topic])
    except kafka.errors.KafkaError as e:
        raise ClusterUnreachable(f"kafka-python got no metadata from {bootstrap}: "
                                 f"{type(e).__name__}") from None
    finally:
        admin.close()
    parts = t["partitions"]  # DescribeTopics' (Metadata response) field names
    leaders = {p["partition_index"]: (str(p["leader_id"]) if p["leader_id"] >= 0 else None)
               for p in parts}
    replicas = {p["partition_index"]: [str(r) for r in p["replica_nodes"]] for p in parts}
    return TopicMetadata(True, leaders, replicas, brokers)


def read_to_end(client: str, bootstrap: str, topic: str, partition: int,
                config: dict[str, Any], timeout: float) -> tuple[list[list[int]], int]:
    """Every record of one partition from offset 0 up to its high watermark as the
    client reports it when the read starts: (records [[offset, value], ...], hw).
    Raises ClusterUnreachable if the HW is not known, or the records up to it not
    read, within `timeout` seconds. Records whose value is not an integer (not the
    workload's) are passed over."""
    deadline = time.monotonic() + timeout
    if client == "confluent-kafka":
        return _confluent_read_to_end(bootstrap, topic, partition, config, deadline)
    if client == "kafka-python":
        return _kafka_python_read_to_end(bootstrap, topic, partition, config, deadline)
    raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def _confluent_read_to_end(bootstrap: str, topic: str, partition: int,
                           config: dict[str, Any], deadline: float
                           ) -> tuple[list[list[int]], int]:
    import confluent_kafka
    settings = {"bootstrap.servers": bootstrap, "group.id": "isrlab-final-read",
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100, "logger": logging.getLogger("isrlab.clients"),
                **config}
    c = confluent_kafka.Consumer(settings)
    try:
        tp = confluent_kafka.TopicPartition(topic, partition)
        try:
            _, hw = c.get_watermark_offsets(tp, timeout=max(deadline - time.monotonic(), 0.1))
        except confluent_kafka.KafkaException as e:
            raise ClusterUnreachable(f"no high watermark for {topic}/{partition}: "
                                     f"{e.args[0].str() if e.args else e}") from None
        records: list[list[int]] = []
        position = 0
        c.assign([confluent_kafka.TopicPartition(topic, partition, 0)])
        while position < hw:
            if time.monotonic() >= deadline:
                raise ClusterUnreachable(f"read {topic}/{partition} up to offset {position} "
                                         f"of hw {hw} only")
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None or m.offset() >= hw:
                    continue
                position = m.offset() + 1
                value = _int_value(m.value())
                if value is not None:
                    records.append([m.offset(), value])
            # The client's position passes offsets that hold no record for it
            # (transaction markers, compacted ones).
            position = max(position, c.position([tp])[0].offset)
        return records, hw
    finally:
        c.close()


def _kafka_python_read_to_end(bootstrap: str, topic: str, partition: int,
                              config: dict[str, Any], deadline: float
                              ) -> tuple[list[list[int]], int]:
    import kafka
    import kafka.errors
    settings = {"bootstrap_servers": bootstrap.split(","), "group_id": None,
                "client_id": "isrlab-final-read", "enable_auto_commit": False,
                "auto_offset_reset": "earliest", "fetch_max_wait_ms": 100, **config}
    try:
        c = kafka.KafkaConsumer(**settings)
    except kafka.errors.KafkaError as e:
        raise ClusterUnreachable(f"kafka-python: {type(e).__name__}") from None
    try:
        tp = kafka.TopicPartition(topic, partition)
        c.assign([tp])
        try:
            hw = c.end_offsets([tp])[tp]
        except kafka.errors.KafkaError as e:
            raise ClusterUnreachable(f"no high watermark for {topic}/{partition}: "
                                     f"{type(e).__name__}") from None
        c.seek(tp, 0)
        records: list[list[int]] = []
        position = 0
        while position < hw:
            if time.monotonic() >= deadline:
                raise ClusterUnreachable(f"read {topic}/{partition} up to offset {position} "
                                         f"of hw {hw} only")
            try:
                batches = c.poll(timeout_ms=500, max_records=1000)
            except kafka.errors.KafkaError:
                continue  # asked again until the deadline
            for r in batches.get(tp, []):
                if r.offset >= hw:
                    continue
                position = r.offset + 1
                value = _int_value(r.value)
                if value is not None:
                    records.append([r.offset, value])
            position = max(position, c.position(tp))  # as librdkafka's, above
        return records, hw
    finally:
        c.close()
