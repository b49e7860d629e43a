"""kafka-python: a producer, a consumer assigned one partition, and an existing
cluster's metadata and final read."""

from __future__ import annotations

import time
from typing import Any

from workloads.kafka_clients.base import (
    ClientConfigError,
    ClusterUnreachable,
    Delivery,
    TopicMetadata,
    int_value,
)


def settings_for(config: dict[str, Any], role: str) -> dict[str, Any]:
    """The settings of `config` that kafka-python's producer or consumer knows.
    One --client-config serves both roles, and kafka-python refuses any key its
    class does not know (librdkafka ignores the other role's, with a warning), so
    `enable_idempotence=false` would fail the consumers; a key neither knows is
    refused here."""
    import kafka

    known = {"producer": set(kafka.KafkaProducer.DEFAULT_CONFIG),
             "consumer": set(kafka.KafkaConsumer.DEFAULT_CONFIG)}
    unknown = sorted(set(config) - known["producer"] - known["consumer"])
    if unknown:
        raise ClientConfigError(f"kafka-python refused the settings: unknown "
                                f"setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    return {k: v for k, v in config.items() if k in known[role]}


class Producer:
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
                    "metadata_max_age_ms": 1000, **settings_for(config, "producer")}
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


class Consumer:
    """kafka-python's KafkaConsumer assigned one partition from `offset` (no group)."""

    def __init__(self, bootstrap: str, topic: str, partition: int, offset: int,
                 config: dict[str, Any], name: str) -> None:
        import kafka
        import kafka.errors
        self._errors = kafka.errors
        settings = {"bootstrap_servers": bootstrap.split(","), "group_id": None,
                    "client_id": name, "enable_auto_commit": False,
                    "auto_offset_reset": "earliest", "fetch_max_wait_ms": 100,
                    "metadata_max_age_ms": 1000, **settings_for(config, "consumer")}
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
            value = int_value(r.value)
            if value is not None:
                records.append([r.offset, value])
        return records, None

    def close(self) -> None:
        self._c.close()


def metadata(bootstrap: str, topic: str, config: dict[str, Any],
             timeout: float) -> TopicMetadata:
    import kafka
    import kafka.errors
    # The connection's settings (security_protocol, sasl_*, ssl_* ...: what an
    # admin client knows) apply here too; a SASL/TLS cluster needs them.
    connection = {k: v for k, v in config.items()
                  if k in kafka.KafkaAdminClient.DEFAULT_CONFIG
                  and k not in ("bootstrap_servers", "request_timeout_ms")}
    try:
        admin = kafka.KafkaAdminClient(**{**connection,
                                          "bootstrap_servers": bootstrap.split(","),
                                          "request_timeout_ms": int(timeout * 1000),
                                          "bootstrap_timeout_ms": int(timeout * 1000)})
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


def read_to_end(bootstrap: str, topic: str, partition: int,
                config: dict[str, Any], deadline: float
                ) -> tuple[list[list[int]], int]:
    import kafka
    import kafka.errors
    settings = {"bootstrap_servers": bootstrap.split(","), "group_id": None,
                "client_id": "isrlab-final-read", "enable_auto_commit": False,
                "auto_offset_reset": "earliest", "fetch_max_wait_ms": 100,
                **settings_for(config, "consumer")}
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
                value = int_value(r.value)
                if value is not None:
                    records.append([r.offset, value])
            position = max(position, c.position(tp))  # as librdkafka's, above
        return records, hw
    finally:
        c.close()
