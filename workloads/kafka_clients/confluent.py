"""librdkafka through confluent-kafka: a producer, a consumer assigned one
partition, and an existing cluster's metadata and final read."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from workloads.kafka_clients.base import (
    ClientConfigError,
    ClusterUnreachable,
    Delivery,
    TopicMetadata,
    int_value,
)


class Producer:
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


class Consumer:
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
            value = int_value(m.value())
            if value is not None:
                records.append([m.offset(), value])
        return records, error if not records else None

    def close(self) -> None:
        self._c.close()


def metadata(bootstrap: str, topic: str, config: dict[str, Any],
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


def read_to_end(bootstrap: str, topic: str, partition: int,
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
                value = int_value(m.value())
                if value is not None:
                    records.append([m.offset(), value])
            # The client's position passes offsets that hold no record for it
            # (transaction markers, compacted ones).
            position = max(position, c.position([tp])[0].offset)
        return records, hw
    finally:
        c.close()
