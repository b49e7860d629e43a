"""LeaderEpochCache answers, per protocol version (cf. Kafka's LeaderEpochFileCacheTest)."""

import pytest

from broker.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache


@pytest.fixture
def cache() -> LeaderEpochCache:
    return LeaderEpochCache([(0, 10), (2, 13), (4, 17)])


def test_assign_keeps_epochs_and_offsets_increasing():
    c = LeaderEpochCache()
    assert c.assign(0, 0)
    assert not c.assign(0, 5), "same epoch again does not move its start"
    assert c.assign(2, 5)
    assert not c.assign(1, 7), "an older epoch never rewrites history"
    assert c.entries == [(0, 0), (2, 5)]
    # A new epoch starting at or before an existing start replaces it (log was truncated).
    assert c.assign(3, 5)
    assert c.entries == [(0, 0), (3, 5)]


def test_truncate_from_end_drops_epochs_starting_at_or_after_offset(cache):
    assert cache.truncate_from_end(13)
    assert cache.entries == [(0, 10)]
    assert not cache.truncate_from_end(13)


@pytest.mark.parametrize("epoch,expected", [
    (4, 20),   # the latest epoch: the leader's LEO
    (0, 13),   # start of the first later epoch
    (1, 13),   # an epoch the leader never had: start of the first later one
    (3, 17),
    (5, 20),   # no later epoch: LEO
])
def test_kip101_answer(cache, epoch, expected):
    assert cache.end_offset_v011(epoch, leo=20) == expected


@pytest.mark.parametrize("epoch,expected", [
    (4, (4, 20)),
    (0, (0, 13)),
    (1, (0, 13)),   # largest epoch <= 1 is 0, which ends where 2 starts
    (2, (2, 17)),
    (3, (2, 17)),
    (9, (4, 20)),
    (UNDEFINED_EPOCH, (UNDEFINED_EPOCH, UNDEFINED_OFFSET)),
])
def test_kip279_answer(cache, epoch, expected):
    assert cache.end_offset_for(epoch, leo=20) == expected


def test_kip279_answer_for_epoch_older_than_any_known():
    c = LeaderEpochCache([(3, 7), (5, 9)])
    assert c.end_offset_for(1, leo=12) == (1, 7)


def test_kip279_answer_on_empty_cache_is_undefined():
    assert LeaderEpochCache().end_offset_for(0, leo=0) == (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
