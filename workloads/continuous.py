"""A continuous background workload: several producers and consumers over several
partitions for the whole run (a scenario's `workload: producers: N`, every chaos run).

The sends come from a seeded generator (generator): at a target rate
over all producers, each to a partition drawn at random. Producer threads take
the next op from the one shared stream and wait for its time on the real clock
(Jepsen's interpreter): when all are busy -- a leaderless partition keeps a send
retrying -- later ops run late, so the rate is a ceiling, not a promise. Values
are the run's shared unique counter (workloads.producer.Values) and every send
and poll is one op pair in the same history as everything else.

Sends are batched as Kafka's producer batches them (linger.ms, batch.size): a
producer takes the next op, waits for its time, and takes with it every further
op due within `linger` seconds, up to `batch` ops; the ops of each partition go
in one produce request, appended atomically and acknowledged as one. When the
producers are busy, ops are overdue when taken and batches fill up -- the
backpressure that lets a Python client reach tens of thousands of records a
second. `batch=1` is one record per request (the old behaviour). The history
still has one invoke and one completion per record, with its offset.

Consumers are one process per partition (the checker's notion of a consumer is
one process reading one partition), polling below the HW at a fixed interval.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from contract.history import OK, History
from contract.rundir import RunWriteError
from generator import Gen, Timed, cycle, once, phases, sleep_around
from workloads.client import ClusterClient
from workloads.client_ops import KafkaClients
from workloads.consumer import Consumer, ConsumerThread
from workloads.producer import Producer, Values
from workloads.runtime import Task

# Process ids: a scenario's producer is 0, its consumer 1, background consumers
# 2.. (harness.run.runner); background producers start here, clear of both.
PRODUCER_BASE = 100
CONSUMER_BASE = 2


def sends(partitions: list[tuple[str, int]], rate: float) -> Gen:
    """Send ops at `rate` per second on average, each to a random partition."""
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    if not partitions:
        raise ValueError("sends over no partition")

    def one(rng: random.Random) -> Gen:
        topic, partition = rng.choice(partitions)
        return phases(sleep_around(1.0 / rate, spread=1.0),
                      once({"f": "send", "topic": topic, "partition": partition}))

    return cycle(one)


@dataclass
class Counts:
    ok: int = 0
    fail: int = 0
    info: int = 0

    @property
    def total(self) -> int:
        return self.ok + self.fail + self.info


class ContinuousWorkload:
    """Producer and consumer threads running `sends(...)` until `stop()`."""

    def __init__(self, client: ClusterClient, history: History, values: Values, *,
                 partitions: list[tuple[str, int]], producers: int, consumers: int,
                 rate: float, seed: int, acks: int | str = "all", timeout_ms: int = 5000,
                 retry_ms: int = 10000, poll_interval: float = 0.05, batch: int = 1,
                 linger: float = 0.005, max_records: int = 100,
                 stream: Gen | None = None, clients: KafkaClients | None = None) -> None:
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        self.batch = batch
        self.linger = linger
        self._peeked: Timed | None = None
        self.values = values
        self.history = history
        self.counts = Counts()
        self._lock = threading.Lock()  # never held across a blocking call
        self._rt = client.rt
        self._stop = self._rt.flag()
        # `stream`: another send schedule (a scenario's bursts); default `sends`.
        gen = stream if stream is not None else sends(partitions, rate)
        self._stream: Iterator[Timed] = gen(random.Random(seed), 0.0)
        self._t0 = 0.0
        # `clients`: a real Kafka client's producers and consumers instead of the
        # builtin ones (workloads.client_ops), writing the same ops.
        self._producers: list[Any] = [
            clients.producer(history, PRODUCER_BASE + i, acks=acks, timeout_ms=timeout_ms,
                             retry_ms=retry_ms) if clients is not None else
            Producer(client, history, PRODUCER_BASE + i, acks=acks, timeout_ms=timeout_ms,
                     retry_ms=retry_ms)
            for i in range(producers)
        ]
        self._threads: list[Task] = []
        self._consumers = [
            ConsumerThread(clients.consumer(history, CONSUMER_BASE + i,
                                            *partitions[i % len(partitions)],
                                            max_records=max_records) if clients is not None
                           else Consumer(client, history, CONSUMER_BASE + i,
                                         *partitions[i % len(partitions)],
                                         max_records=max_records, cache_leader=True),
                           poll_interval, rt=self._rt)
            for i in range(consumers)
        ]

    def start(self) -> None:
        self._t0 = self._rt.monotonic()
        for p in self._producers:
            self._threads.append(self._rt.spawn(lambda p=p: self._produce(p),
                                                f"producer-{p.process}"))
        for c in self._consumers:
            c.start()

    def _pull(self) -> Timed | None:
        """The next op of the stream (the lock held)."""
        if self._peeked is not None:
            item, self._peeked = self._peeked, None
            return item
        for item in self._stream:
            if item.op is not None:
                return item
        return None

    def _next_batch(self) -> list[Timed]:
        """The next op and every further op due within `linger` of it, up to `batch`."""
        with self._lock:
            first = self._pull()
            if first is None:
                return []
            out = [first]
            while len(out) < self.batch:
                item = self._pull()
                if item is None:
                    break
                if item.at > first.at + self.linger:
                    self._peeked = item  # the next batch's first op
                    break
                out.append(item)
            return out

    def _produce(self, producer: Producer) -> None:
        try:
            self._produce_until_stopped(producer)
        except RunWriteError:
            return  # the history cannot be written: the run stops (its RunWrites says why)

    def _produce_until_stopped(self, producer: Producer) -> None:
        while not self._stop.is_set():
            items = self._next_batch()
            if not items:
                return
            # Linger: the batch goes when its last op is due (at most `linger`
            # after its first); overdue ops go at once.
            delay = self._t0 + items[-1].at - self._rt.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            by_partition: dict[tuple[str, int], int] = {}
            for item in items:
                assert item.op is not None
                key = (item.op["topic"], item.op["partition"])
                by_partition[key] = by_partition.get(key, 0) + 1
            for (topic, partition), n in by_partition.items():
                # Values are taken when the batch is sent, so they rise with time.
                values = [self.values.next() for _ in range(n)]
                # Through the producer's cached leaders (send_batch), one record
                # or many, as Kafka's producer sends.
                done = producer.send_batch(topic, partition, values)
                with self._lock:
                    for op in done:
                        kind = op["type"]
                        if kind == OK:
                            self.counts.ok += 1
                        elif kind == "fail":
                            self.counts.fail += 1
                        else:
                            self.counts.info += 1

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking ops; a send in flight completes (it may retry for the
        producer's retry_ms), so no invoke is left without its completion."""
        self._stop.set()
        deadline = self._rt.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - self._rt.monotonic()))
        for c in self._consumers:
            c.stop()
        # A real client's threads and sockets end with the workload.
        for p in self._producers:
            p.close()
        for c in self._consumers:
            c.consumer.close()
