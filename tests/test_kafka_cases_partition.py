"""Kafka's PartitionTest (core/src/test/scala/unit/kafka/cluster/PartitionTest.scala),
ISR, HW and leader/follower cases, restated against broker/partition.py.

Read at 2.1.0, 2.7.0 and 3.7.0. Kafka's test drives one Partition as leader
(brokerId) with a log it seeds, and plays the followers by
updateFollowerFetchState / fetchFollower (a follower's fetch at an offset, at a
time); here that is `Partition.fetch_for_replica(follower, offset, ..., now)`.
Kafka's maybeShrinkIsr is `Partition.tick(now)` (the first call is always due),
its AlterIsr / AlterPartition is the ProposeIsr effect, and completing it is the
controller's new state applied by `apply_leader_and_isr`. The leader is A, the
followers B and C (Kafka: brokerId + 1, brokerId + 2).

A row names the Kafka method and tag; its scenario function replays Kafka's steps
with the numbers of the row, and asserts what Kafka asserts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kafka_cases import NotApplicable, Ref, case

from broker.config import BrokerConfig
from broker.epoch_cache import LeaderEpochCache
from broker.log import Log, Record
from broker.partition import Effect, Event, Partition, ProposeIsr

CLS = "PartitionTest"


def r(method: str, tag: str) -> Ref:
    return Ref(CLS, method, tag)


def leader_with_log(protocol: str, epochs: list[int], replicas: tuple[str, ...] = ("A", "B"),
                    hw: int = 0, **cfg: Any) -> Partition:
    """Replica A holding one record per entry of `epochs` (its leader epoch), as
    Kafka's seedLogData / appendAsLeader leaves the log, with its epoch cache."""
    records = [Record(i, e, i) for i, e in enumerate(epochs)]
    cache = LeaderEpochCache()
    for rec in records:
        cache.assign(rec.epoch, rec.offset)
    p = Partition("t", 0, "A", protocol, BrokerConfig.from_dict(cfg, protocol), Log(records),
                  cache, hw)
    p.replicas = list(replicas)
    return p


def make_leader(p: Partition, epoch: int, isr: list[str], now: float = 0.0,
                partition_epoch: int = 1) -> list[Effect]:
    return p.apply_leader_and_isr("A", epoch, isr, partition_epoch, p.replicas, now)


def fetch(p: Partition, replica: str, offset: int, now: float = 0.0) -> list[Effect]:
    """Kafka's updateFollowerFetchState / fetchFollower: `replica` fetched at
    `offset` (its LEO) at `now`."""
    _, effects = p.fetch_for_replica(replica, offset, None, None, 10_000, now)
    return effects


def proposals(effects: list[Effect]) -> list[tuple[str, ...]]:
    return [e.isr for e in effects if isinstance(e, ProposeIsr)]


def complete(p: Partition, effects: list[Effect], now: float = 0.0) -> None:
    """The controller takes the one AlterIsr / AlterPartition in `effects`."""
    (prop,) = [e for e in effects if isinstance(e, ProposeIsr)]
    p.apply_leader_and_isr("A", prop.leader_epoch, list(prop.isr), prop.partition_epoch + 1,
                           p.replicas, now)


def maximal_isr(p: Partition) -> set[str]:
    """Kafka's isrState.maximalIsr: the ISR plus a pending expansion (a pending
    shrink still counts the leaving replica: it is in the ISR until committed)."""
    return set(p.isr) | set(p.pending_isr or ())


# -- scenarios ------------------------------------------------------------------------------


def make_leader_updates_epoch_cache(protocol: str) -> None:
    """Two records of epoch 0 and two of epoch 5; A becomes leader in epoch 8:
    OffsetsForLeaderEpoch(8) answers (8, 4) at once, before any append in epoch 8
    (KAFKA-7415: the epoch is cached on becoming leader)."""
    p = leader_with_log(protocol, [0, 0, 5, 5])
    make_leader(p, 8, ["A"])
    assert p.log.leo == 4
    resp, _ = p.offsets_for_leader_epoch(8, 8)
    assert (resp["leader_epoch"], resp["end_offset"]) == (8, 4)


def make_follower_with_no_leader_id_change(protocol: str) -> None:
    """Follower of leader B in epoch 1; B again in epoch 4: the become-follower
    steps run (makeFollower true; KAFKA-7164); B in epoch 4 again: they do not."""
    p = leader_with_log(protocol, [], replicas=("C", "B", "D", "A"))
    p.apply_leader_and_isr("B", 1, ["C", "B", "D", "A"], 1, p.replicas, 0.0)
    assert p.role == "follower"

    def became_follower(effects: list[Effect]) -> bool:
        return any(isinstance(e, Event) and e.type == "became-follower" for e in effects)

    gen = p.generation
    effects = p.apply_leader_and_isr("B", 4, ["C", "B", "D", "A"], 1, p.replicas, 0.0)
    assert became_follower(effects) and p.generation == gen + 1, "epoch 1 -> 4: true"
    effects = p.apply_leader_and_isr("B", 4, ["C", "B", "D", "A"], 1, p.replicas, 0.0)
    assert not became_follower(effects) and p.generation == gen + 1, "same epoch: false"


def follower_does_not_join_isr_until_caught_up(protocol: str, committed_at_once: bool) -> None:
    """KAFKA-7128. A leads epoch 8 with ISR {A, C} and appends 2 + 3 records; C
    fetches at 0 then 1 (HW 1). A follows C in epoch 9, leads again in epoch 10
    (its epoch starts at 5) and appends 2 records. B fetching at 0 and at 1 (>= the
    HW) does not join; B fetching at 5 (the epoch's start) does. At 2.1 the leader
    writes the ISR itself (`committed_at_once`); from 2.7 it sends AlterIsr and the
    ISR changes when the controller answers (maximal ISR meanwhile)."""
    p = leader_with_log(protocol, [], replicas=("A", "B", "C"))
    make_leader(p, 8, ["A", "C"], partition_epoch=1)
    assert (p.leader_epoch, set(p.isr)) == (8, {"A", "C"})
    p.append_batch_as_leader([1, 2], 0, 0.0)
    p.append_batch_as_leader([3, 4, 5], 0, 0.0)
    assert p.hw == 0, "the leader's HW does not move"
    fetch(p, "C", 0)
    fetch(p, "C", 1)
    assert p.hw == 1, "the HW moves to the ISR follower's offset, below the LEO"
    p.apply_leader_and_isr("C", 9, ["A", "C"], 1, p.replicas, 0.0)
    effects = make_leader(p, 10, ["A", "C"], partition_epoch=1)
    assert any(isinstance(e, Event) and e.type == "became-leader" for e in effects), \
        "makeLeader after makeFollower: leader changed"
    epoch_start = p.log.leo
    p.append_batch_as_leader([6, 7], 0, 0.0)
    assert proposals(fetch(p, "B", 0)) == []
    assert proposals(fetch(p, "B", 1)) == []
    assert set(p.isr) == {"A", "C"}
    effects = fetch(p, "B", epoch_start)
    assert [set(isr) for isr in proposals(effects)] == [{"A", "B", "C"}]
    if committed_at_once:
        complete(p, effects)
        assert set(p.isr) == {"A", "B", "C"}
    else:
        assert set(p.isr) == {"A", "C"}, "expansion does not affect the ISR"
        assert maximal_isr(p) == {"A", "B", "C"}


def update_follower_fetch_state(protocol: str) -> None:
    """6 records; A leads epoch 5 with ISR {A, B} at t=0. B's fetch at 3 at t=500
    leaves its last caught-up time at 0; its fetch at 6 (the LEO) at t=1000 sets it
    to 1000."""
    p = leader_with_log(protocol, [4] * 6)
    make_leader(p, 5, ["A", "B"], now=0.0)
    remote = p.remotes["B"]
    assert (remote.last_caught_up_ms, remote.leo) == (0.0, None)
    fetch(p, "B", 3, now=500.0)
    assert (remote.last_caught_up_ms, remote.leo) == (0.0, 3)
    fetch(p, "B", 6, now=1000.0)
    assert (remote.last_caught_up_ms, remote.leo) == (1000.0, 6)


def isr_expansion(protocol: str) -> None:
    """10 records; A leads epoch 5 with ISR {A}. B at 3: no change. B at 10: one
    AlterIsr {A, B}; ISR still {A}, maximal {A, B}; completed: ISR {A, B}."""
    p = leader_with_log(protocol, [4] * 10)
    make_leader(p, 5, ["A"])
    assert set(p.isr) == {"A"}
    assert proposals(fetch(p, "B", 3)) == [] and set(p.isr) == {"A"}
    assert p.remotes["B"].leo == 3
    effects = fetch(p, "B", 10)
    assert proposals(effects) == [("A", "B")]
    assert set(p.isr) == {"A"} and maximal_isr(p) == {"A", "B"}
    complete(p, effects)
    assert set(p.isr) == {"A", "B"}


def isr_not_expanded_if_update_fails(protocol: str) -> None:
    """10 records; A leads epoch 5 with ISR {A}; B at 10: AlterIsr {A, B} sent,
    then refused with INVALID_UPDATE_VERSION: ISR {A}, maximal ISR {A, B}."""
    p = leader_with_log(protocol, [4] * 10)
    make_leader(p, 5, ["A"])
    assert proposals(fetch(p, "B", 10)) == [("A", "B")]
    assert set(p.isr) == {"A"} and maximal_isr(p) == {"A", "B"}
    p.isr_proposal_failed("INVALID_UPDATE_VERSION")
    assert set(p.isr) == {"A"}
    assert maximal_isr(p) == {"A", "B"}, "the pending expansion stays"


def isr_not_shrunk_if_update_fails(protocol: str) -> None:
    """10 records; A leads epoch 5 with ISR {A, B}; B never fetches. After the lag
    time a shrink to {A} is sent, then refused: still a pending shrink, ISR {A, B},
    no new request, HW 0."""
    p = leader_with_log(protocol, [4] * 10)
    make_leader(p, 5, ["A", "B"], now=0.0)
    assert p.hw == 0
    lag = p.config.replica_lag_time_max_ms
    assert proposals(p.tick(lag + 1)) == [("A",)]
    p.isr_proposal_failed("INVALID_UPDATE_VERSION")
    assert set(p.isr) == {"A", "B"} and p.hw == 0
    assert p.pending_isr == ("A",), "Kafka: isrState is still PendingShrinkIsr"


def maybe_shrink_isr(protocol: str, followers: tuple[str, ...], caught_up: tuple[str, ...],
                     hw_after: int) -> None:
    """10 records; A leads epoch 5 with every follower in the ISR; those in
    `caught_up` fetch at the LEO at t=0. No shrink at t=0; at lag + 1 ms a shrink to
    A and the caught-up ones is sent; until it completes the ISR and maximal ISR
    keep everyone and the HW stays 0; once completed the HW is `hw_after`."""
    p = leader_with_log(protocol, [4] * 10, replicas=("A", *followers))
    make_leader(p, 5, ["A", *followers], now=0.0)
    assert p.hw == 0
    for f in caught_up:
        fetch(p, f, 10, now=0.0)
    assert proposals(p.tick(0.0)) == [], "on initialization the replicas are caught up"
    lag = p.config.replica_lag_time_max_ms
    effects = p.tick(lag + 1)
    assert proposals(effects) == [("A", *caught_up)]
    assert set(p.isr) == {"A", *followers} and maximal_isr(p) == {"A", *followers}
    assert p.hw == 0
    complete(p, effects)
    assert set(p.isr) == {"A", *caught_up}
    assert p.hw == hw_after


def should_not_shrink_isr_if_previous_fetch_is_caught_up(protocol: str) -> None:
    """10 records; A leads epoch 5 with ISR {A, B} at t=0. B fetches at 5 at t=5000
    (caught-up time stays 0; HW 5). Five records are appended; B fetches at 10 (the
    LEO of its previous fetch) at t=10001: caught up as of t=5000; HW 10. No shrink."""
    p = leader_with_log(protocol, [4] * 10)
    make_leader(p, 5, ["A", "B"], now=0.0)
    assert p.hw == 0
    remote = p.remotes["B"]
    fetch(p, "B", 5, now=5000.0)
    assert (remote.last_caught_up_ms, remote.leo, p.hw) == (0.0, 5, 5)
    p.append_batch_as_leader([10, 11, 12, 13, 14], 1, 10_001.0)
    fetch(p, "B", 10, now=10_001.0)
    assert (remote.last_caught_up_ms, remote.leo, p.hw) == (5000.0, 10, 10)
    assert proposals(p.tick(10_001.0)) == []
    assert set(p.isr) == {"A", "B"}


def should_not_shrink_isr_if_follower_caught_up_to_log_end(protocol: str) -> None:
    """KAFKA-7152. 10 records; A leads epoch 5 with ISR {A, B}; B fetches at 10 at
    t=0 (HW 10). 30001 ms later (past the 30 s lag time) B is still in the ISR:
    it is at the leader's LEO."""
    p = leader_with_log(protocol, [4] * 10)
    make_leader(p, 5, ["A", "B"], now=0.0)
    fetch(p, "B", 10, now=0.0)
    assert (p.remotes["B"].last_caught_up_ms, p.hw) == (0.0, 10)
    assert p.config.replica_lag_time_max_ms == 30_000, "Kafka's default from 2.5"
    assert proposals(p.tick(30_001.0)) == []
    assert set(p.isr) == {"A", "B"}


def hw_does_not_advance_under_min_isr(protocol: str) -> None:
    """KAFKA-15583. min.insync.replicas 3; 10 records; A leads epoch 5 with ISR {A,
    B} of {A, B, C}: HW 0. B at 10: HW 0. C at 10: an expansion to 3 is pending
    (maximal ISR 3) but the HW stays 0; once it completes the HW is the LEO."""
    p = leader_with_log(protocol, [4] * 10, replicas=("A", "B", "C"), min_insync_replicas=3)
    make_leader(p, 5, ["A", "B"])
    assert p.hw == 0
    fetch(p, "B", 10)
    assert p.hw == 0
    effects = fetch(p, "C", 10)
    assert p.hw == 0
    assert len(maximal_isr(p)) == 3 and len(proposals(effects)) == 1
    complete(p, effects)
    assert p.hw == p.log.leo == 10


Scenario = Callable[..., None]

CASES = [
    *[case(r("testMakeLeaderUpdatesEpochCache", tag), make_leader_updates_epoch_cache, {})
      for tag in ("2.1.0", "2.7.0", "3.7.0")],
    *[case(r("testMakeFollowerWithNoLeaderIdChange", tag),
           make_follower_with_no_leader_id_change, {})
      for tag in ("2.1.0", "2.7.0", "3.7.0")],
    case(r("testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch", "2.1.0"),
         follower_does_not_join_isr_until_caught_up, {"committed_at_once": True}),
    *[case(r("testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch", tag),
           follower_does_not_join_isr_until_caught_up, {"committed_at_once": False})
      for tag in ("2.7.0", "3.7.0")],
    *[case(r("testUpdateFollowerFetchState", tag), update_follower_fetch_state, {})
      for tag in ("2.7.0", "3.7.0")],
    *[case(r("testIsrExpansion", tag), isr_expansion, {}) for tag in ("2.7.0", "3.7.0")],
    *[case(r("testIsrNotExpandedIfUpdateFails", tag), isr_not_expanded_if_update_fails, {})
      for tag in ("2.7.0", "3.7.0")],
    case(r("testIsrNotShrunkIfUpdateFails", "2.7.0"), isr_not_shrunk_if_update_fails, {}),
    # 2.7.0: one follower that never fetches; HW after the shrink: A alone -> its LEO.
    case(r("testMaybeShrinkIsr", "2.7.0"), maybe_shrink_isr,
         {"followers": ("B",), "caught_up": (), "hw_after": 10}),
    # 3.7.0: B fetches at the LEO, C never does; after the shrink {A, B}: HW 10.
    case(r("testMaybeShrinkIsr", "3.7.0"), maybe_shrink_isr,
         {"followers": ("B", "C"), "caught_up": ("B",), "hw_after": 10}),
    *[case(r("testShouldNotShrinkIsrIfPreviousFetchIsCaughtUp", tag),
           should_not_shrink_isr_if_previous_fetch_is_caught_up, {})
      for tag in ("2.7.0", "3.7.0")],
    *[case(r("testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd", tag),
           should_not_shrink_isr_if_follower_caught_up_to_log_end, {})
      for tag in ("2.7.0", "3.7.0")],
    case(r("testHighWatermarkAdvanceShouldNotAdvanceWhenUnderMinISR", "3.7.0"),
         hw_does_not_advance_under_min_isr, {}),
]

NOT_APPLICABLE = [
    *[NotApplicable(r(m, tag), "not applicable: the model's Partition has no isAtMinIsr / "
                    "isUnderMinIsr property (min ISR is checked where it acts: acks=all "
                    "appends, and from 3.7 the HW; those are restated)")
      for m, tag in (("testAtMinIsr", "2.7.0"), ("testAtMinIsr", "3.7.0"),
                     ("testIsUnderMinIsr", "3.7.0"))],
]


@pytest.mark.parametrize("ref,scenario,params", CASES)
def test_partition(ref: Ref, scenario: Scenario, params: dict[str, Any]) -> None:
    scenario(ref.protocol, **params)
