"""Consumers: polls below the HW, and the final read.

A poll is a read: it changes nothing on the broker, so any error completes it
as `fail` (Jepsen treats reads that way). Records go into the history as
[[offset, value], ...] with the HW the leader reported and its leader epoch
(docs/run-directory.md).
"""

from __future__ import annotations

from typing import Any

from broker.wire import WireError
from contract import FINAL_PROCESS
from contract.history import FAIL, OK, History
from contract.rundir import RunWriteError
from workloads.client import ClusterClient, Leaders
from workloads.runtime import REAL, NotSent, Runtime, Task


def fetch(rt: Runtime, addr: str, topic: str, partition: int, offset: int, max_records: int,
          timeout: float = 5.0) -> dict[str, Any]:
    return rt.request(
        addr,
        {"type": "fetch", "topic": topic, "partition": partition, "offset": offset,
         "max_records": max_records},
        timeout,
    )


class Consumer:
    """One consumer process with its own position in one partition."""

    def __init__(self, client: ClusterClient, history: History, process: int | str,
                 topic: str, partition: int, *, max_records: int = 100,
                 cache_leader: bool = False) -> None:
        self.client = client
        # A chaos workload's consumer keeps its leader until a poll fails, as
        # Kafka's does; a scenario's poll step asks every broker each time.
        self._leaders = Leaders(client) if cache_leader else None
        self.history = history
        self.process = process
        self.topic = topic
        self.partition = partition
        self.max_records = max_records
        self.position = 0

    def close(self) -> None:
        """Nothing of its own to close: its connections are the runtime's pool."""

    def poll(self) -> dict[str, Any]:
        inv = self.history.invoke(self.process, "poll", None, topic=self.topic,
                                  partition=self.partition, offset=self.position)
        if self._leaders is None:
            target = self.client.leader(self.topic, self.partition)
        else:
            target = self._leaders.get(self.topic, self.partition, self.client.rt.monotonic())
        if target is None:
            return self.history.complete(inv, FAIL, error="LEADER_NOT_AVAILABLE")
        node, addr = target
        try:
            reply = fetch(self.client.rt, addr, self.topic, self.partition, self.position,
                          self.max_records)
        except WireError as e:
            self._forget()
            return self.history.complete(inv, FAIL, error=f"{node}: {e}", node=node)
        if reply.get("error") is not None:
            self._forget()
            return self.history.complete(inv, FAIL, error=reply["error"], node=node)
        records = [[r[0], r[2]] for r in reply.get("records", [])]
        if records:
            self.position = records[-1][0] + 1
        # The leader epoch that served it: a leader's HW only grows within its epoch,
        # but a new leader's HW can lag the old one's (KAFKA-2334), so the checker's
        # hw-regression compares polls of one epoch only.
        return self.history.complete(inv, OK, records=records, hw=reply.get("hw"), node=node,
                                     epoch=reply.get("leader_epoch"))

    def _forget(self) -> None:
        if self._leaders is not None:
            self._leaders.forget(self.topic, self.partition)


class ConsumerThread:
    """Polls in the background until stopped (workload `consumers: N`)."""

    def __init__(self, consumer: Any, interval: float = 0.05, rt: Runtime | None = None) -> None:
        self.consumer = consumer  # a Consumer, or a real client's (workloads.client_ops)
        self.interval = interval
        self._rt = rt if rt is not None else consumer.client.rt
        self._stop_event = self._rt.flag()
        self._task: Task | None = None

    def start(self) -> None:
        self._task = self._rt.spawn(self.run, f"consumer-{self.consumer.process}")

    def run(self) -> None:
        try:
            while not self._stop_event.wait(self.interval):
                self.consumer.poll()
        except RunWriteError:
            return  # the history cannot be written: the run stops (its RunWrites says why)

    def stop(self) -> None:
        self._stop_event.set()
        if self._task is not None:
            self._task.join(timeout=10)


class FinalReadError(Exception):
    pass


# A page of the final read is asked again this many times in all when its request or
# answer is lost (a broken connection, the sim's --net-loss): a fetch reads, so asking
# again changes nothing, as a consumer's retry does not.
FINAL_READ_ATTEMPTS = 3


def final_read(history: History, leader: str, addr: str, topic: str, partition: int,
               *, page: int = 1000, rt: Runtime = REAL) -> dict[str, Any]:
    """Read every record below the leader's HW from offset 0, all pages, as one
    `poll` op of process "final". Raises FinalReadError (after recording `fail`)."""
    inv = history.invoke(FINAL_PROCESS, "poll", None, topic=topic, partition=partition, offset=0)
    records: list[list[int]] = []
    position = 0
    hw: int | None = None
    while True:
        reply: dict[str, Any] | None = None
        error: WireError | None = None
        for _ in range(FINAL_READ_ATTEMPTS):
            try:
                reply = fetch(rt, addr, topic, partition, position, page)
                break
            except NotSent as e:  # nothing listens there: asking again will not help
                error = e
                break
            except WireError as e:
                error = e
        if reply is None:
            history.complete(inv, FAIL, error=f"{leader}: {error}", node=leader)
            raise FinalReadError(f"final read of {topic}/{partition} from {leader}: {error}")
        if reply.get("error") is not None:
            history.complete(inv, FAIL, error=reply["error"], node=leader)
            raise FinalReadError(
                f"final read of {topic}/{partition} from {leader}: {reply['error']}")
        if hw is None:
            hw = reply.get("hw", 0)  # the target is the HW seen by the first page
        batch = [[r[0], r[2]] for r in reply.get("records", [])]
        records.extend(batch)
        if batch:
            position = batch[-1][0] + 1
        if not batch or position >= hw:
            break
    return history.complete(inv, OK, records=records, hw=hw, node=leader)
