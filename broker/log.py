"""The in-memory model of one replica's log (offsets from 0, no retention)."""

from __future__ import annotations

from typing import Any, NamedTuple

# (producer_id, producer_epoch, base_sequence, last_sequence) of the idempotent
# producer batch a record belongs to: Kafka's record batch header fields
# (KIP-98), copied onto each record of the batch. Every record carries its
# batch's whole header, so the producer state can be rebuilt from any retained
# records alone (a restart, a truncation): a batch is a run of consecutive
# records with equal headers, at most last - base + 1 of them (so two equal
# batches in a row stay apart), and a record's own sequence is base_sequence
# plus its place in that run.
ProducerInfo = tuple[int, int, int, int]


class Record(NamedTuple):
    offset: int
    epoch: int
    value: int
    # None: not from an idempotent producer (every record before 0.11, and any
    # produce without a producer id).
    producer: ProducerInfo | None = None

    def to_json(self) -> list[Any]:
        """The record in JSON answers and events: [offset, epoch, value], and its
        producer's batch header as a 4th element only when it has one (so records
        without one keep the 3-element form every reader knows)."""
        if self.producer is None:
            return [self.offset, self.epoch, self.value]
        return [self.offset, self.epoch, self.value, list(self.producer)]

    @classmethod
    def from_json(cls, item: list[Any] | tuple[Any, ...]) -> Record:
        """The inverse of to_json (3 or 4 elements)."""
        if len(item) > 3 and item[3] is not None:
            p = item[3]
            return cls(item[0], item[1], item[2], (p[0], p[1], p[2], p[3]))
        return cls(item[0], item[1], item[2])


class Log:
    def __init__(self, records: list[Record] | None = None) -> None:
        self.records: list[Record] = list(records or [])

    @property
    def leo(self) -> int:
        """Log end offset: the offset the next record will get."""
        return len(self.records)

    def append(self, epoch: int, value: int, producer: ProducerInfo | None = None) -> Record:
        rec = Record(self.leo, epoch, value, producer)
        self.records.append(rec)
        return rec

    def append_replicated(self, rec: Record) -> None:
        if rec.offset != self.leo:
            raise ValueError(f"record at {rec.offset} appended to a log ending at {self.leo}")
        self.records.append(rec)

    def truncate_to(self, offset: int) -> bool:
        """Keep records below `offset`; True if anything was removed."""
        if offset >= self.leo:
            return False
        del self.records[max(offset, 0):]
        return True

    def read(self, start: int, end: int, max_records: int) -> list[Record]:
        end = min(end, self.leo, start + max_records)
        return self.records[start:end] if start < end else []

    def batch_end(self, offset: int) -> int:
        """The first offset at or after `offset` that does not continue an
        idempotent producer's batch begun before it: Kafka never hands out part of
        a record batch, so a read that would stop mid-batch goes on to its end."""
        recs = self.records
        if not 0 < offset < len(recs):
            return offset
        p = recs[offset].producer
        if p is None or p != recs[offset - 1].producer:
            return offset
        start = offset - 1
        while start > 0 and recs[start - 1].producer == p:
            start -= 1
        # A run of equal headers is whole batches of `size` records in a row (equal
        # batches may follow each other); only its last one may be cut short.
        size = sequence_count(p[2], p[3])
        end = start + -(-(offset - start) // size) * size
        while offset < min(end, len(recs)) and recs[offset].producer == p:
            offset += 1
        return offset


def sequence_count(base_sequence: int, last_sequence: int) -> int:
    """Records in a batch with this sequence range: it may wrap past
    Int32.MAX_VALUE to 0 (KAFKA-5283, DefaultRecordBatch.incrementSequence)."""
    if last_sequence >= base_sequence:
        return last_sequence - base_sequence + 1
    return last_sequence + (2**31 - base_sequence) + 1
