"""A real Kafka client's producer and consumer as workload processes: the same
history ops as workloads.producer and workloads.consumer, from what the client
reported (workloads.kafka_clients).

A send is `ok` when the client acknowledged it (with its offset); `fail` only
when the client says it never sent the value; `info` for every other error and
for a value whose delivery report did not come in time -- the client may have
written it, possibly more than once (its own retries), which is exactly what
the checker is for. A poll is a read: `ok` with the records the client returned
(no HW or leader epoch: a client does not report which leader served a record,
so the checker's HW rules apply to the built-in consumer only), `fail` on an
error it reported instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contract import FINAL_PROCESS
from contract.history import FAIL, INFO, OK, History
from workloads.consumer import FinalReadError
from workloads.kafka_clients import (
    ClusterUnreachable,
    client_logger,
    consumer_driver,
    producer_driver,
    read_to_end,
)

# How much longer than the client's own deadline (request timeout + retries) a
# send waits for its delivery report.
REPORT_SLACK_S = 2.0


class ClientProducer:
    """One producer process on a real client (one client instance per acks)."""

    def __init__(self, client: str, bootstrap: str, history: History, process: int | str, *,
                 acks: int | str = "all", timeout_ms: int = 5000, retry_ms: int = 10000,
                 config: dict[str, Any] | None = None) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.history = history
        self.process = process
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.retry_ms = retry_ms
        self.config = dict(config or {})
        self._drivers: dict[Any, Any] = {}

    def _driver(self, acks: int | str) -> Any:
        if acks not in self._drivers:
            self._drivers[acks] = producer_driver(self.client, self.bootstrap, acks,
                                                  self.timeout_ms, self.retry_ms, self.config)
        return self._drivers[acks]

    def _wait_s(self) -> float:
        return (self.timeout_ms + self.retry_ms) / 1000 + REPORT_SLACK_S

    def send(self, topic: str, partition: int, value: int, *, acks: int | str | None = None,
             label: str | None = None) -> dict[str, Any]:
        acks = self.acks if acks is None else acks
        extra: dict[str, Any] = {"topic": topic, "partition": partition, "acks": acks,
                                 "client": self.client}
        if label is not None:
            extra["label"] = label
        inv = self.history.invoke(self.process, "send", value, **extra)
        (d,) = self._driver(acks).produce(topic, partition, [value], self._wait_s())
        type_, fields = _outcome(d)
        return self.history.complete(inv, type_, **fields)

    def send_batch(self, topic: str, partition: int, values: list[int]) -> list[dict[str, Any]]:
        """The values handed to the client at once (it batches them as it does);
        one invoke per value, then one completion per value."""
        if not values:
            return []
        fields: dict[str, Any] = {"topic": topic, "partition": partition, "acks": self.acks,
                                  "client": self.client}
        invs = self.history.append_many([(self.process, "invoke", "send", v, fields)
                                         for v in values])
        deliveries = self._driver(self.acks).produce(topic, partition, list(values),
                                                     self._wait_s())
        ops = []
        for inv, d in zip(invs, deliveries, strict=True):
            type_, more = _outcome(d)
            ops.append((self.process, type_, "send", inv["value"], {**fields, **more}))
        return self.history.append_many(ops)

    def close(self) -> None:
        for d in self._drivers.values():
            d.close()
        self._drivers.clear()


def _outcome(d: Any) -> tuple[str, dict[str, Any]]:
    if d.error is None:
        return OK, ({} if d.offset is None else {"offset": d.offset})
    return (INFO if d.sent else FAIL), {"error": d.error}


class ClientConsumer:
    """One consumer process on a real client, assigned one partition (the
    checker's consumer: one process reading one partition)."""

    def __init__(self, client: str, bootstrap: str, history: History, process: int | str,
                 topic: str, partition: int, *, max_records: int = 100,
                 poll_timeout: float = 0.2, config: dict[str, Any] | None = None) -> None:
        self.client = client
        self.history = history
        self.process = process
        self.topic = topic
        self.partition = partition
        self.max_records = max_records
        self.poll_timeout = poll_timeout
        self.position = 0
        self._driver = consumer_driver(client, bootstrap, topic, partition, 0,
                                       dict(config or {}), f"isrlab-consumer-{process}")

    def poll(self) -> dict[str, Any]:
        inv = self.history.invoke(self.process, "poll", None, topic=self.topic,
                                  partition=self.partition, offset=self.position,
                                  client=self.client)
        records, error = self._driver.poll(self.max_records, self.poll_timeout)
        if error is not None:
            return self.history.complete(inv, FAIL, error=error)
        if records:
            self.position = records[-1][0] + 1
        return self.history.complete(inv, OK, records=records)

    def close(self) -> None:
        self._driver.close()


class KafkaClients:
    """Makes a workload's producers and consumers on a real client (the builtin
    ones are workloads.producer.Producer and workloads.consumer.Consumer)."""

    def __init__(self, client: str, bootstrap: str, config: dict[str, Any] | None = None,
                 log: Path | None = None) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.config = dict(config or {})
        client_logger(log)  # the clients' log lines go to the run's logs/clients.log

    def producer(self, history: History, process: int | str, *, acks: int | str,
                 timeout_ms: int, retry_ms: int) -> ClientProducer:
        return ClientProducer(self.client, self.bootstrap, history, process, acks=acks,
                              timeout_ms=timeout_ms, retry_ms=retry_ms, config=self.config)

    def consumer(self, history: History, process: int | str, topic: str, partition: int, *,
                 max_records: int = 100) -> ClientConsumer:
        return ClientConsumer(self.client, self.bootstrap, history, process, topic, partition,
                              max_records=max_records, config=self.config)

    def final_read(self, history: History, topic: str, partition: int,
                   timeout: float) -> dict[str, Any]:
        """The final read through the client (a cluster isrlab cannot ask directly):
        the partition's high watermark, then every record from offset 0 up to it,
        as one `poll` op of process "final" -- workloads.consumer.final_read's
        shape. Raises FinalReadError (after recording `fail`)."""
        inv = history.invoke(FINAL_PROCESS, "poll", None, topic=topic, partition=partition,
                             offset=0, client=self.client)
        try:
            records, hw = read_to_end(self.client, self.bootstrap, topic, partition,
                                      self.config, timeout)
        except ClusterUnreachable as e:
            history.complete(inv, FAIL, error=str(e))
            raise FinalReadError(f"final read of {topic}/{partition}: {e}") from None
        return history.complete(inv, OK, records=records, hw=hw)
