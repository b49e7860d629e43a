"""LeaderEpochCache answers, per protocol version (cf. Kafka's LeaderEpochFileCacheTest)."""

import pytest

from broker.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache


@pytest.fixture
def cache() -> LeaderEpochCache:
    return LeaderEpochCache([(0, 10), (2, 13), (4, 17)])


def test_assign_keeps_epochs_and_offsets_increasing():
    """2.1.0+ (KAFKA-7415, truncateAndAppend): a new entry replaces those it conflicts
    with; 0.11.0.0-2.0.0: only a later epoch at or after the latest start is added."""
    c = LeaderEpochCache()
    assert c.assign(0, 0)
    assert not c.assign(0, 5), "same epoch again does not move its start"
    assert c.assign(2, 5)
    # A new epoch starting at or before an existing start replaces it (log was truncated).
    assert c.assign(3, 5)
    assert c.entries == [(0, 0), (3, 5)]
    # An older epoch truncates the newer ones (Kafka 2.1.0 truncateAndAppend).
    assert c.assign(1, 7)
    assert c.entries == [(0, 0), (1, 7)]
    old = LeaderEpochCache()
    assert old.assign(0, 0, truncate_and_append=False)
    assert old.assign(2, 5, truncate_and_append=False)
    assert not old.assign(3, 4, truncate_and_append=False), "before the latest start"
    assert not old.assign(1, 7, truncate_and_append=False), "an older epoch"
    assert old.assign(3, 5, truncate_and_append=False)
    assert old.entries == [(0, 0), (2, 5), (3, 5)]


def test_truncate_from_end_drops_epochs_starting_at_or_after_offset(cache):
    assert cache.truncate_from_end(13)
    assert cache.entries == [(0, 10)]
    assert not cache.truncate_from_end(13)


@pytest.mark.parametrize("epoch,expected", [
    (4, 20),   # the latest epoch: the leader's LEO
    (0, 13),   # start of the first later epoch
    (1, 13),   # an epoch the leader never had: start of the first later one
    (3, 17),
    (5, UNDEFINED_OFFSET),   # no later epoch: UNDEFINED (the follower uses its HW)
    (-2, UNDEFINED_OFFSET),  # below the first epoch: UNDEFINED
])
def test_kip101_answer(cache, epoch, expected):
    """Kafka 0.11.0.0 LeaderEpochFileCache.endOffsetFor (KIP-101): an offset only;
    UNDEFINED when `subsequentEpochs.isEmpty || requestedEpoch < epochs.head.epoch`."""
    assert cache.end_offset_v011(epoch, leo=20) == expected


def test_kip101_answer_below_first_epoch_is_undefined():
    """0.11.0.0 LeaderEpochFileCache.endOffsetFor: an epoch below the first cached one."""
    c = LeaderEpochCache([(3, 7), (5, 9)])
    assert c.end_offset_v011(1, leo=12) == UNDEFINED_OFFSET
    assert c.end_offset_v011(5, leo=12) == 12


@pytest.mark.parametrize("epoch,expected", [
    (4, (4, 20)),
    (0, (0, 13)),
    (1, (0, 13)),   # largest epoch <= 1 is 0, which ends where 2 starts
    (2, (2, 17)),
    (3, (2, 17)),
    (9, (UNDEFINED_EPOCH, UNDEFINED_OFFSET)),   # above the latest: the KAFKA-7415 gap
    (UNDEFINED_EPOCH, (UNDEFINED_EPOCH, UNDEFINED_OFFSET)),
])
def test_kip279_answer_at_2_0(cache, epoch, expected):
    """Kafka 2.0.0 LeaderEpochFileCache.endOffsetFor (KIP-279): (-1, -1) when
    `subsequentEpochs.isEmpty || requestedEpoch < epochs.head.epoch`."""
    assert cache.end_offset_v20(epoch, leo=20) == expected


def test_kip279_answer_at_2_0_below_first_epoch_is_undefined():
    """2.0.0 LeaderEpochFileCache.endOffsetFor: the below-the-first half of KAFKA-7415."""
    c = LeaderEpochCache([(3, 7), (5, 9)])
    assert c.end_offset_v20(1, leo=12) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


@pytest.mark.parametrize("epoch,expected", [
    (4, (4, 20)),
    (0, (0, 13)),
    (1, (0, 13)),
    (2, (2, 17)),
    (3, (2, 17)),
    (9, (UNDEFINED_EPOCH, UNDEFINED_OFFSET)),   # "should never be hit" (latest = own epoch)
    (UNDEFINED_EPOCH, (UNDEFINED_EPOCH, UNDEFINED_OFFSET)),
])
def test_kip279_answer(cache, epoch, expected):
    """Kafka 2.1.0 LeaderEpochFileCache.endOffsetFor (KAFKA-7415 fixed)."""
    assert cache.end_offset_for(epoch, leo=20) == expected


def test_kip279_answer_for_epoch_older_than_any_known():
    """2.1.0 LeaderEpochFileCache.endOffsetFor: `previousEpochs.isEmpty` ->
    (requestedEpoch, subsequentEpochs.head.startOffset) (KAFKA-7415)."""
    c = LeaderEpochCache([(3, 7), (5, 9)])
    assert c.end_offset_for(1, leo=12) == (1, 7)


def test_kip279_answer_on_empty_cache_is_undefined():
    assert LeaderEpochCache().end_offset_for(0, leo=0) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
