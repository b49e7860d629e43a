"""Kafka's LeaderEpochFileCacheTest, restated against broker/epoch_cache.py.

Read at 0.11.0.0, 2.0.0, 2.1.0 (core/src/test/scala/unit/kafka/server/epoch/
LeaderEpochFileCacheTest.scala) and 3.7.0 (the same Scala test, driving the Java
cache in storage/). Each row is a script of steps: operations on one cache and
the checks Kafka makes after them, in Kafka's order.

endOffsetFor per release is the model's method for that protocol's
`Features.epoch_answer` (0.11 KIP-101: an offset only; 2.0 KIP-279: (epoch,
offset) with the KAFKA-7415 gap; 2.1+ KAFKA-7415 fixed). Kafka's cache asks the
log for its end offset (a function at 0.11-2.1, an argument at 3.7); a step here
gives that LEO explicitly. Kafka's empty `latestEpoch` (OptionalInt at 3.7) is
the model's UNDEFINED_EPOCH (-1), as it was at 0.11-2.1.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka_cases import NotApplicable, Ref, case

from broker.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache
from broker.protocol import features

CLS = "LeaderEpochFileCacheTest"
U = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)  # (-1, -1): Kafka's "no answer" pair

# One step of a script:
#   ("assign", epoch, start_offset)        cache.assign
#   ("truncate_from_end", offset)          Kafka's clearAndFlushLatest / truncateFromEnd
#   ("entries", [(epoch, start), ...])     the whole cache
#   ("first_entry", (epoch, start))        Kafka's epochEntries(0)
#   ("latest", epoch)                      latestEpoch
#   ("end", epoch, leo, answer)            endOffsetFor(epoch) with the log at `leo`
#   ("start", epoch, offset)               3.7 epochEntry(epoch).startOffset
Step = tuple


def r(method: str, tag: str) -> Ref:
    return Ref(CLS, method, tag)


def end_offset_of(protocol: str) -> Callable[[LeaderEpochCache, int, int], object]:
    """The model's endOffsetFor for `protocol`, picked by Features.epoch_answer
    (as Partition.offsets_for_leader_epoch does)."""
    answer = features(protocol).epoch_answer
    if answer == "kip101":
        return lambda c, epoch, leo: c.end_offset_v011(epoch, leo)
    if answer == "kip279":
        return lambda c, epoch, leo: c.end_offset_v20(epoch, leo)
    assert answer == "kafka7415", answer
    return lambda c, epoch, leo: c.end_offset_for(epoch, leo)


# Three epochs used by Kafka's truncation tests: assign(2, 6), (3, 8), (4, 11).
THREE = [("assign", 2, 6), ("assign", 3, 8), ("assign", 4, 11)]

# -- scripts whose steps and answers are the same at every tag (answers in the
#    tag's shape: an offset at 0.11, a pair from 2.0) -------------------------------


def _common(tag: str) -> list:
    """Rows of the methods whose facts do not change from 0.11.0.0 to 3.7.0,
    except for the answer's shape."""
    pair = tag != "0.11.0.0"

    def ans(epoch: int, offset: int) -> object:
        return (epoch, offset) if pair else offset

    undef = U if pair else UNDEFINED_OFFSET
    rows = [
        case(r("shouldAddEpochAndMessageOffsetToCache", tag), [
            ("assign", 2, 10), ("latest", 2), ("first_entry", (2, 10)),
            ("end", 2, 11, ans(2, 11))]),
        case(r("shouldReturnLogEndOffsetIfLatestEpochRequested", tag), [
            ("assign", 2, 11), ("assign", 2, 12), ("end", 2, 14, ans(2, 14))]),
        case(r("shouldReturnUndefinedOffsetIfUndefinedEpochRequested", tag), [
            ("assign", 2, 11), ("assign", 3, 12), ("end", UNDEFINED_EPOCH, 0, undef)]),
        case(r("shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned", tag), [
            ("assign", 2, 6), ("assign", 2, 10), ("first_entry", (2, 6))]),
        case(r("shouldReturnUnsupportedIfNoEpochRecorded", tag), [("end", 0, 0, undef)]),
        case(r("shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch",
               tag), [
            ("assign", 1, 11), ("assign", 1, 12), ("assign", 2, 13), ("assign", 2, 14),
            ("assign", 3, 15), ("assign", 3, 16), ("end", 2, 17, ans(2, 15))]),
        case(r("shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested", tag), [
            ("assign", 0, 10), ("assign", 2, 13), ("assign", 4, 17),
            ("end", 1, 0, ans(0, 13)), ("end", 2, 0, ans(2, 17))]
            # 2.0.0 added a third check: epoch 3 -> (2, 17).
            + ([("end", 3, 0, ans(2, 17))] if pair else [])),
        case(r("shouldNotUpdateEpochAndStartOffsetIfItDidNotChange", tag), [
            ("assign", 2, 6), ("assign", 2, 7), ("entries", [(2, 6)])]),
        case(r("shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked", tag), [
            ("assign", 2, 100), ("end", 3, 100, undef)]),
        case(r("shouldSupportEpochsThatDoNotStartFromZero", tag), [
            ("assign", 2, 6), ("end", 2, 7, ans(2, 7)), ("entries", [(2, 6)])]),
        case(r("shouldIncreaseAndTrackEpochsAsFollowerReceivesManyMessages", tag), [
            ("assign", 0, 0), ("assign", 0, 1), ("assign", 0, 2),
            ("latest", 0), ("end", 0, 3, ans(0, 3)),
            ("assign", 1, 3), ("assign", 1, 4), ("assign", 1, 5),
            ("latest", 1), ("end", 1, 6, ans(1, 6)),
            ("assign", 2, 6), ("assign", 2, 7), ("assign", 2, 8),
            ("latest", 2), ("end", 2, 9, ans(2, 9)),
            ("end", 0, 9, ans(0, 3)), ("end", 1, 9, ans(1, 6))]),
        case(r("shouldDropEntriesOnEpochBoundaryWhenRemovingLatestEntries", tag), [
            *THREE, ("truncate_from_end", 8), ("entries", [(2, 6)])]),
        case(r("shouldDropEntriesBetweenEpochBoundaryWhenRemovingNewest", tag), [
            *THREE, ("truncate_from_end", 9), ("latest", 3), ("entries", [(2, 6), (3, 8)])]),
        case(r("shouldFetchLatestEpochOfEmptyCache", tag), [("latest", UNDEFINED_EPOCH)]),
        case(r("shouldFetchEndOffsetOfEmptyCache", tag), [("end", 7, 0, undef)]),
        # Kafka only checks that this does not throw; the cache stays empty.
        case(r("shouldClearLatestOnEmptyCache", tag), [
            ("truncate_from_end", 7), ("entries", [])]),
    ]
    if pair:
        rows.append(case(
            r("shouldReturnUnsupportedIfNoEpochRecordedAndUndefinedEpochRequested", tag),
            [("end", UNDEFINED_EPOCH, 73, U)]))
    return rows



def _pre_21(tag: str) -> list:
    """Rows of 0.11.0.0 and 2.0.0 (before 2.1.0 changed assign)."""
    pair = tag == "2.0.0"

    def ans(epoch: int, offset: int) -> object:
        return (epoch, offset) if pair else offset

    undef = U if pair else UNDEFINED_OFFSET
    return [
        case(r("shouldNotOverwriteLogEndOffsetForALeaderEpochOnceItHasBeenAssigned", tag), [
            ("assign", 2, 9), ("assign", 2, 10), ("first_entry", (2, 9))]),
        case(r("shouldAllowLeaderEpochToChangeEvenIfOffsetDoesNot", tag), [
            ("assign", 2, 9), ("assign", 3, 9), ("entries", [(2, 9), (3, 9)])]),
        case(r("shouldReturnUnsupportedIfRequestedEpochLessThanFirstEpoch", tag), [
            ("assign", 5, 11), ("assign", 6, 12), ("assign", 7, 13), ("end", 4, 0, undef)]),
        case(r("shouldNotLetEpochGoBackwardsEvenIfMessageEpochsDo", tag), [
            ("assign", 1, 5), ("assign", 2, 6), ("assign", 1, 7),
            ("latest", 2), ("end", 1, 8, ans(1, 6)), ("end", 2, 8, ans(2, 8)),
            ("entries", [(1, 5), (2, 6)])]),
        case(r("shouldNotLetOffsetsGoBackwardsEvenIfEpochsProgress", tag), [
            ("assign", 2, 6), ("assign", 3, 5), ("first_entry", (2, 6))]),
        case(r("shouldIncreaseAndTrackEpochsAsLeadersChangeManyTimes", tag), [
            ("assign", 0, 0), ("assign", 1, 0),
            ("latest", 1), ("end", 1, 0, ans(1, 0)), ("end", 0, 0, ans(0, 0)),
            ("end", 1, 5, ans(1, 5)), ("end", 0, 5, ans(0, 0)),
            ("assign", 2, 5),
            ("end", 2, 10, ans(2, 10)), ("end", 1, 10, ans(1, 5)), ("end", 0, 10, ans(0, 0))]),
        case(r("shouldNotResetEpochHistoryHeadIfUndefinedPassed", tag), [
            *THREE, ("truncate_from_end", UNDEFINED_OFFSET),
            ("entries", [(2, 6), (3, 8), (4, 11)])]),
    ]


def _from_21(tag: str) -> list:
    """Rows of 2.1.0 and 3.7.0 (assign truncates conflicting entries)."""
    return [
        case(r("shouldNotOverwriteLogEndOffsetForALeaderEpochOnceItHasBeenAssigned", tag), [
            ("assign", 2, 9), ("assign", 2, 10), ("first_entry", (2, 9)),
            ("entries", [(2, 9)])]),
        case(r("shouldEnforceMonotonicallyIncreasingStartOffsets", tag), [
            ("assign", 2, 9), ("assign", 3, 9), ("entries", [(3, 9)])]),
        case(r("shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch", tag), [
            ("assign", 5, 11), ("assign", 6, 12), ("assign", 7, 13), ("end", 4, 0, (4, 11))]),
        case(r("shouldTruncateIfMatchingEpochButEarlierStartingOffset", tag), [
            ("assign", 5, 11), ("assign", 6, 12), ("assign", 7, 13), ("assign", 7, 12),
            ("end", 5, 0, (5, 12)), ("end", 6, 0, (5, 12))]),
        case(r("shouldEnforceMonotonicallyIncreasingEpochs", tag), [
            ("assign", 1, 5), ("assign", 2, 6), ("assign", 1, 7),
            ("latest", 1), ("end", 1, 8, (1, 8)), ("end", 2, 8, U),
            ("first_entry", (1, 7))]),
        case(r("shouldEnforceOffsetsIncreaseMonotonically", tag), [
            ("assign", 2, 6), ("assign", 3, 5), ("first_entry", (3, 5))]),
        case(r("shouldIncreaseAndTrackEpochsAsLeadersChangeManyTimes", tag), [
            ("assign", 0, 0), ("assign", 1, 0),
            ("latest", 1), ("end", 1, 0, (1, 0)), ("end", 0, 0, (0, 0)),
            ("end", 1, 5, (1, 5)), ("end", 0, 5, (0, 0)),
            ("assign", 2, 5),
            ("end", 2, 10, (2, 10)), ("end", 1, 10, (1, 5)), ("end", 0, 10, (0, 0))]),
        case(r("shouldNotResetEpochHistoryTailIfUndefinedPassed", tag), [
            *THREE, ("truncate_from_end", UNDEFINED_OFFSET),
            ("entries", [(2, 6), (3, 8), (4, 11)])]),
    ]


CASES = [
    *_common("0.11.0.0"), *_pre_21("0.11.0.0"),
    *_common("2.0.0"), *_pre_21("2.0.0"),
    *_common("2.1.0"), *_from_21("2.1.0"),
    # 2.1.0 wrote the "head" test with truncateFromEnd too (3.7.0 switched it to
    # truncateFromStart, which is not modelled).
    case(r("shouldNotResetEpochHistoryHeadIfUndefinedPassed", "2.1.0"), [
        *THREE, ("truncate_from_end", UNDEFINED_OFFSET),
        ("entries", [(2, 6), (3, 8), (4, 11)])]),
    *_common("3.7.0"), *_from_21("3.7.0"),
    case(r("testGetEpochEntry", "3.7.0"), [
        ("assign", 2, 100), ("assign", 3, 500), ("assign", 5, 1000),
        ("start", 2, 100), ("start", 3, 500), ("start", 5, 1000)]),
]


# -- left out ----------------------------------------------------------------------------

_NO_LOG_START = ("not applicable: the model has no log start offset (no retention or "
                 "deletion), so the cache has no truncateFromStart / clearAndFlushEarliest")
_EARLIEST_011 = ("shouldPreserveResetOffsetOnClearEarliestIfOneExists",
                 "shouldUpdateSavedOffsetWhenOffsetToClearToIsBetweenEpochs",
                 "shouldNotClearAnythingIfOffsetToEarly",
                 "shouldNotClearAnythingIfOffsetToFirstOffset",
                 "shouldRetainLatestEpochOnClearAllEarliest",
                 "shouldUpdateOffsetBetweenEpochBoundariesOnClearEarliest",
                 "shouldUpdateOffsetBetweenEpochBoundariesOnClearEarliest2",
                 "shouldRetainLatestEpochOnClearAllEarliestAndUpdateItsOffset",
                 "shouldClearEarliestOnEmptyCache")
_PERSIST = ("not applicable: the sans-IO cache is pure data; writing and reading the "
            "checkpoint file is the shell's (broker/storage.py)")
_CLEAR = ("not applicable: the model's cache has no clear-all (the model never deletes a "
          "whole log; truncation to 0 goes through truncate_from_end)")


def _not_applicable() -> list[NotApplicable]:
    out: list[NotApplicable] = []
    for tag in ("0.11.0.0", "2.0.0", "2.1.0", "3.7.0"):
        out += [NotApplicable(r(m, tag), _NO_LOG_START) for m in _EARLIEST_011]
        out.append(NotApplicable(r("shouldPersistEpochsBetweenInstances", tag), _PERSIST))
        out.append(NotApplicable(r("shouldClearAllEntries", tag), _CLEAR))
    # 0.11.0.0 / 2.0.0: the "tail" test clears from the start (clearAndFlushEarliest(-1)).
    for tag in ("0.11.0.0", "2.0.0"):
        out.append(NotApplicable(r("shouldNotResetEpochHistoryTailIfUndefinedPassed", tag),
                                 _NO_LOG_START + " (this one calls clearAndFlushEarliest(-1))"))
    out.append(NotApplicable(r("shouldNotResetEpochHistoryHeadIfUndefinedPassed", "3.7.0"),
                             _NO_LOG_START + " (at 3.7.0 this one calls truncateFromStart(-1))"))
    for m in ("testPreviousEpoch", "testFindPreviousEpoch", "testFindPreviousEntry",
              "testFindNextEpoch", "shouldFetchEpochForGivenOffset"):
        out.append(NotApplicable(r(m, "3.7.0"), (
            "not applicable: previousEpoch / previousEntry / nextEpoch / epochForOffset "
            "serve tiered storage and log recovery, which the model does not have; the "
            "model's cache has no such lookups")))
    return out


NOT_APPLICABLE = _not_applicable()


# -- the test ------------------------------------------------------------------------------


@pytest.mark.parametrize("ref,steps", CASES)
def test_leader_epoch_file_cache(ref: Ref, steps: list[Step]) -> None:
    """Replays Kafka's steps on one LeaderEpochCache and checks each of Kafka's
    assertions where Kafka makes it."""
    cache = LeaderEpochCache()
    end_offset = end_offset_of(ref.protocol)
    # assign's rule per release: append-only before 2.1, truncateAndAppend from
    # 2.1 (KAFKA-7415), as Partition passes it.
    rule = features(ref.protocol).epoch_cache_truncate_and_append
    for i, step in enumerate(steps):
        op, *args = step
        where = f"step {i} {step}"
        if op == "assign":
            cache.assign(*args, rule)
        elif op == "truncate_from_end":
            cache.truncate_from_end(*args)
        elif op == "entries":
            assert cache.entries == list(args[0]), where
        elif op == "first_entry":
            assert cache.entries[:1] == [args[0]], where
        elif op == "latest":
            assert cache.latest_epoch == args[0], where
        elif op == "end":
            epoch, leo, expected = args
            assert end_offset(cache, epoch, leo) == expected, where
        elif op == "start":
            epoch, offset = args
            assert cache.start_offset_of(epoch) == offset, where
        else:
            raise AssertionError(f"unknown step {op!r}")
