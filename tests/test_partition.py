"""The sans-IO Partition: truncation per protocol version, HW and ISR rules."""

from __future__ import annotations

import pytest
from fetcher_rounds import accept_isr_proposals, fetcher_round

from broker.config import BrokerConfig
from broker.epoch_cache import LeaderEpochCache
from broker.log import Log, Record
from broker.partition import AppendRecords, Event, HaltBroker, Partition, ProposeIsr, TruncateLog

VERSIONS = ["0.10", "0.11", "2.0", "2.1", "2.7", "2.8", "3.7", "4.0", "4.1", "latest"]
# Versions whose followers truncate from the Fetch answer (KAFKA-10554, 2.8).
ON_FETCH = ("2.8", "3.7", "4.0", "4.1", "latest")


def replica(node: str, protocol: str, records=(), hw: int = 0, replicas=("A", "B"),
            **cfg) -> Partition:
    recs = [Record(i, e, v) for i, (e, v) in enumerate(records)]
    cache = LeaderEpochCache()
    if protocol != "0.10":
        for r in recs:
            cache.assign(r.epoch, r.offset)
    config = BrokerConfig.from_dict(cfg, protocol)
    p = Partition("t", 0, node, protocol, config, Log(recs), cache, hw)
    p.replicas = list(replicas)
    return p


def lead(p: Partition, epoch: int, isr, now: float = 0.0, pe: int = 0):
    return p.apply_leader_and_isr(p.node, epoch, list(isr), pe, p.replicas, now)


def follow(p: Partition, leader: str, epoch: int, isr, now: float = 0.0, pe: int = 0):
    return p.apply_leader_and_isr(leader, epoch, list(isr), pe, p.replicas, now)


def sync(follower: Partition, leader: Partition, rounds: int = 20, now: float = 0.0) -> list:
    """Fetcher rounds until the follower has caught up (or `rounds` pass)."""
    effects = []
    caught_up = False
    for _ in range(rounds):
        r = fetcher_round(follower, leader, now)
        effects += r["follower_effects"]
        accept_isr_proposals(leader, r["leader_effects"], now)
        if caught_up:
            break  # one more round after catching up: that fetch is what rejoins the ISR
        caught_up = (follower.follower_state == "fetching"
                     and follower.log.leo == leader.log.leo and follower.hw == leader.hw)
    return effects


def values(p: Partition) -> list[int]:
    return [r.value for r in p.log.records]


def truncations(effects) -> list[tuple[int, int, str]]:
    return [(e.fields["from"], e.fields["to"], e.fields["reason"])
            for e in effects if isinstance(e, Event) and e.type == "truncate"]


# -- scenario 1 (KIP-101 loss): a restarted follower's first step ----------------------

@pytest.mark.parametrize("protocol", VERSIONS)
def test_restarted_follower_truncation_step(protocol):
    """B holds m0, m1 but its HW checkpoint says 1; A (leader) cannot answer."""
    b = replica("B", protocol, [(0, "m0"), (0, "m1")], hw=1)
    effects = follow(b, "A", 0, ["A", "B"])
    if protocol == "0.10":
        assert values(b) == ["m0"], "0.10 truncates to its HW before asking anyone"
        assert TruncateLog(1) in effects
    else:
        assert values(b) == ["m0", "m1"], "KIP-101: no truncation without the leader's answer"
        assert not any(isinstance(e, TruncateLog) for e in effects)
        req = b.next_follower_request()
        kind = "replica-fetch" if protocol in ON_FETCH else "offsets-for-leader-epoch"
        assert req["type"] == kind


# -- scenario 2 (KIP-101 divergence) -----------------------------------------------------

@pytest.mark.parametrize("protocol", VERSIONS)
def test_old_leader_rejoins_after_power_loss_election(protocol):
    """A: [m0, m1] epoch 0, HW 2. B lost m1 to a power cut, led epoch 1 and wrote m2."""
    b = replica("B", protocol, [(0, "m0")], hw=1)
    lead(b, 1, ["B"])
    assert b.append_as_leader("m2", "all", 0)[1] == 1
    a = replica("A", protocol, [(0, "m0"), (0, "m1")], hw=2)
    follow(a, "B", 1, ["B"])
    effects = sync(a, b)
    if protocol == "0.10":
        assert values(a) == ["m0", "m1"], "0.10: HW 2 keeps m1 -> divergence at offset 1"
        assert values(b) == ["m0", "m2"]
    else:
        assert values(a) == ["m0", "m2"]
        assert truncations(effects)[0][1] == 1


# -- scenario 3 (KIP-279): multi-round truncation ------------------------------------------

def unclean_history(protocol: str) -> tuple[Partition, Partition]:
    """Logs after the unclean-election dance of Kafka's KAFKA-6361 test.

    A: r0@e0 r2@e2 r3@e2 r4@e2 r6@e4 r7@e4 (leader, epoch 4)
    B: r0@e0 r1@e1 r5@e3                   (restarting, epoch 3)
    """
    a = replica("A", protocol, [(0, "r0"), (2, "r2"), (2, "r3"), (2, "r4"), (4, "r6"), (4, "r7")],
                hw=6)
    b = replica("B", protocol, [(0, "r0"), (1, "r1"), (3, "r5")], hw=3)
    lead(a, 4, ["A"])
    follow(b, "A", 4, ["A"])
    return a, b


@pytest.mark.parametrize("protocol", ["0.11"])
def test_kip101_answer_leaves_divergent_logs(protocol):
    a, b = unclean_history(protocol)
    first = b.next_follower_request()
    assert first["leader_epoch_request"] == 3
    resp, _ = a.offsets_for_leader_epoch(3, None)
    assert resp["end_offset"] == 4, "start offset of epoch 4, the first epoch after 3"
    sync(b, a)
    assert values(b) == ["r0", "r1", "r5", "r4", "r6", "r7"]
    assert values(a) == ["r0", "r2", "r3", "r4", "r6", "r7"]


def test_kip279_truncates_in_rounds():
    a, b = unclean_history("2.0")
    rounds = []
    while b.follower_state == "truncating":
        r = fetcher_round(b, a)
        rounds.append((r["request"]["leader_epoch_request"],
                       (r["response"]["leader_epoch"], r["response"]["end_offset"]), b.log.leo))
    assert rounds == [
        (3, (2, 4), 2),   # A never saw epoch 3; B cuts back to where its epoch 1 ends
        (1, (0, 1), 1),   # A never saw epoch 1 either; epoch 0 ends at 1 on both
    ]
    sync(b, a)
    assert values(b) == values(a)


def test_latest_truncates_via_diverging_epoch_on_fetch():
    a, b = unclean_history("latest")
    assert b.next_follower_request()["type"] == "replica-fetch"
    effects = sync(b, a)
    assert [t[1] for t in truncations(effects)] == [2, 1]
    assert values(b) == values(a)


# -- OffsetsForLeaderEpoch served by the leader ------------------------------------------

@pytest.mark.parametrize("protocol,epoch,answer", [
    ("0.11", 4, (-1, 6)),
    ("0.11", 1, (-1, 1)),
    ("2.0", 3, (2, 4)),
    ("2.0", 4, (4, 6)),
    ("latest", 1, (0, 1)),
])
def test_offsets_for_leader_epoch_answers(protocol, epoch, answer):
    a, _ = unclean_history(protocol)
    resp, _ = a.offsets_for_leader_epoch(epoch, None)
    assert (resp["leader_epoch"], resp["end_offset"]) == answer


def test_offsets_for_leader_epoch_not_in_0_10_nor_from_followers():
    a, b = unclean_history("0.11")
    assert b.offsets_for_leader_epoch(0, None)[0]["error"] == "NOT_LEADER_OR_FOLLOWER"
    old = replica("A", "0.10", [(0, 1)])
    lead(old, 0, ["A"])
    assert old.offsets_for_leader_epoch(0, None)[0]["error"] == "INVALID_REQUEST"


@pytest.mark.parametrize("protocol,stamps", [("0.11", [(0, 0), (1, 2)]),
                                             ("latest", [(0, 0), (1, 2), (2, 3)])])
def test_epoch_cache_entries_on_leader(protocol, stamps):
    """0.11 adds (epoch, LEO) on the first append; latest already on becoming leader."""
    a = replica("A", protocol)
    lead(a, 0, ["A"])
    a.append_as_leader(1, 1, 0)
    a.append_as_leader(2, 1, 0)
    lead(a, 1, ["A"])
    a.append_as_leader(3, 1, 0)
    lead(a, 2, ["A"])
    assert a.epoch_cache.entries == stamps
    assert [r.epoch for r in a.log.records] == [0, 0, 1]


# -- HW rules --------------------------------------------------------------------------------

def test_follower_hw_reaches_leader_hw_one_fetch_round_after_the_data():
    a, b = replica("A", "2.0"), replica("B", "2.0")
    lead(a, 0, ["A", "B"])
    follow(b, "A", 0, ["A", "B"])
    a.append_as_leader(7, "all", 0)
    assert a.hw == 0, "leader HW waits for every ISR member"
    fetcher_round(b, a)                      # B gets the record, leader HW still 0
    assert (b.log.leo, b.hw, a.hw) == (1, 0, 0)
    fetcher_round(b, a)                      # B's fetch at 1 moves leader HW after the read
    assert (a.hw, b.hw) == (1, 0), "the answer carries the HW from before this fetch"
    fetcher_round(b, a)                      # one round later B learns it
    assert (a.hw, b.hw) == (1, 1)


def test_delayed_fetch_reread_carries_the_new_hw_without_a_second_update():
    """Kafka 0.10.2.0 ReplicaManager.fetchMessages reads, then
    updateFollowerLogReadResults; DelayedFetch.onComplete reads again and does not
    update the follower's fetch state."""
    a = replica("A", "2.0")
    lead(a, 0, ["A", "B"])
    a.append_as_leader(7, "all", 0)
    resp, _ = a.fetch_for_replica("B", 1, None, None, 10, now=5)
    assert (resp["hw"], a.hw, resp["records"]) == (0, 1, [])
    a.remotes["B"].last_fetch_ms = 5
    again, _ = a.reread_for_replica("B", 1, None, None, 10)
    assert again["hw"] == 1 and a.remotes["B"].last_fetch_ms == 5


def test_follower_hw_is_capped_by_its_own_leo():
    c = replica("C", "0.11", [], replicas=("A", "B", "C"))
    follow(c, "A", 0, ["A", "B"])
    c.on_fetch_response(c.generation, {"error": None, "records": [[0, 0, 1]], "hw": 3}, 0)
    assert c.hw == 1, "leader HW 3, but C holds one record"


def test_leader_hw_never_moves_backwards():
    a = replica("A", "2.0", [(0, 1), (0, 2)], hw=2)
    lead(a, 1, ["A", "B"])
    a.fetch_for_replica("B", 0, None, None, 10, 0)
    assert a.hw == 2


def test_acks_all_waits_for_isr_and_min_isr_errors():
    a = replica("A", "2.0", min_insync_replicas=2)
    lead(a, 0, ["A"])
    err, off, _ = a.append_as_leader(1, "all", 0)
    assert (err, off) == ("NOT_ENOUGH_REPLICAS", None)
    assert a.append_as_leader(1, 1, 0)[0] is None, "acks=1 ignores min.insync.replicas"
    lead(a, 0, ["A", "B"], pe=1)
    err, off, effects = a.append_as_leader(2, "all", 0)
    assert err is None and any(isinstance(e, AppendRecords) for e in effects)
    assert a.produce_outcome(off, 0) is None
    a.fetch_for_replica("B", 2, None, None, 10, 0)
    assert a.produce_outcome(off, 0) == "ok"
    err, off, _ = a.append_as_leader(3, "all", 0)
    lead(a, 0, ["A"], pe=2)                 # ISR shrank after the append
    assert a.produce_outcome(off, 0) == "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    lead(a, 1, ["A"], pe=3)                 # a new epoch of the same leader: it still leads
    assert a.produce_outcome(off, 0) == "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    follow(a, "B", 2, ["B"], pe=4)
    assert a.produce_outcome(off, 0) == "NOT_LEADER_OR_FOLLOWER"


def test_latest_hw_frozen_while_isr_below_min_isr():
    for protocol, moves in (("2.0", True), ("latest", False)):
        a = replica("A", protocol, min_insync_replicas=2)
        lead(a, 0, ["A"])
        a.append_as_leader(1, 1, 0)
        assert (a.hw == 1) is moves, protocol


# -- ISR rules --------------------------------------------------------------------------------

def test_isr_shrinks_after_lag_time_and_expands_when_caught_up():
    a = replica("A", "2.0", replica_lag_time_max_ms=500)
    b = replica("B", "2.0")
    lead(a, 0, ["A", "B"], now=0)
    follow(b, "A", 0, ["A", "B"])
    a.append_as_leader(1, 1, 0)
    assert a.tick(400) == []
    effects = a.tick(600)
    assert ProposeIsr(("A",), 0, 0) in effects
    accept_isr_proposals(a, effects, 600)
    assert a.isr == ["A"] and a.hw == 1
    r = fetcher_round(b, a, now=700)
    assert any(isinstance(e, ProposeIsr) for e in r["leader_effects"]) is False, \
        "B fetched at 0 < HW 1: not caught up yet"
    r = fetcher_round(b, a, now=710)
    assert ProposeIsr(("A", "B"), 0, 1) in r["leader_effects"]


@pytest.mark.parametrize("protocol", VERSIONS)
def test_isr_check_runs_every_half_lag_time(protocol):
    """Kafka 0.10.2.0 ReplicaManager.startup (KAFKA-4485): the isr-expiration task
    runs every replica.lag.time.max.ms / 2, so a follower out of sync since 1000 ms
    leaves at the next check (1500 ms), not at the next tick."""
    a = replica("A", protocol, replica_lag_time_max_ms=1000)
    lead(a, 0, ["A", "B"], now=0)          # B's lag window starts at the election
    a.append_as_leader(1, 1, 0)
    assert a.tick(1000) == [], "the check at 1000 ms: 1000 ms is not more than the lag"
    assert a.tick(1400) == [], "B is out of sync, but no check is due before 1500 ms"
    assert ProposeIsr(("A",), 0, 0) in a.tick(1500)


def test_latest_isr_join_waits_for_current_epoch_start():
    """KAFKA-7128: a follower at the HW but short of the epoch's start stays out."""
    for protocol, joins in (("2.0", True), ("latest", False)):
        a = replica("A", protocol, [(0, 1), (0, 2)], hw=1, replicas=("A", "B", "C"))
        lead(a, 1, ["A", "C"])     # C has not fetched: HW stays 1; epoch 1 starts at 2
        _, effects = a.fetch_for_replica("B", 1, 0, 1 if protocol == "latest" else None, 10, 0)
        assert any(isinstance(e, ProposeIsr) for e in effects) is joins, protocol


def test_legacy_lag_max_messages_flaps_on_bursts():
    a = replica("A", "0.10", replica_lag_max_messages=4, replica_lag_time_max_ms=10_000)
    b = replica("B", "0.10")
    lead(a, 0, ["A", "B"])
    follow(b, "A", 0, ["A", "B"])
    fetcher_round(b, a)
    for v in range(6):
        a.append_as_leader(v, 1, 0)
    effects = a.tick(10)
    assert ProposeIsr(("A",), 0, 0) in effects, "6 messages behind > 4"
    accept_isr_proposals(a, effects)
    sync(b, a)
    assert a.isr == ["A", "B"], "caught up again -> back in the ISR"


def test_legacy_lag_max_messages_rejoin_needs_only_the_hw():
    """Kafka 0.8.2.2 Partition.updateLeaderHWAndMaybeExpandIsr: a follower is taken
    back once its LEO reaches the HW, however far it trails the leader's LEO; only
    the next shrink check (getOutOfSyncReplicas) applies replica.lag.max.messages."""
    a = replica("A", "0.10", replicas=("A", "B", "C"), replica_lag_max_messages=4,
                replica_lag_time_max_ms=10_000)
    lead(a, 0, ["A", "B", "C"])
    for v in range(12):
        a.append_as_leader(v, 1, 0)
    a.fetch_for_replica("B", 6, None, None, 10, now=0)
    a.fetch_for_replica("C", 8, None, None, 10, now=0)
    effects = a.tick(0)
    assert ProposeIsr(("A", "C"), 0, 0) in effects, "B 6 behind > 4; C 4 behind stays"
    accept_isr_proposals(a, effects)
    assert a.hw == 8
    for v in range(4):
        a.append_as_leader(v, 1, 0)
    _, effects = a.fetch_for_replica("B", 8, None, None, 10, now=0)
    assert ProposeIsr(("A", "C", "B"), 0, 1) in effects, "B at the HW, 8 behind the LEO"


def test_kip320_fencing_on_fetch():
    a = replica("A", "latest", [(0, 1)])
    lead(a, 3, ["A", "B"])
    resp, effects = a.fetch_for_replica("B", 1, 0, 2, 10, 0)
    assert resp["error"] == "FENCED_LEADER_EPOCH"
    assert any(isinstance(e, Event) and e.type == "fetch-fenced" for e in effects)
    assert a.fetch_for_replica("B", 1, 0, 4, 10, 0)[0]["error"] == "UNKNOWN_LEADER_EPOCH"
    older = replica("A", "2.0", [(0, 1)])
    lead(older, 3, ["A", "B"])
    assert older.fetch_for_replica("B", 1, 0, 2, 10, 0)[0]["error"] is None


def test_offset_out_of_range_truncates_follower_to_leader_leo():
    """0.10.2.0 ReplicaFetcherThread.handleOffsetOutOfRange with unclean election on."""
    a = replica("A", "0.10", [(1, 1)], hw=1, unclean_leader_election_enable=True)
    lead(a, 1, ["A", "B"])
    b = replica("B", "0.10", [(0, 1), (0, 2)], hw=2, unclean_leader_election_enable=True)
    follow(b, "A", 1, ["A", "B"])
    effects = sync(b, a)
    assert values(b) == [1]
    assert truncations(effects)[-1] == (2, 1, "offset-out-of-range")


def test_stale_answers_are_ignored_after_a_role_change():
    a, b = unclean_history("2.0")
    req = b.next_follower_request()
    follow(b, "C", 5, ["C"])
    resp, _ = a.offsets_for_leader_epoch(req["leader_epoch_request"], None)
    assert b.on_offsets_for_leader_epoch_response(req["generation"], resp, 0) == []
    assert b.log.leo == 3


# -- what a truncate event tells a report ----------------------------------------------

def truncate_events(effects) -> list[dict]:
    return [e.fields for e in effects if isinstance(e, Event) and e.type == "truncate"]


def test_truncate_event_lists_removed_records_and_rule():
    """0.10: B restarts with HW checkpoint 1 over [m0, m1]: the HW rule removes m1."""
    b = replica("B", "0.10", [(0, "m0"), (0, "m1")], hw=1)
    (ev,) = truncate_events(follow(b, "A", 0, ["A", "B"]))
    assert (ev["from"], ev["to"], ev["rule"], ev["reason"]) == (2, 1, "hw", "high-watermark")
    assert ev["removed"] == [[1, 0, "m1"]] and ev["removed_count"] == 1
    assert ev["leader_epoch"] == 0 and ev["topic"] == "t" and ev["partition"] == 0
    # Nothing to remove: still an event, with an empty list.
    (again,) = truncate_events(follow(b, "C", 1, ["C", "B"]))
    assert (again["from"], again["to"], again["removed"], again["removed_count"]) == \
        (1, 1, [], 0)


def test_truncate_event_caps_the_removed_list():
    from broker.partition import MAX_TRUNCATED_LISTED

    n = MAX_TRUNCATED_LISTED + 7
    b = replica("B", "0.10", [(0, v) for v in range(n + 1)], hw=1)
    (ev,) = truncate_events(follow(b, "A", 0, ["A", "B"]))
    assert ev["removed_count"] == n
    assert ev["removed"] == [[o, 0, o] for o in range(1, MAX_TRUNCATED_LISTED + 1)]


@pytest.mark.parametrize(("protocol", "rule"), [
    ("0.11", "offsets_for_leader_epoch"),
    ("2.0", "offsets_for_leader_epoch"),
    ("latest", "diverging_epoch"),
])
def test_truncate_event_rule_per_protocol(protocol, rule):
    """A led epoch 1 from offset 1 (m2); B still holds m1 of epoch 0 there."""
    a = replica("A", protocol, [(0, "m0"), (1, "m2")], hw=2)
    lead(a, 1, ["A"])
    b = replica("B", protocol, [(0, "m0"), (0, "m1")], hw=1)
    follow(b, "A", 1, ["A"])
    events = [e for e in truncate_events(sync(b, a)) if e["removed_count"]]
    assert [(e["rule"], e["from"], e["to"], e["removed"]) for e in events] == \
        [(rule, 2, 1, [[1, 0, "m1"]])]
    assert values(b) == values(a)


def test_kip279_rounds_each_list_what_they_removed():
    a, b = unclean_history("2.0")
    events = [e for e in truncate_events(sync(b, a)) if e["removed_count"]]
    assert [(e["rule"], e["reason"], e["removed"]) for e in events] == [
        ("offsets_for_leader_epoch", "leader-epoch-iteration", [[2, 3, "r5"]]),
        ("offsets_for_leader_epoch", "leader-epoch", [[1, 1, "r1"]]),
    ]


def test_offset_out_of_range_truncate_event_rule():
    a = replica("A", "0.10", [(1, 1)], hw=1, unclean_leader_election_enable=True)
    lead(a, 1, ["A", "B"])
    b = replica("B", "0.10", [(0, 1), (0, 2)], hw=2, unclean_leader_election_enable=True)
    follow(b, "A", 1, ["A", "B"])
    ev = truncate_events(sync(b, a))[-1]
    assert (ev["rule"], ev["removed"], ev["removed_count"]) == \
        ("offset_out_of_range", [[1, 0, 2]], 1)


# -- ZooKeeper-era controller metadata: a leader of -1, a new epoch of the same leader ---

ZOOKEEPER = ("0.10", "0.11", "2.0", "2.1", "2.7", "2.8")


@pytest.mark.parametrize("protocol", VERSIONS)
def test_zookeeper_follower_keeps_its_leader_when_told_of_no_leader(protocol):
    """0.10.2.0-2.8.0 ReplicaManager.makeFollowers: the new leader (-1) is not among
    the live brokers, so the follower logs "cannot become follower since the new
    leader -1 is unavailable" and keeps its leader, epoch and fetcher. 3.7.0
    ReplicaManager.applyLocalFollowersDelta calls makeFollower with no leader and
    removes the fetcher."""
    b = replica("B", protocol, [(0, "m0")], hw=1)
    follow(b, "A", 0, ["A", "B"])
    b.apply_leader_and_isr(None, 1, ["A"], 1, ["A", "B"], 0)
    if protocol in ZOOKEEPER:
        assert (b.role, b.leader, b.leader_epoch, b.isr) == ("follower", "A", 0, ["A", "B"])
        assert b.next_follower_request() is not None, "its fetcher goes on"
    else:
        assert (b.role, b.leader, b.leader_epoch) == ("none", None, 1)
        assert b.next_follower_request() is None


@pytest.mark.parametrize("protocol,unclean", [
    ("0.10", False), ("0.11", False), ("2.0", False), ("0.10", True)])
def test_follower_of_a_returning_leader_meets_its_shorter_log(protocol, unclean):
    """Up to 2.0 a follower that ignored leader -1 (ReplicaManager.makeFollowers) sees
    its leader come back in a new epoch; the leader did not change, so
    Partition.makeFollower returns false (no truncation, before KAFKA-7164) and the
    fetcher goes on. The leader lost m1 (LEO 1 < 2): OFFSET_OUT_OF_RANGE, and
    ReplicaFetcherThread.handleOffsetOutOfRange halts the broker (unclean election
    off) or truncates to the leader's LEO (on)."""
    cfg = {"unclean_leader_election_enable": unclean}
    a = replica("A", protocol, [(0, "m0"), (0, "m1")], hw=2, **cfg)
    lead(a, 0, ["A", "B"])
    b = replica("B", protocol, **cfg)
    follow(b, "A", 0, ["A", "B"])
    sync(b, a)
    assert values(b) == ["m0", "m1"]
    b.apply_leader_and_isr(None, 1, ["A"], 1, ["A", "B"], 0)       # A goes offline
    a = replica("A", protocol, [(0, "m0")], hw=1, **cfg)            # A back without m1
    lead(a, 2, ["A"], pe=2)
    assert not truncations(follow(b, "A", 2, ["A"], pe=2)), "same leader: no truncation"
    assert b.leader_epoch == 2
    r = fetcher_round(b, a)
    assert r["response"]["error"] == "OFFSET_OUT_OF_RANGE"
    if unclean:
        assert values(b) == ["m0"]
        assert truncations(r["follower_effects"]) == [(2, 1, "offset-out-of-range")]
    else:
        assert any(isinstance(e, HaltBroker) for e in r["follower_effects"])
        assert values(b) == ["m0", "m1"]


@pytest.mark.parametrize("protocol", VERSIONS)
def test_leader_keeps_leading_through_a_new_epoch_of_its_own(protocol):
    """Partition.makeLeader when the replica already leads (0.10.2.0 / 2.1.0: isNewLeader
    false): the followers' LEOs stay known, their caught-up times restart, and a
    delayed produce keeps waiting (DelayedProduce: checkEnoughReplicasReachOffset asks
    only whether the replica leads). The epoch enters the cache at once from 2.1
    (KAFKA-7415: epochCache.assign on every makeLeader), at the next append in
    0.11-2.0 (Log.append), never in 0.10. KIP-320 (2.1) then fences the old epoch."""
    a = replica("A", protocol, [(0, 1)], hw=1, replicas=("A", "B", "C"))
    lead(a, 0, ["A", "B", "C"])
    a.fetch_for_replica("B", 1, None, None, 10, 0)
    a.fetch_for_replica("C", 1, None, None, 10, 0)
    err, off, _ = a.append_as_leader(2, "all", 0)
    effects = lead(a, 1, ["A", "B"], now=5, pe=1)              # the controller dropped C
    assert (a.role, a.leader_epoch, a.remotes["B"].leo) == ("leader", 1, 1)
    assert a.remotes["B"].last_caught_up_ms == 5
    kinds = [e.type for e in effects if isinstance(e, Event)]
    assert "became-leader" not in kinds and "isr-shrink" in kinds
    assert a.produce_outcome(off, 0) is None, "the delayed produce still waits for B"
    a.fetch_for_replica("B", 2, None, 1, 10, 6)
    assert a.produce_outcome(off, 0) == "ok"
    epochs = [e for e, _ in a.epoch_cache.entries]
    assert epochs == ([] if protocol == "0.10" else [0] if protocol in ("0.11", "2.0")
                      else [0, 1])
    a.append_as_leader(3, 1, 7)
    assert [e for e, _ in a.epoch_cache.entries] == ([] if protocol == "0.10" else [0, 1])
    stale = a.fetch_for_replica("B", 3, None, 0, 10, 8)[0]["error"]
    assert stale == (None if protocol in ("0.10", "0.11", "2.0") else "FENCED_LEADER_EPOCH")


@pytest.mark.parametrize("protocol", ["2.8", "latest"])
def test_leader_counts_a_followers_leo_only_past_divergence(protocol):
    """The final read's convergence (harness/run/execute.py) reads the leader's view:
    a follower back from a power loss holds m1 where the new leader wrote m2 (same
    LEO, 2). With truncation on fetch (KAFKA-10554, 2.8.0) its first fetch is answered
    with the diverging epoch and the leader does not take its LEO from it (Kafka's
    Partition.fetchRecords updates the follower's state only without divergence);
    only after truncating and fetching m2 is its LEO the leader's, and then its log is."""
    b = replica("B", protocol, [(0, "m0"), (3, "m2")], hw=2)
    a = replica("A", protocol, [(0, "m0"), (0, "m1")], hw=2)
    lead(b, 3, ["B"])
    follow(a, "B", 3, ["B"])
    assert a.status()["leo"] == b.status()["leo"] == 2
    assert b.status()["remote_leo"] == {"A": None}
    r = fetcher_round(a, b)
    assert any(isinstance(e, TruncateLog) for e in r["follower_effects"])
    assert b.status()["remote_leo"] == {"A": None}
    sync(a, b)
    assert values(a) == ["m0", "m2"]
    assert b.status()["remote_leo"] == {"A": 2}
    assert a.status()["remote_leo"] == {}
