"""Idempotent-producer state of one replica (KIP-98, Kafka 0.11 on), sans-IO.

Kafka's ProducerStateManager: per producer id, the producer epoch and the
metadata of its last few batches (sequence range, offset range). A leader
checks a producer's batch against it before appending (Kafka's
origin=Client/isFromClient validation); replicated and reloaded batches update
it unchecked (origin=Replication, KAFKA-6003 in 1.0.0). There are no snapshot
files: with no retention the state is a function of the log, so a restart or a
truncation rebuilds it by replaying the retained records (Kafka:
truncateAndReload from the latest snapshot, then the log after it).

The rules per release (checked at the tags of apache/kafka, see
docs/protocol-versions.md):

- 0.11.0.0 (KIP-98; ProducerStateManager.scala, Log.scala
  analyzeAndValidateProducerState): one batch kept per producer. A batch equal
  to it (same epoch, same first and last sequence) is a duplicate: the leader
  appends nothing and answers with the original batch's offsets. An older
  epoch is INVALID_PRODUCER_EPOCH (ProducerFencedException); a newer epoch must
  start at sequence 0; the same epoch must continue at last + 1, or at 0 after
  Int32.MAX_VALUE (KAFKA-5283); anything else is OUT_OF_ORDER_SEQUENCE_NUMBER,
  an unknown producer id too unless it starts at 0 ("Invalid sequence number
  for new epoch").
- 1.0.0: the last 5 batches are kept and a retry of any of them is a duplicate
  (KAFKA-5494, max.in.flight.requests.per.connection up to 5); an unknown
  producer id not starting at 0 is UNKNOWN_PRODUCER_ID (KAFKA-5793; that
  commit also answered DUPLICATE_SEQUENCE_NUMBER for a batch older than the
  cache, dropped again in 1.1.0 by KAFKA-6683 -- no modelled release has it).
- 2.5.0 (KIP-360, KAFKA-8710): a producer id without state may start at any
  sequence (the broker "accepts writes with any sequence number").
- 2.7.0 (KIP-588): the fencing exception becomes InvalidProducerEpochException,
  the same INVALID_PRODUCER_EPOCH error code on the wire.

Not modelled: transactions and their markers, producer-id expiration
(transactional.id.expiration.ms / producer.id.expiration.ms), KIP-890's
verification guard -- none applies to the non-transactional idempotent
producer in a run shorter than the expiration.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .log import ProducerInfo, Record, sequence_count
from .protocol import Features, UnknownProducer

# RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH / NO_SEQUENCE.
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

# The produce errors of a rejected batch (Kafka's Errors names).
OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
UNKNOWN_PRODUCER_ID = "UNKNOWN_PRODUCER_ID"
# A producer-id batch to a release without idempotence (0.10: no InitProducerId,
# no v2 record batches; a client gets UnsupportedVersion before it produces).
UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"

def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence` + `increment`, wrapping past Int32.MAX_VALUE to 0 (KAFKA-5283;
    DefaultRecordBatch.incrementSequence): how a batch's last sequence follows
    from its base sequence and record count."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """`next_seq` continues `last_seq` (0 follows Int32.MAX_VALUE)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True)
class ProducerBatchHeader:
    """The idempotent-producer fields of a produced record batch's header."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


@dataclass(frozen=True)
class BatchMetadata:
    """One batch a producer appended: Kafka's BatchMetadata."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerStateEntry:
    """What a replica knows of one producer id: Kafka's ProducerStateEntry."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    # Oldest first, at most the release's batches_to_retain.
    batches: deque[BatchMetadata] = field(default_factory=deque)
    # Records of the newest batch not in this log (yet): Kafka only ever hands out
    # whole batches, but a truncation may still cut one (see Partition).
    missing: int = 0

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this epoch and sequence range, if any
        (ProducerStateEntry.findDuplicateBatch / 0.11's isDuplicate)."""
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                # A cut batch is no duplicate: it would answer for records not here.
                if b is self.batches[-1] and self.missing:
                    return None
                return b
        return None


@dataclass(frozen=True)
class AppendCheck:
    """A leader's verdict on a producer's batch: an error, a duplicate of a
    batch already in the log (answer with its offsets, append nothing), or
    neither (append)."""

    error: str | None = None
    duplicate: BatchMetadata | None = None


class ProducerStateManager:
    """Producer ids to their state, for one partition replica."""

    def __init__(self, batches_to_retain: int, unknown_producer: UnknownProducer) -> None:
        self.batches_to_retain = batches_to_retain
        self.unknown_producer = unknown_producer
        self.producers: dict[int, ProducerStateEntry] = {}

    @classmethod
    def for_features(cls, features: Features) -> ProducerStateManager:
        """The manager with the rules of a protocol version's row."""
        return cls(features.producer_batches_cached, features.unknown_producer)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def check_append(self, producer_id: int, producer_epoch: int, base_sequence: int,
                     count: int) -> AppendCheck:
        """Check a client's batch of `count` records as the leader would before
        appending it; changes nothing."""
        last_seq = increment_sequence(base_sequence, count - 1)
        entry = self.producers.get(producer_id)
        if entry is None:
            if base_sequence == 0 or self.unknown_producer == "accept":
                return AppendCheck()
            if self.unknown_producer == "unknown_producer_id":
                return AppendCheck(UNKNOWN_PRODUCER_ID)
            return AppendCheck(OUT_OF_ORDER_SEQUENCE_NUMBER)
        # The duplicate check comes first (Log.analyzeAndValidateProducerState),
        # then the epoch, then the sequence (ProducerAppendInfo.checkSequence).
        dup = entry.duplicate_of(producer_epoch, base_sequence, last_seq)
        if dup is not None:
            return AppendCheck(duplicate=dup)
        if producer_epoch < entry.producer_epoch:
            return AppendCheck(INVALID_PRODUCER_EPOCH)
        if producer_epoch != entry.producer_epoch:
            # A new epoch restarts the sequence.
            ok = base_sequence == 0
        else:
            ok = bool(entry.batches) and in_sequence(entry.last_seq, base_sequence)
        return AppendCheck() if ok else AppendCheck(OUT_OF_ORDER_SEQUENCE_NUMBER)

    def apply(self, records: Iterable[Record]) -> None:
        """Take appended records into the state, unchecked: a leader's own append,
        a follower's replicated records, a reload from the log."""
        for rec in records:
            if rec.producer is not None:
                self._apply_one(rec.offset, rec.producer)

    def _apply_one(self, offset: int, p: ProducerInfo) -> None:
        pid, epoch, base, last = p
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        tail = entry.batches[-1] if entry.batches else None
        if (entry.missing and tail is not None and epoch == entry.producer_epoch
                and tail.first_seq == base and tail.last_offset + 1 == offset):
            # The next record of a batch whose first records came before.
            entry.missing -= 1
            entry.batches[-1] = BatchMetadata(base, increment_sequence(tail.last_seq, 1),
                                              tail.first_offset, offset)
            return
        if epoch != entry.producer_epoch:
            # ProducerStateEntry.maybeUpdateEpoch: a new epoch forgets the batches.
            entry.batches.clear()
            entry.producer_epoch = epoch
        if len(entry.batches) == self.batches_to_retain:
            entry.batches.popleft()
        entry.batches.append(BatchMetadata(base, base, offset, offset))
        entry.missing = sequence_count(base, last) - 1

    def rebuild(self, records: Iterable[Record]) -> None:
        """Forget everything and replay `records` (a restart, a truncation)."""
        self.producers.clear()
        self.apply(records)

    def to_json(self) -> list[dict[str, Any]]:
        """The state, for inspection (sorted by producer id)."""
        return [{"producer_id": e.producer_id, "producer_epoch": e.producer_epoch,
                 "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset]
                             for b in e.batches],
                 **({"missing": e.missing} if e.missing else {})}
                for _, e in sorted(self.producers.items())]

