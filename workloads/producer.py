"""The producer client: unique integer values, one history op pair per send.

Outcome rules (Jepsen's): `ok` = acknowledged; `fail` only when the value was
certainly not written (NOT_ENOUGH_REPLICAS, a pre-append error such as
NOT_LEADER_OR_FOLLOWER after the retry deadline, or no leader could be reached
at all); `info` when it may have been written (timeouts,
NOT_ENOUGH_REPLICAS_AFTER_APPEND, a connection lost after sending). Pre-append
errors are retried inside the same op: nothing was written, so retrying cannot
duplicate. An error on a record the leader says it appended (`appended: true`,
e.g. NOT_LEADER_OR_FOLLOWER from a leader deposed while the send waited for its
acks) is `info` and never retried: the record may be committed. With acks 0 a
send is `ok` (no offset) once written to the leader's socket, as Kafka's
producer has it: the broker never answers.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from broker.wire import WireError
from contract.history import FAIL, INFO, OK, History
from workloads.client import ClusterClient, Leaders, NotSent

# Errors a broker returns before appending: safe to retry with fresh metadata.
RETRIABLE = {
    "NOT_LEADER_OR_FOLLOWER",
    "LEADER_NOT_AVAILABLE",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
}
# Errors that certainly mean "not written" and are final.
DEFINITE = {"NOT_ENOUGH_REPLICAS", "INVALID_REQUEST", "OFFSET_OUT_OF_RANGE"}


class Values:
    """Unique integer values for one run: a counter shared by every producer, so
    values are unique and a scenario's m0, m1, ... are 0, 1, ..."""

    def __init__(self, start: int = 0) -> None:
        self._counter = itertools.count(start)
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            return next(self._counter)


class Producer:
    def __init__(
        self,
        client: ClusterClient,
        history: History,
        process: int,
        *,
        acks: int | str = "all",
        timeout_ms: int = 5000,
        retry_ms: int = 10000,
    ) -> None:
        self.client = client
        self.history = history
        self.process = process
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.retry_ms = retry_ms
        self.leaders = Leaders(client)

    def close(self) -> None:
        """Nothing of its own to close: its connections are the runtime's pool."""

    def send(
        self,
        topic: str,
        partition: int,
        value: int,
        *,
        acks: int | str | None = None,
        label: str | None = None,
    ) -> dict[str, Any]:
        """Send one value; returns the completion op (type ok/fail/info)."""
        acks = self.acks if acks is None else acks
        extra: dict[str, Any] = {"topic": topic, "partition": partition, "acks": acks}
        if label is not None:
            extra["label"] = label
        inv = self.history.invoke(self.process, "send", value, **extra)
        request = {"type": "produce", "topic": topic, "partition": partition, "value": value,
                   "acks": acks, "timeout_ms": self.timeout_ms}
        type_, fields = self._produce(request, lambda deadline: self.client.wait_leader(
            topic, partition, deadline), lambda: None)
        return self.history.complete(inv, type_, **fields)

    def send_batch(self, topic: str, partition: int, values: list[int]) -> list[dict[str, Any]]:
        """Send `values` as one batch (one produce request, appended atomically and
        acknowledged as one); the history gets one invoke per record, then one
        completion per record -- on `ok` with its offset (base + position) -- so it
        reads exactly as that many single sends (the checker pairs sends by value).
        Outcomes and retries are `send`'s, for the whole batch."""
        if not values:
            return []
        fields: dict[str, Any] = {"topic": topic, "partition": partition, "acks": self.acks}
        invs = self.history.append_many([(self.process, "invoke", "send", v, fields)
                                         for v in values])
        request = {"type": "produce", "topic": topic, "partition": partition,
                   "values": list(values), "acks": self.acks, "timeout_ms": self.timeout_ms}
        type_, extra = self._produce(
            request, lambda deadline: self.leaders.get(topic, partition, deadline),
            lambda: self.leaders.forget(topic, partition))
        offset = extra.pop("offset", None)
        ops = []
        for i, inv in enumerate(invs):
            more = {**fields, **extra}
            if offset is not None:
                more["offset"] = offset + i
            ops.append((self.process, type_, "send", inv["value"], more))
        return self.history.append_many(ops)

    def _produce(self, request: dict[str, Any],
                 leader: Callable[[float], tuple[str, str] | None],
                 forget: Callable[[], None]) -> tuple[str, dict[str, Any]]:
        """Send `request` to the partition's leader until its outcome is known or the
        retry deadline passes: (ok/fail/info, the completion's fields). `forget`
        drops a cached leader after any error."""
        rt = self.client.rt
        deadline = rt.monotonic() + self.retry_ms / 1000
        last_error = "LEADER_NOT_AVAILABLE"
        while True:
            target = leader(deadline)
            if target is None:
                return FAIL, {"error": last_error}
            node, addr = target
            outcome = self._attempt(node, addr, request)
            if isinstance(outcome, tuple):
                if outcome[0] != OK:
                    forget()
                return outcome
            forget()
            last_error = outcome
            if rt.monotonic() >= deadline:
                return FAIL, {"error": last_error}
            rt.sleep(0.05)

    def _attempt(self, node: str, addr: str,
                 request: dict[str, Any]) -> tuple[str, dict[str, Any]] | str:
        """One produce request: its outcome, or the error to retry on (nothing was
        written)."""
        try:
            if request["acks"] == 0:
                # acks 0 (Kafka's producer): done once written to the socket, no offset;
                # the broker answers nothing (an error closes the connection).
                self.client.rt.send_only(addr, request, self.timeout_ms / 1000)
                return OK, {"node": node}
            # The socket waits a little longer than the broker's own timeout, so a
            # broker-side REQUEST_TIMED_OUT arrives as an answer.
            reply = self.client.rt.request(addr, request, self.timeout_ms / 1000 + 2.0)
        except NotSent as e:
            return f"connection refused by {node}: {e}"
        except WireError as e:
            return INFO, {"error": f"{node}: {e}", "node": node}
        error = reply.get("error")
        if error is None:
            fields: dict[str, Any] = {"node": node}
            if reply.get("offset") is not None:
                fields["offset"] = reply["offset"]
            return OK, fields
        if reply.get("appended"):
            # In a leader's log already (a leader deposed while the send waited for
            # acks answers NOT_LEADER_OR_FOLLOWER): it may be committed, and a resend
            # would write it twice.
            return INFO, {"error": error, "node": node}
        if error in DEFINITE:
            return FAIL, {"error": error, "node": node}
        if error not in RETRIABLE:
            return INFO, {"error": error, "node": node}
        return error
