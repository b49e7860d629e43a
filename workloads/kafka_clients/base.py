"""What every client driver shares: the driver protocols, a delivery's outcome, a
topic's metadata, the errors a user's settings or cluster cause, and the clients'
log."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


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


def int_value(raw: bytes | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


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
