"""Real Kafka clients as the workload's transport: librdkafka (confluent-kafka),
kafka-python and kcat (librdkafka's command-line client, one process per
produce or poll), over the reference broker's Kafka listener (or any Kafka
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

One module per client library (confluent.py, kafka_python.py, kcat.py), each
with a `Producer` and a `Consumer` and, where it can read an existing cluster,
`metadata` and `read_to_end`; CLIENTS is the table of them.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

from workloads.kafka_clients import confluent, kafka_python, kcat
from workloads.kafka_clients.base import (
    ClientConfigError,
    ClusterUnreachable,
    ConsumerDriver,
    Delivery,
    ProducerDriver,
    TopicMetadata,
    client_logger,
)
from workloads.kafka_clients.kcat import KCAT_MISSING, require_kcat

# client name -> its module
CLIENTS: dict[str, ModuleType] = {
    "confluent-kafka": confluent, "kafka-python": kafka_python, "kcat": kcat}


def _client(client: str, what: str | None = None) -> ModuleType:
    module = CLIENTS.get(client)
    if module is None:
        raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    if what is not None and not hasattr(module, what):
        able = ", ".join(c for c, m in CLIENTS.items() if hasattr(m, what))
        raise ClientConfigError(f"client {client!r} cannot read an existing cluster "
                                f"({what}); choose one of {able}")
    return module


def require_client(client: str, config: dict[str, Any] | None = None,
                   acks: int | str = "all") -> None:
    """ClientConfigError when `client` is not installed here (kcat is a program on
    PATH; the Python clients are the package's dependencies) or refuses a setting
    of `config` with the workload's `acks` (librdkafka refuses transactional.id or
    idempotence with acks 1): the client's own check, made before anything starts.
    A producer and a consumer are built as a run builds them, with no bootstrap
    (nothing is dialled), and closed; their log lines go nowhere (client_logger)."""
    if client == "kcat":
        require_kcat()
    if config is None:
        return
    _client(client)
    client_logger(None)
    if client == "kafka-python":
        kafka_python.settings_for(dict(config), "producer")  # a key neither role knows
        return
    producer_driver(client, "", acks, 1000, 1000, dict(config)).close()
    consumer_driver(client, "", "t", 0, 0, dict(config), "isrlab-settings-check").close()


def producer_driver(client: str, bootstrap: str, acks: int | str, timeout_ms: int,
                    retry_ms: int, config: dict[str, Any]) -> ProducerDriver:
    return _client(client).Producer(bootstrap, acks, timeout_ms, retry_ms, config)


def consumer_driver(client: str, bootstrap: str, topic: str, partition: int, offset: int,
                    config: dict[str, Any], name: str) -> ConsumerDriver:
    return _client(client).Consumer(bootstrap, topic, partition, offset, config, name)


def topic_metadata(client: str, bootstrap: str, topic: str, config: dict[str, Any],
                   timeout: float) -> TopicMetadata:
    """The topic's metadata as `client` sees it, within `timeout` seconds; raises
    ClusterUnreachable. Asks for every topic, never this one by name: a metadata
    request naming a topic may create it on a broker that auto-creates topics."""
    return _client(client, "metadata").metadata(bootstrap, topic, config, timeout)


def read_to_end(client: str, bootstrap: str, topic: str, partition: int,
                config: dict[str, Any], timeout: float) -> tuple[list[list[int]], int]:
    """Every record of one partition from offset 0 up to its high watermark as the
    client reports it when the read starts: (records [[offset, value], ...], hw).
    Raises ClusterUnreachable if the HW is not known, or the records up to it not
    read, within `timeout` seconds. Records whose value is not an integer (not the
    workload's) are passed over."""
    deadline = time.monotonic() + timeout
    return _client(client, "read_to_end").read_to_end(bootstrap, topic, partition, config,
                                                      deadline)


__all__ = ["CLIENTS", "KCAT_MISSING", "ClientConfigError", "ClusterUnreachable",
           "ConsumerDriver", "Delivery", "ProducerDriver", "TopicMetadata", "client_logger",
           "consumer_driver", "producer_driver", "read_to_end", "require_client",
           "require_kcat", "topic_metadata"]
