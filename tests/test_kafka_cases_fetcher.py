"""Kafka's ReplicaFetcherThreadTest and AbstractFetcherThreadTest, truncation
cases, restated against broker/partition.py.

Two kinds of rows:

- ReplicaFetcherThreadTest (0.11.0.0, 2.0.0, 2.1.0, 2.8.0) mocks the leader: the
  OffsetsForLeaderEpoch / Fetch answers are scripted and the test captures the
  offsets the follower truncates to. Here a follower Partition is built with the
  log end offset, HW and epoch cache the mocks stub (a mocked endOffsetFor(e) is
  a real cache that gives the same answers), the scripted answers are fed to it,
  and the `to` of its truncate events are the captured offsets.
- AbstractFetcherThreadTest (2.1.0, 2.8.0) runs a mock fetcher between a leader
  log and a follower log. Here two Partitions exchange fetcher rounds, one record
  per Fetch as Kafka's MockFetcherThread returns one batch of one record.

A mocked cache answer that no real cache of that release can give makes the row
not applicable (listed in NOT_APPLICABLE with the answer in question).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from kafka_cases import NotApplicable, Ref, case

from broker.config import BrokerConfig
from broker.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache
from broker.log import Log, Record
from broker.partition import Effect, Event, Partition

RFT = "ReplicaFetcherThreadTest"
AFT = "AbstractFetcherThreadTest"
U = UNDEFINED_OFFSET


# -- scripted leader (ReplicaFetcherThreadTest) -------------------------------------------


@dataclass(frozen=True)
class Follower:
    """A follower as the mocks stub it: epoch cache entries, LEO, HW."""

    epochs: tuple[tuple[int, int], ...]
    leo: int
    hw: int


@dataclass(frozen=True)
class Expect:
    truncations: list[int]   # the offsets truncated to, in order (Kafka's captured truncateTo)
    epoch_requests: int      # OffsetsForLeaderEpoch requests sent (mockNetwork.epochFetchCount)
    fetches: int             # Fetch requests sent (mockNetwork.fetchCount)
    leo: int | None = None   # the follower's LEO at the end, where the case implies it
    state: str | None = None  # "truncating" / "fetching" / "leader" at the end


# One scripted step:
#   ("epoch", leader_epoch, end_offset)   the follower must send OffsetsForLeaderEpoch;
#                                          the leader answers (leader_epoch, end_offset)
#   ("epoch_error", error)                 ... and the leader answers with an error
#   ("epoch_then_lead", leader_epoch, end_offset)
#                                          ... but the partition becomes leader on this
#                                          broker before the answer arrives
#   ("fetch", diverging)                   the follower must send a Fetch; the answer has
#                                          no records and `diverging` (epoch, end offset)
#                                          or None
Step = tuple

# The follower follows broker A in this leader epoch (above every cached epoch, so
# no fencing question arises: Kafka's mocks do not check it either).
CURRENT_EPOCH = 9


def _records(epochs: tuple[tuple[int, int], ...], leo: int) -> list[Record]:
    """`leo` records whose epochs agree with the cache (offsets before its first
    entry get epoch 0: written before epochs were tracked)."""
    out = []
    for offset in range(leo):
        epoch = 0
        for e, start in epochs:
            if start <= offset:
                epoch = e
        out.append(Record(offset, epoch, offset))
    return out


def make_follower(spec: Follower, protocol: str) -> tuple[Partition, list[Effect]]:
    config = BrokerConfig.from_dict({}, protocol)
    p = Partition("t", 0, "B", protocol, config, Log(_records(spec.epochs, spec.leo)),
                  LeaderEpochCache(list(spec.epochs)), spec.hw)
    p.replicas = ["A", "B"]
    effects = p.apply_leader_and_isr("A", CURRENT_EPOCH, ["A", "B"], 0, p.replicas, 0.0)
    return p, effects


def truncated_to(effects: list[Effect]) -> list[int]:
    return [e.fields["to"] for e in effects if isinstance(e, Event) and e.type == "truncate"]


def run_script(p: Partition, effects: list[Effect], script: list[Step]) -> dict[str, Any]:
    truncations = truncated_to(effects)
    counts = {"offsets-for-leader-epoch": 0, "replica-fetch": 0}
    for step in script:
        kind = step[0]
        req = p.next_follower_request()
        assert req is not None, f"no request to answer with {step}"
        counts[req["type"]] += 1
        if kind in ("epoch", "epoch_error", "epoch_then_lead"):
            assert req["type"] == "offsets-for-leader-epoch", (step, req)
            if kind == "epoch_error":
                resp: dict[str, Any] = {"error": step[1]}
            else:
                resp = {"error": None, "leader_epoch": step[1], "end_offset": step[2]}
            if kind == "epoch_then_lead":
                # The leader moved here while the request was out (Kafka: the
                # partition was removed from the fetcher); its answer comes late.
                effects = p.apply_leader_and_isr("B", CURRENT_EPOCH + 1, ["A", "B"], 1,
                                                 p.replicas, 0.0)
                truncations += truncated_to(effects)
            effects = p.on_offsets_for_leader_epoch_response(req["generation"], resp, 0.0)
        elif kind == "fetch":
            assert req["type"] == "replica-fetch", (step, req)
            # Kafka's mock Fetch answers carry no records (and the ones with a
            # diverging epoch are not appended); the HW is left as it is.
            resp = {"error": None, "records": [], "hw": p.hw, "leo": p.log.leo}
            if step[1] is not None:
                resp["diverging_epoch"] = {"epoch": step[1][0], "end_offset": step[1][1]}
            effects = p.on_fetch_response(req["generation"], resp, 0.0)
        else:
            raise AssertionError(f"unknown step {kind!r}")
        truncations += truncated_to(effects)
    state = p.role if p.role != "follower" else p.follower_state
    return {"truncations": truncations, "epoch_requests": counts["offsets-for-leader-epoch"],
            "fetches": counts["replica-fetch"], "leo": p.log.leo, "state": state}


def rft(method: str, tag: str) -> Ref:
    return Ref(RFT, method, tag)


FIVE = ((5, 0),)            # the mocks' latestEpoch 5 (endOffsetFor(5) = (5, LEO))
THREE_FIVE = ((3, 0), (5, 120))  # endOffsetFor(4) = endOffsetFor(3) = (3, 120), latest 5
# 2.8.0: endOffsetForEpoch(4) = (4, 149) and (3) = (2, 129), latest 5.
DIVERGING_28 = ((1, 100), (2, 119), (4, 129), (5, 149))

SCRIPTED_CASES = [
    # -- 0.11.0.0 (KIP-101: the answer is an offset only) ----------------------------------
    case(rft("shouldTruncateToOffsetSpecifiedInEpochOffsetResponse", "0.11.0.0"),
         None, Follower(FIVE, 200, 0), [("epoch", UNDEFINED_EPOCH, 156)],
         Expect([156], 1, 0, leo=156, state="fetching"), variant="t1p0"),
    case(rft("shouldTruncateToOffsetSpecifiedInEpochOffsetResponse", "0.11.0.0"),
         None, Follower(FIVE, 200, 0), [("epoch", UNDEFINED_EPOCH, 172)],
         Expect([172], 1, 0, leo=172, state="fetching"), variant="t2p1"),
    case(rft("shouldTruncateToHighWatermarkIfLeaderReturnsUndefinedOffset", "0.11.0.0"),
         None, Follower(FIVE, 300, 100), [("epoch", UNDEFINED_EPOCH, U)],
         Expect([100], 1, 0, leo=100, state="fetching")),
    case(rft("shouldPollIndefinitelyIfLeaderReturnsAnyException", "0.11.0.0"),
         None, Follower(FIVE, 300, 100),
         [("epoch_error", "NOT_LEADER_OR_FOLLOWER")] * 4 + [("epoch", UNDEFINED_EPOCH, 156)],
         Expect([156], 5, 0, leo=156, state="fetching")),
    case(rft("shouldFilterPartitionsMadeLeaderDuringLeaderEpochRequest", "0.11.0.0"),
         None, Follower(FIVE, 100, 0), [("epoch_then_lead", UNDEFINED_EPOCH, 52)],
         Expect([], 1, 0, leo=100, state="leader"), variant="t1p0"),
    case(rft("shouldFilterPartitionsMadeLeaderDuringLeaderEpochRequest", "0.11.0.0"),
         None, Follower(FIVE, 100, 0), [("epoch", UNDEFINED_EPOCH, 49)],
         Expect([49], 1, 0, leo=49, state="fetching"), variant="t1p1"),
    # IBP 0.10.2: no OffsetsForLeaderEpoch at all (Kafka answers UNDEFINED without
    # sending one, and an UNDEFINED answer means truncating to the HW); the model's
    # 0.10 line truncates to its HW (0 here) and fetches.
    case(rft("shouldNotIssueLeaderEpochRequestIfInterbrokerVersionBelow11", "0.11.0.0"),
         "0.10", Follower((), 0, 0), [("fetch", None)],
         Expect([0], 0, 1, state="fetching")),
]

# 2.0.0 and 2.1.0 share these facts (KIP-279 answers (epoch, end offset)).
for _tag in ("2.0.0", "2.1.0"):
    SCRIPTED_CASES += [
        case(rft("shouldTruncateToOffsetSpecifiedInEpochOffsetResponse", _tag),
             None, Follower(FIVE, 200, 199), [("epoch", 5, 156)],
             Expect([156], 1, 0, leo=156, state="fetching"), variant="t1p0"),
        case(rft("shouldTruncateToOffsetSpecifiedInEpochOffsetResponse", _tag),
             None, Follower(FIVE, 200, 199), [("epoch", 5, 172)],
             Expect([172], 1, 0, leo=172, state="fetching"), variant="t2p1"),
        case(rft("shouldFetchLeaderEpochSecondTimeIfLeaderRepliesWithEpochNotKnownToFollower",
                 _tag),
             None, Follower(THREE_FIVE, 200, 198),
             [("epoch", 4, 155), ("epoch", 3, 101), ("fetch", None), ("fetch", None)],
             Expect([120, 101], 2, 2, leo=101, state="fetching"), variant="t1p0"),
        case(rft("shouldFetchLeaderEpochSecondTimeIfLeaderRepliesWithEpochNotKnownToFollower",
                 _tag),
             None, Follower(THREE_FIVE, 200, 198),
             [("epoch", 4, 143), ("epoch", 3, 102), ("fetch", None), ("fetch", None)],
             Expect([120, 102], 2, 2, leo=102, state="fetching"), variant="t1p1"),
        # A leader on OffsetsForLeaderEpoch v0 answers without an epoch: its offset is
        # taken (capped at the LEO) after one round.
        case(rft("shouldUseLeaderEndOffsetIfInterBrokerVersionBelow20", _tag),
             None, Follower(THREE_FIVE, 200, 198),
             [("epoch", UNDEFINED_EPOCH, 155), ("fetch", None), ("fetch", None)],
             Expect([155], 1, 2, leo=155, state="fetching"), variant="t1p0"),
        case(rft("shouldUseLeaderEndOffsetIfInterBrokerVersionBelow20", _tag),
             None, Follower(THREE_FIVE, 200, 198),
             [("epoch", UNDEFINED_EPOCH, 143), ("fetch", None), ("fetch", None)],
             Expect([143], 1, 2, leo=143, state="fetching"), variant="t1p1"),
        case(rft("shouldTruncateToInitialFetchOffsetIfLeaderReturnsUndefinedOffset", _tag),
             None, Follower(FIVE, 300, 100), [("epoch", UNDEFINED_EPOCH, U)],
             Expect([100], 1, 0, leo=100, state="fetching")),
        case(rft("shouldPollIndefinitelyIfLeaderReturnsAnyException", _tag),
             None, Follower(FIVE, 300, 100),
             [("epoch_error", "NOT_LEADER_OR_FOLLOWER")] * 4 + [("epoch", 5, 156)],
             Expect([156], 5, 0, leo=156, state="fetching")),
        case(rft("shouldFilterPartitionsMadeLeaderDuringLeaderEpochRequest", _tag),
             None, Follower(FIVE, 100, 98), [("epoch_then_lead", 5, 52)],
             Expect([], 1, 0, leo=100, state="leader"), variant="t1p0"),
        case(rft("shouldFilterPartitionsMadeLeaderDuringLeaderEpochRequest", _tag),
             None, Follower(FIVE, 100, 98), [("epoch", 5, 49)],
             Expect([49], 1, 0, leo=49, state="fetching"), variant="t1p1"),
    ]

SCRIPTED_CASES += [
    # 2.0.0: the follower's endOffsetFor(4) is (-1, -1) (4 is below its first epoch 5,
    # the KAFKA-7415 gap), so the leader's offset is taken, capped at the LEO.
    case(rft("shouldTruncateToOffsetSpecifiedInEpochOffsetResponseIfFollowerHasNoMoreEpochs",
             "2.0.0"),
         None, Follower(FIVE, 200, 197), [("epoch", 4, 156)],
         Expect([156], 1, 0, leo=156, state="fetching"), variant="t1p0"),
    case(rft("shouldTruncateToOffsetSpecifiedInEpochOffsetResponseIfFollowerHasNoMoreEpochs",
             "2.0.0"),
         None, Follower(FIVE, 200, 197), [("epoch", 4, 202)],
         Expect([200], 1, 0, leo=200, state="fetching"), variant="t2p1"),
    # 2.1.0: a follower whose last epoch is UNDEFINED sends no OffsetsForLeaderEpoch
    # (the leader could only answer UNDEFINED).
    case(rft("shouldNotSendEpochRequestIfLastEpochUndefinedForAllPartitions", "2.1.0"),
         None, Follower((), 0, 0), [("fetch", None)], Expect([], 0, 1, state="fetching")),
    # 2.8.0, KAFKA-10554: no OffsetsForLeaderEpoch; the Fetch carries the last epoch.
    case(rft("shouldNotFetchLeaderEpochOnFirstFetchWithTruncateOnFetch", "2.8.0"),
         None, Follower(FIVE, 0, 0), [("fetch", None)] * 3,
         Expect([], 0, 3, state="fetching")),
    # Loops 1-3 of Kafka's four (loop 4 is not applicable: see NOT_APPLICABLE).
    case(rft("shouldTruncateIfLeaderRepliesWithDivergingEpochNotKnownToFollower", "2.8.0"),
         None, Follower(DIVERGING_28, 200, 115),
         [("fetch", None), ("fetch", (4, 140)), ("fetch", (3, 130))],
         Expect([140, 129], 0, 3, leo=129, state="fetching"), variant="t1p0"),
    case(rft("shouldTruncateIfLeaderRepliesWithDivergingEpochNotKnownToFollower", "2.8.0"),
         None, Follower(DIVERGING_28, 200, 115),
         [("fetch", None), ("fetch", (4, 141)), ("fetch", (3, 131))],
         Expect([141, 129], 0, 3, leo=129, state="fetching"), variant="t1p1"),
]


@pytest.mark.parametrize("ref,protocol,follower,script,expect", SCRIPTED_CASES)
def test_replica_fetcher_thread(ref: Ref, protocol: str | None, follower: Follower,
                                script: list[Step], expect: Expect) -> None:
    """The follower truncates where Kafka's fetcher did, after the same number of
    OffsetsForLeaderEpoch and Fetch requests. `protocol` overrides the tag's line
    where the Kafka test sets an older inter-broker protocol."""
    p, effects = make_follower(follower, protocol or ref.protocol)
    got = run_script(p, effects, script)
    assert got["truncations"] == expect.truncations
    assert (got["epoch_requests"], got["fetches"]) == (expect.epoch_requests, expect.fetches)
    if expect.leo is not None:
        assert got["leo"] == expect.leo
    if expect.state is not None:
        assert got["state"] == expect.state


# -- leader and follower logs (AbstractFetcherThreadTest) ---------------------------------


@dataclass
class Pair:
    leader: Partition
    follower: Partition
    truncations: list[int] = field(default_factory=list)


def _replica(node: str, protocol: str, log: list[tuple[int, str]], hw: int,
             with_epochs: bool = True) -> Partition:
    records = [Record(i, e, v) for i, (e, v) in enumerate(log)]
    cache = LeaderEpochCache()
    if with_epochs:
        for rec in records:
            cache.assign(rec.epoch, rec.offset)
    p = Partition("t", 0, node, protocol, BrokerConfig.from_dict({}, protocol), Log(records),
                  cache, hw)
    p.replicas = ["A", "B"]
    return p


def make_pair(protocol: str, leader_log: list, leader_hw: int, follower_log: list,
              follower_hw: int, epoch: int, follower_epochs: bool = True) -> Pair:
    """Leader A and follower B in leader epoch `epoch`. The leader's ISR is itself
    alone, so its HW moves only by its own rule, as a mock leader's does not at all."""
    a = _replica("A", protocol, leader_log, leader_hw)
    b = _replica("B", protocol, follower_log, follower_hw, follower_epochs)
    a.apply_leader_and_isr("A", epoch, ["A"], 0, a.replicas, 0.0)
    pair = Pair(a, b)
    pair.truncations += truncated_to(b.apply_leader_and_isr("A", epoch, ["A"], 0, b.replicas,
                                                            0.0))
    return pair


def do_work(pair: Pair) -> dict[str, Any] | None:
    """One round of Kafka's MockFetcherThread.doWork: the follower's next request,
    answered by the leader (a Fetch returns one record, as the mock's one-record
    batches do)."""
    a, b = pair.leader, pair.follower
    req = b.next_follower_request()
    if req is None:
        return None
    if req["type"] == "offsets-for-leader-epoch":
        resp, _ = a.offsets_for_leader_epoch(req["leader_epoch_request"],
                                             req.get("current_leader_epoch"))
        effects = b.on_offsets_for_leader_epoch_response(req["generation"], resp, 0.0)
    else:
        resp, _ = a.fetch_for_replica("B", req["offset"], req["last_fetched_epoch"],
                                      req.get("current_leader_epoch"), 1, 0.0)
        effects = b.on_fetch_response(req["generation"], resp, 0.0)
    pair.truncations += truncated_to(effects)
    return req


def until_logs_match(pair: Pair, rounds: int = 20) -> None:
    """Kafka's waitUntilTrue(doWork; replica log == leader log)."""
    for _ in range(rounds):
        do_work(pair)
        if pair.follower.log.records == pair.leader.log.records:
            return
    raise AssertionError(f"logs did not match: leader {pair.leader.log.records}, "
                         f"follower {pair.follower.log.records}")


def aft(method: str, tag: str) -> Ref:
    return Ref(AFT, method, tag)


# Kafka's logs, as (leader epoch, value) per offset.
REPLICA_024 = [(0, "a"), (2, "b"), (4, "c")]
LEADER_135 = [(1, "a"), (3, "b"), (5, "c")]


def _truncation(pair: Pair) -> None:
    until_logs_match(pair)
    a, b = pair.leader, pair.follower
    assert (b.log.leo, b.hw) == (a.log.leo, a.hw)


def _truncation_skipped_if_no_epoch_change(pair: Pair) -> None:
    b = pair.follower
    do_work(pair)
    assert b.log.leo == 1, "one record per round"
    before = list(pair.truncations)
    # Kafka adds the partition again with the same leader epoch: the model's
    # equivalent is the same LeaderAndIsr again.
    pair.truncations += truncated_to(b.apply_leader_and_isr("A", b.leader_epoch, ["A"], 0,
                                                            b.replicas, 0.0))
    do_work(pair)
    assert pair.truncations == before, "no truncation without an epoch change"
    assert b.log.leo == 2


def _to_hw_without_epochs(pair: Pair) -> None:
    b = pair.follower
    assert pair.truncations == [2], "truncated to the HW, in one step"
    req = b.next_follower_request()
    assert (b.log.leo, b.follower_state, req["type"], req["offset"]) == \
        (2, "fetching", "replica-fetch", 2)


def _diverging_epochs(pair: Pair) -> None:
    b = pair.follower
    assert b.next_follower_request()["last_fetched_epoch"] == 4
    do_work(pair)
    assert b.next_follower_request()["last_fetched_epoch"] == 2
    until_logs_match(pair)
    assert b.next_follower_request()["last_fetched_epoch"] == 5
    assert b.follower_state == "fetching"


def _out_of_range_high(pair: Pair) -> None:
    a, b = pair.leader, pair.follower
    do_work(pair)
    if b.follower_state == "truncating":  # 2.1: OffsetsForLeaderEpoch first, then Fetch
        do_work(pair)
    assert (b.log.leo, b.follower_state) == (3, "fetching")
    # Kafka empties the leader's log without a truncation phase on the follower; a
    # real leader's epoch cache empties with its log (truncateFromEnd(0)).
    a.log.truncate_to(0)
    a.epoch_cache.truncate_from_end(0)
    a.hw = 0
    do_work(pair)
    assert (b.log.leo, b.hw) == (0, 0)


LOG_CASES = [
    case(aft("testTruncation", "2.1.0"), None,
         dict(leader_log=LEADER_135, leader_hw=2, follower_log=REPLICA_024, follower_hw=0,
              epoch=5), _truncation),
    case(aft("testTruncation", "2.8.0"), None,
         dict(leader_log=LEADER_135, leader_hw=2, follower_log=REPLICA_024, follower_hw=0,
              epoch=5), _truncation),
    case(aft("testTruncationSkippedIfNoEpochChange", "2.1.0"), None,
         dict(leader_log=LEADER_135, leader_hw=2, follower_log=[], follower_hw=0, epoch=5),
         _truncation_skipped_if_no_epoch_change),
    # The replica's log has no epochs (Kafka: latestEpoch None): truncate to the HW.
    case(aft("testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable", "2.8.0"), None,
         dict(leader_log=LEADER_135, leader_hw=2, follower_log=REPLICA_024, follower_hw=2,
              epoch=5, follower_epochs=False), _to_hw_without_epochs),
    # Neither OffsetsForLeaderEpoch nor truncation on fetch: the 0.10 rule.
    case(aft("testTruncateToHighWatermarkIfLeaderEpochRequestNotSupported", "2.8.0"), "0.10",
         dict(leader_log=LEADER_135, leader_hw=2, follower_log=REPLICA_024, follower_hw=2,
              epoch=5), _to_hw_without_epochs),
    case(aft("testDivergingEpochs", "2.8.0"), None,
         dict(leader_log=[(0, "a"), (2, "b"), (5, "d")], leader_hw=2,
              follower_log=REPLICA_024, follower_hw=0, epoch=5), _diverging_epochs),
    case(aft("testFollowerFetchOutOfRangeHigh", "2.1.0"), None,
         dict(leader_log=REPLICA_024, leader_hw=2, follower_log=REPLICA_024, follower_hw=0,
              epoch=4), _out_of_range_high),
    case(aft("testFollowerFetchOutOfRangeHigh", "2.8.0"), None,
         dict(leader_log=REPLICA_024, leader_hw=2, follower_log=REPLICA_024, follower_hw=0,
              epoch=4), _out_of_range_high),
]


@pytest.mark.parametrize("ref,protocol,logs,check", LOG_CASES)
def test_abstract_fetcher_thread(ref: Ref, protocol: str | None, logs: dict[str, Any],
                                 check: Any) -> None:
    """Leader and follower logs as Kafka's mock fetcher test sets them; `check`
    drives the rounds and asserts what Kafka asserts."""
    check(make_pair(protocol or ref.protocol, **logs))


CASES = [*SCRIPTED_CASES, *LOG_CASES]


# -- left out ------------------------------------------------------------------------------

_EMPTY_LOG = (
    "not applicable: the follower's log is empty (LEO 0) while its mocked cache holds "
    "epoch {e}; Kafka still sends one OffsetsForLeaderEpoch and the case counts it. The "
    "model's follower with an empty log has nothing to truncate and fetches at once "
    "(Partition._become_follower), so the request count differs while the log does not")
_NO_NET = ("not applicable: a failing network send is the shell's business; the sans-IO "
           "core has no blocking send")


def _not_applicable() -> list[NotApplicable]:
    out = [
        NotApplicable(rft("shouldFetchLeaderEpochOnFirstFetchOnly", "0.11.0.0"),
                      _EMPTY_LOG.format(e=5)),
        NotApplicable(rft("shouldMovePartitionsOutOfTruncatingLogState", "0.11.0.0"),
                      _EMPTY_LOG.format(e=5)),
        NotApplicable(rft("shouldHandleExceptionFromBlockingSend", "0.11.0.0"), _NO_NET),
        NotApplicable(rft("shouldTruncateToOffsetSpecifiedInEpochOffsetResponseIfFollowerHas"
                          "NoMoreEpochs", "2.1.0"), (
            "not applicable: the mock says the follower's endOffsetFor(4) is (-1, -1) while "
            "its latest epoch is 5; no 2.1 cache answers that (KAFKA-7415: an epoch below "
            "the first gets (4, first start)), so no follower state reproduces the input")),
        NotApplicable(rft("shouldFetchLeaderEpochRequestIfLastEpochDefinedForSomePartitions",
                          "2.1.0"), _EMPTY_LOG.format(e=5)),
        NotApplicable(rft("shouldFetchLeaderEpochOnFirstFetchOnlyIfLeaderEpochKnownToBothIbp26",
                          "2.8.0"), _EMPTY_LOG.format(e=5) + " (protocol 2.7 here: IBP 2.6)"),
        NotApplicable(rft("shouldTruncateIfLeaderRepliesWithDivergingEpochNotKnownToFollower"
                          "#loop4", "2.8.0"), (
            "not applicable (loop 4 only; loops 1-3 are restated): after truncating to 129 "
            "the mock says endOffsetForEpoch(2) = (1, 119), but its own endOffsetForEpoch(3) "
            "= (2, 129) says epoch 2 ends at 129; no cache gives both")),
        NotApplicable(aft("testTruncationSkippedIfNoEpochChange", "2.8.0"), (
            "not applicable: forceTruncation sends an empty-log follower without a last "
            "epoch down the OffsetsForLeaderEpoch path, which the model's 2.8 follower "
            "never takes; the fact (no truncation on the same epoch) is restated at 2.1.0")),
        NotApplicable(aft("testFollowerFetchOutOfRangeLow", "2.1.0"),
                      "not applicable: the model has no log start offset (a fetch below "
                      "the leader's log start)"),
        NotApplicable(aft("testFollowerFetchOutOfRangeLow", "2.8.0"),
                      "not applicable: the model has no log start offset"),
    ]
    for tag in ("2.0.0", "2.1.0"):
        out += [
            NotApplicable(rft("shouldFetchLeaderEpochOnFirstFetchOnlyIfLeaderEpochKnownToBoth",
                              tag), _EMPTY_LOG.format(e=5)),
            NotApplicable(rft("shouldMovePartitionsOutOfTruncatingLogState", tag),
                          _EMPTY_LOG.format(e=4 if tag == "2.0.0" else 5)),
            NotApplicable(rft("shouldHandleExceptionFromBlockingSend", tag), _NO_NET),
        ]
    # 2.8.0 repeats 2.1.0's OffsetsForLeaderEpoch cases with followers that start
    # without a last fetched epoch (initialFetchState), the only way 2.8 takes that path.
    for m in ("shouldTruncateToOffsetSpecifiedInEpochOffsetResponse",
              "shouldTruncateToOffsetSpecifiedInEpochOffsetResponseIfFollowerHasNoMoreEpochs",
              "shouldFetchLeaderEpochSecondTimeIfLeaderRepliesWithEpochNotKnownToFollower",
              "shouldUseLeaderEndOffsetIfInterBrokerVersionBelow20",
              "shouldTruncateToInitialFetchOffsetIfLeaderReturnsUndefinedOffset",
              "shouldPollIndefinitelyIfLeaderReturnsAnyException",
              "shouldMovePartitionsOutOfTruncatingLogState",
              "shouldFilterPartitionsMadeLeaderDuringLeaderEpochRequest"):
        out.append(NotApplicable(rft(m, "2.8.0"), (
            "not applicable: the follower starts without a last fetched epoch, which sends "
            "a 2.8 follower through OffsetsForLeaderEpoch; the model's 2.8 follower always "
            "fetches with its latest epoch (KAFKA-10554). The same facts are restated at "
            "2.1.0 (where the model takes that path)")))
    return out


NOT_APPLICABLE = _not_applicable()
