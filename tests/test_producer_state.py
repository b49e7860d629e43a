"""Idempotent-producer state (KIP-98) in the sans-IO core: broker/producer_state.py
and its use by Partition.

The cases restate, as facts, ProducerStateManagerTest and LogTest of apache/kafka
at the tag named in each test (no code copied); the per-release switches are the
Features rows (broker/protocol.py).
"""

from __future__ import annotations

import json

import pytest
from fetcher_rounds import fetcher_round
from test_partition import follow, lead, replica, sync, values

from broker.log import Log, Record, sequence_count
from broker.partition import Partition, TruncateLog
from broker.producer_state import (
    INT32_MAX,
    ProducerBatchHeader,
    ProducerStateManager,
    increment_sequence,
)
from broker.protocol import FEATURES, VERSIONS
from broker.storage import PartitionStore, read_offline

PID = 1


def manager(protocol: str = "latest") -> ProducerStateManager:
    return ProducerStateManager.for_features(FEATURES[protocol])


def replicate(m: ProducerStateManager, offset: int, epoch: int, base: int, count: int = 1,
              pid: int = PID) -> None:
    """Records of one batch taken in unchecked (origin=Replication)."""
    last = increment_sequence(base, count - 1)
    m.apply(Record(offset + i, 0, 0, (pid, epoch, base, last)) for i in range(count))


def produce(p: Partition, vals: list[int], epoch: int, seq: int, pid: int = PID, acks=1):
    return p.append_batch_as_leader(vals, acks, 0, ProducerBatchHeader(pid, epoch, seq))


def leader(protocol: str = "latest", node: str = "A", isr=("A",)) -> Partition:
    p = replica(node, protocol)
    lead(p, 0, list(isr))
    return p


# -- sequences and epochs ---------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["0.11", "2.0", "latest"])
def test_basic_id_mapping(protocol):
    """ProducerStateManagerTest.testBasicIdMapping (0.11.0.0 .. 2.5.0): seq 0 then 1
    in epoch 0; a gap (5 after 1) is out of order; a new epoch starts at 0; the old
    epoch is then fenced."""
    p = leader(protocol)
    assert produce(p, [0], 0, 0).error is None
    assert produce(p, [1], 0, 1).error is None
    assert produce(p, [5], 0, 5).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert produce(p, [9], 1, 3).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"  # new epoch not at 0
    assert produce(p, [2], 1, 0).error is None
    assert produce(p, [3], 0, 2).error == "INVALID_PRODUCER_EPOCH"
    assert values(p) == [0, 1, 2]
    entry = p.producer_state.last_entry(PID)
    assert entry.producer_epoch == 1 and [(b.first_seq, b.first_offset) for b in entry.batches] \
        == [(0, 2)], "a new epoch forgets the old epoch's batches (maybeUpdateEpoch)"


def test_errors_change_nothing():
    p = leader()
    produce(p, [0, 1], 0, 0)
    before = (list(p.log.records), p.producer_state.to_json(), p.hw)
    for epoch, seq in ((0, 7), (0, 1)):
        res = produce(p, [9], epoch, seq)
        # Only the event that says what was refused: no append, no epoch entry.
        assert res.error and res.offset is None
        assert [(e.type, e.fields["error"]) for e in res.effects] == [
            ("producer-refused", res.error)]
    assert (list(p.log.records), p.producer_state.to_json(), p.hw) == before


def test_sequence_wrap_around():
    """testProducerSequenceWrapAround (0.11.0.0 on, KAFKA-5283): after a batch ending
    at Int32.MAX_VALUE the next starts at 0; testProducerSequenceInvalidWrapAround:
    1 after MAX_VALUE is out of order; testProducerSequenceWithWrapAroundBatchRecord
    (2.5.0): a batch from MAX_VALUE - 10 with 20 records ends at sequence 9."""
    m = manager()
    replicate(m, 735, 15, INT32_MAX)
    assert m.check_append(PID, 15, 1, 1).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert m.check_append(PID, 15, 0, 1).error is None
    m2 = manager()
    replicate(m2, 2000, 15, INT32_MAX - 10, count=21)
    b = m2.last_entry(PID).batches[-1]
    assert (b.first_seq, b.last_seq, b.first_offset, b.last_offset) == \
        (INT32_MAX - 10, 10 - 1, 2000, 2020)
    assert sequence_count(INT32_MAX - 10, 9) == 21
    # On the leader: a batch across the wrap is stored with its wrapped last sequence.
    p = leader()
    p.producer_state.apply([Record(0, 0, 0, (PID, 0, INT32_MAX - 1, INT32_MAX - 1))])
    res = produce(p, [1, 2, 3], 0, INT32_MAX)
    assert res.error is None and p.log.records[-1].producer == (PID, 0, INT32_MAX, 1)
    assert produce(p, [4], 0, 2).error is None


# -- duplicates ------------------------------------------------------------------------------


@pytest.mark.parametrize("acks", [1, "all"])
def test_retry_of_the_last_batch_answers_the_original_offsets(acks):
    """0.11.0.0 Log.append: a client batch equal to the producer's last one (epoch,
    first and last sequence) is not appended; the answer carries the original
    batch's offsets (maybeDuplicate), so acks=all waits for that batch's HW."""
    p = leader()
    produce(p, [9], 0, 0)
    first = produce(p, [1, 2, 3], 0, 1, acks=acks)
    retry = produce(p, [1, 2, 3], 0, 1, acks=acks)
    assert (first.offset, first.last_offset, first.duplicate) == (1, 3, False)
    assert (retry.error, retry.offset, retry.last_offset, retry.duplicate) == (None, 1, 3, True)
    err, offset, effects = retry  # unpacks as before idempotence
    # Nothing appended: the only effect is the event that shows the resend.
    assert (err, offset) == (None, 1)
    assert [(e.type, e.fields["offset"], e.fields["last_offset"]) for e in effects] == [
        ("producer-duplicate", 1, 3)]
    # the record the batch starts with, [leader epoch, value], names it in a report
    assert effects[0].fields["held"] == [p.leader_epoch, 1]
    assert values(p) == [9, 1, 2, 3]


def test_only_an_exact_sequence_range_is_a_duplicate():
    """findDuplicateBatch: same epoch and the same first AND last sequence; an
    overlapping batch of another size is out of order."""
    p = leader()
    produce(p, [1, 2, 3], 0, 0)
    assert produce(p, [1, 2], 0, 0).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert produce(p, [1, 2, 3], 1, 0).duplicate is False  # new epoch at 0: appended
    assert values(p) == [1, 2, 3, 1, 2, 3]


@pytest.mark.parametrize("protocol,cached", [("0.11", 1), ("2.0", 5), ("latest", 5)])
def test_five_batches_in_flight(protocol, cached):
    """KAFKA-5494 (1.0.0): with up to 5 requests in flight a retry of any of the
    last 5 batches is a duplicate; the 6th-last is gone from the cache (out of
    order). 0.11.0.0 keeps only the last batch."""
    p = leader(protocol)
    for seq in range(6):
        produce(p, [10 + seq], 0, seq)
    for seq in range(6):
        res = produce(p, [10 + seq], 0, seq)
        dup = seq >= 6 - cached
        assert (res.error, res.offset) == ((None, seq) if dup
                                           else ("OUT_OF_ORDER_SEQUENCE_NUMBER", None)), seq
    assert len(p.log.records) == 6


# -- unknown producer ids, per release ----------------------------------------------------


@pytest.mark.parametrize("protocol", VERSIONS)
def test_unknown_producer_id_per_release(protocol):
    """A producer id the leader has no state for, first batch at sequence 3:
    0.11.0 out of order, 1.0-2.4 UNKNOWN_PRODUCER_ID (KAFKA-5793), 2.5 on appended
    (KIP-360); 0.10 has no idempotent producer at all."""
    p = leader(protocol)
    res = produce(p, [1], 0, 3)
    expected = {"0.10": "UNSUPPORTED_VERSION", "0.11": "OUT_OF_ORDER_SEQUENCE_NUMBER",
                "2.0": "UNKNOWN_PRODUCER_ID", "2.1": "UNKNOWN_PRODUCER_ID"}.get(protocol)
    assert res.error == expected
    assert produce(p, [2], 0, 0, pid=2).error == ("UNSUPPORTED_VERSION" if protocol == "0.10"
                                                   else None)


def test_plain_batches_are_untouched():
    """producer None, or producer id -1 (RecordBatch.NO_PRODUCER_ID): as before."""
    p = leader()
    assert tuple(p.append_batch_as_leader([1], 1, 0))[:2] == (None, 0)
    assert produce(p, [2], 0, 5, pid=-1).offset == 1
    assert [r.producer for r in p.log.records] == [None, None]
    assert p.producer_state.producers == {}
    assert p.fetch_for_consumer(0, 10)["records"] == [[0, 0, 1], [1, 0, 2]]


# -- replication, leader change -----------------------------------------------------------


def test_followers_take_the_state_unchecked():
    """KAFKA-6003 (1.0.0), testAcceptAppendWithoutProducerStateOnReplica /
    testAcceptAppendWithSequenceGapsOnReplica (2.0.0): replicated batches update the
    state whatever their sequence."""
    m = manager("2.0")
    replicate(m, 0, 0, 5)
    replicate(m, 1, 0, 9)
    assert m.last_entry(PID).last_seq == 9


@pytest.mark.parametrize("protocol", ["0.11", "2.1", "latest"])
def test_new_leader_knows_the_sequences(protocol):
    """The feasibility study's loss, fixed: batches 0 and 1 reach A and B; batch 2
    is in flight when A fails; a later batch (seq 3) must not be accepted by the
    new leader B (it would let the client assume batch 2 was stored); the retry
    of batch 2 is, then batch 3; a retry of batch 1 is a duplicate (from 1.0)."""
    a, b = replica("A", protocol), replica("B", protocol)
    lead(a, 0, ["A", "B"])
    follow(b, "A", 0, ["A", "B"])
    produce(a, [100], 0, 0)
    produce(a, [101], 0, 1)
    sync(b, a)
    assert values(b) == [100, 101]
    assert b.producer_state.to_json() == a.producer_state.to_json()
    lead(b, 1, ["B"])
    assert produce(b, [103], 0, 3).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert produce(b, [102], 0, 2).error is None
    assert produce(b, [103], 0, 3).error is None
    retry = produce(b, [101], 0, 1)
    if protocol == "0.11":
        assert retry.error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    else:
        assert (retry.error, retry.offset, retry.duplicate) == (None, 1, True)
    assert values(b) == [100, 101, 102, 103]


def test_new_leader_dedups_a_retry_it_replicated():
    """A batch appended on A and replicated to B, its answer lost: the producer
    retries it at the new leader B, which answers with the original offset."""
    a, b = replica("A", "latest"), replica("B", "latest")
    lead(a, 0, ["A", "B"])
    follow(b, "A", 0, ["A", "B"])
    produce(a, [1, 2], 0, 0)
    sync(b, a)
    lead(b, 1, ["B"])
    res = produce(b, [1, 2], 0, 0, acks="all")
    assert (res.error, res.offset, res.last_offset, res.duplicate) == (None, 0, 1, True)
    assert values(b) == [1, 2]


def test_replica_fetch_never_splits_a_producer_batch():
    """Kafka hands out whole record batches: a fetch whose max_records ends inside
    an idempotent batch goes on to its end; plain records are cut as before."""
    a = leader("latest", isr=("A", "B"))
    produce(a, [1, 2, 3], 0, 0)
    a.append_batch_as_leader([4, 5, 6], 1, 0)
    resp, _ = a.fetch_for_replica("B", 0, None, None, 2, 0)
    assert [r[0] for r in resp["records"]] == [0, 1, 2]
    assert resp["records"][0] == [0, 0, 1, [PID, 0, 0, 2]]
    resp, _ = a.fetch_for_replica("B", 3, None, None, 2, 0)
    assert resp["records"] == [[3, 0, 4], [4, 0, 5]]


def test_equal_batches_in_a_row_stay_apart():
    """Records with equal headers back to back are as many batches as the run
    holds batch sizes (the header alone cannot tell two equal batches apart)."""
    log = Log([Record(i, 0, i, (PID, 0, 0, 1)) for i in range(4)])
    assert [log.batch_end(o) for o in range(5)] == [0, 2, 2, 4, 4]
    m = manager()
    m.apply(log.records)
    assert [(b.first_offset, b.last_offset) for b in m.last_entry(PID).batches] == [(0, 1), (2, 3)]


# -- truncation, restart ---------------------------------------------------------------------


def test_truncation_rebuilds_the_state():
    """Log.truncateTo -> ProducerStateManager.truncateAndReload: the state as of the
    new log end (testTruncate... at 0.11.0.0 / 2.5.0 restated for a replay)."""
    b = replica("B", "2.0", replicas=("A", "B"))
    b.log = Log()
    b.producer_state.rebuild([])
    follow(b, "A", 0, ["A", "B"])
    recs = [[i, 0, 10 + i, [PID, 0, i, i]] for i in range(4)]
    b.on_fetch_response(b.generation, {"error": None, "records": recs, "hw": 2}, 0)
    assert b.producer_state.last_entry(PID).last_seq == 3
    b._truncate(2, "test", "hw")
    assert b.producer_state.last_entry(PID).last_seq == 1
    assert [(x.first_seq, x.first_offset) for x in b.producer_state.last_entry(PID).batches] \
        == [(0, 0), (1, 1)]
    b._truncate(0, "test", "hw")
    assert b.producer_state.producers == {}


def test_a_cut_batch_is_no_duplicate():
    """A truncation inside a batch (Kafka never has one; the model's OFFSET_OUT_OF_
    RANGE truncation to the leader's LEO could make one): the state holds only
    the records left, so the full retry is not answered from records that are gone."""
    m = manager()
    m.apply([Record(0, 0, 0, (PID, 0, 0, 2)), Record(1, 0, 1, (PID, 0, 0, 2))])
    e = m.last_entry(PID)
    assert (e.last_seq, e.missing) == (1, 1)
    assert m.check_append(PID, 0, 0, 3).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    m.apply([Record(2, 0, 2, (PID, 0, 0, 2))])  # the rest arrives: whole again
    assert m.check_append(PID, 0, 0, 3).duplicate is not None


def test_restart_rebuilds_the_state_from_storage(tmp_path):
    """A restart (Kafka's loadProducerState; here a replay of log.jsonl): the
    records keep their batch header on disk, a plain record keeps its old line."""
    p = leader()
    effects = []
    effects += produce(p, [1, 2], 0, 0).effects
    effects += p.append_batch_as_leader([3], 1, 0).effects
    effects += produce(p, [4], 0, 2).effects
    store = PartitionStore(tmp_path / "t-0")
    for e in effects:
        if hasattr(e, "records"):
            store.append(e.records)
    store.close()
    lines = (tmp_path / "t-0" / "log.jsonl").read_text().splitlines()
    assert lines[2] == '{"offset":2,"epoch":0,"value":3}'
    assert json.loads(lines[0]) == {"offset": 0, "epoch": 0, "value": 1,
                                    "producer": [PID, 0, 0, 1]}
    assert read_offline(tmp_path)["partitions"][0]["records"][2:] == [
        [2, 0, 3], [3, 0, 4, [PID, 0, 2, 2]]]
    again = PartitionStore(tmp_path / "t-0")
    assert again.records == p.log.records
    q = Partition("t", 0, "A", "latest", p.config, Log(again.records))
    assert q.producer_state.to_json() == p.producer_state.to_json()
    q.replicas = ["A"]
    lead(q, 1, ["A"])
    assert produce(q, [4], 0, 2).duplicate
    assert produce(q, [5], 0, 4).error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert produce(q, [5], 0, 3).offset == 4
    again.close()


def test_truncate_effect_and_store_keep_the_producer_lines(tmp_path):
    store = PartitionStore(tmp_path / "p")
    store.append([Record(0, 0, 1, (PID, 0, 0, 0)), Record(1, 0, 2)])
    store.truncate(TruncateLog(1).offset)
    store.close()
    assert PartitionStore(tmp_path / "p").records == [Record(0, 0, 1, (PID, 0, 0, 0))]


def test_fetcher_round_carries_producer_info():
    a = leader("latest", isr=("A", "B"))
    b = replica("B", "latest")
    follow(b, "A", 0, ["A", "B"])
    produce(a, [1], 0, 0)
    fetcher_round(b, a)
    assert b.log.records == a.log.records
