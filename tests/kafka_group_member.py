"""A consumer-group member in its own process, for tests/test_kafka_groups.py: it
subscribes to a topic in a group, consumes at least RECORDS records of each of
the topic's two partitions (pausing a partition once it has them), commits
synchronously, prints one JSON line {"committed": {partition: offset}} and then
either closes (leaving the group) or waits to be killed (its session must
expire).

    python tests/kafka_group_member.py CLIENT BOOTSTRAP GROUP TOPIC RECORDS close|wait
"""

from __future__ import annotations

import json
import sys
import time

SESSION_MS, HEARTBEAT_MS = 1500, 300
PARTITIONS = 2


def enough(got: dict[int, int], n: int) -> bool:
    """At least n records from every partition (so each has a commit)."""
    return len(got) == PARTITIONS and min(got.values()) >= n


def full(got: dict[int, int], n: int) -> list[int]:
    """The partitions to pause: they have enough; the rest stay to be resumed."""
    return [p for p, k in got.items() if k >= n]


def kafka_python(bootstrap: str, group: str, topic: str, n: int) -> tuple[dict, object]:
    from kafka import KafkaConsumer

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                      max_poll_interval_ms=10_000, request_timeout_ms=10_000,
                      max_poll_records=10)
    got: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while not enough(got, n) and time.monotonic() < deadline:
        for tp, rs in c.poll(timeout_ms=200).items():
            got[tp.partition] = got.get(tp.partition, 0) + len(rs)
        c.pause(*[tp for tp in c.assignment() if tp.partition in full(got, n)])
    c.commit()  # synchronous: the positions of the records returned
    committed = {tp.partition: c.committed(tp) for tp in c.assignment()}
    return committed, c


def confluent(bootstrap: str, group: str, topic: str, n: int) -> tuple[dict, object]:
    import confluent_kafka

    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS, "max.poll.interval.ms": 10_000})
    c.subscribe([topic])
    got: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while not enough(got, n) and time.monotonic() < deadline:
        for m in c.consume(num_messages=10, timeout=0.2):
            if m.error() is None:
                got[m.partition()] = got.get(m.partition(), 0) + 1
        c.pause([tp for tp in c.assignment() if tp.partition in full(got, n)])
    parts = c.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in parts if tp.offset >= 0}
    return committed, c


def main() -> None:
    client, bootstrap, group, topic, n, then = sys.argv[1:7]
    committed, consumer = (kafka_python if client == "kafka-python" else confluent)(
        bootstrap, group, topic, int(n))
    print(json.dumps({"committed": committed}), flush=True)
    if then == "close":
        consumer.close()  # type: ignore[attr-defined]
        return
    while True:  # killed by the test, without leaving the group
        time.sleep(1)


if __name__ == "__main__":
    main()
