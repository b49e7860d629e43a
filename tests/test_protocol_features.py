"""The protocol-feature table (broker/protocol.py): its shape, one test per
feature on the sans-IO core, and no version string anywhere else in the broker.

The per-feature tests keep the protocol version fixed and flip only that one
field of the partition's features, so they show that the feature (not the
version string) is what switches the behaviour. The per-version behaviour is
tested in tests/test_partition.py, whose helpers these tests reuse.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import MISSING, FrozenInstanceError, fields, replace
from pathlib import Path
from typing import get_args, get_type_hints

import pytest
from controller_client import ControllerClient
from fetcher_rounds import fetcher_round
from test_partition import follow, lead, replica, sync, unclean_history, values

from broker.config import ConfigError
from broker.controller_core import ControllerCore
from broker.log import Record
from broker.partition import Event, HaltBroker, Partition, ProposeIsr
from broker.process import load_cluster_config
from broker.producer_state import ProducerBatchHeader, ProducerStateManager
from broker.protocol import FEATURES, PROTOCOLS, Features, features

BROKER = Path(__file__).resolve().parent.parent / "broker"


def controller(protocol: str, min_isr: int = 1) -> ControllerClient:
    c = ControllerClient(ControllerCore(
        [{"name": "t", "partitions": 1, "replicas": [["A", "B", "C"]]}], 1000, False,
        protocol=protocol, min_insync_replicas=min_isr))
    for b in "ABC":
        c.register(b, f"{b}1", 0)
    return c


def toggled(p: Partition, **change) -> Partition:
    """`p` with some of its features changed, everything else as its version's row."""
    p.features = replace(p.features, **change)
    # The producer state takes its rules from the features when it is made.
    p.producer_state = ProducerStateManager.for_features(p.features)
    p.producer_state.rebuild(p.log.records)
    return p


# -- the table ---------------------------------------------------------------------------


def test_every_row_sets_every_field():
    hints = get_type_hints(Features)
    assert all(f.default is MISSING and f.default_factory is MISSING for f in fields(Features)), \
        "no defaults: every row names every feature"
    for version, row in FEATURES.items():
        for f in fields(Features):
            value = getattr(row, f.name)
            allowed = get_args(hints[f.name]) or (True, False)
            assert type(value) is type(allowed[0]) and value in allowed, (version, f.name, value)


def test_protocols_are_the_rows_of_the_table_oldest_first():
    assert PROTOCOLS == tuple(FEATURES) == ("0.10", "0.11", "2.0", "2.1", "2.7", "2.8", "3.7",
                                            "4.0", "4.1", "latest")
    assert FEATURES["latest"] is FEATURES["4.1"], "latest is an alias of the newest release"
    for v in PROTOCOLS:
        assert features(v) is FEATURES[v]
        assert replica("A", v).features is FEATURES[v]


def test_table_and_rows_are_frozen():
    with pytest.raises(TypeError):
        FEATURES["9.9"] = FEATURES["latest"]  # type: ignore[index]
    with pytest.raises(FrozenInstanceError):
        FEATURES["0.10"].leader_epochs = True  # type: ignore[misc]
    with pytest.raises(ValueError, match="truncation"):
        replace(FEATURES["0.10"], truncation="sometimes")
    with pytest.raises(ValueError, match="leader_epochs"):
        replace(FEATURES["0.10"], leader_epochs=1)


@pytest.mark.parametrize("bad", ["3.0", "", None, ["latest"]])
def test_unknown_version_is_a_config_error(bad, tmp_path):
    with pytest.raises(ConfigError, match="unknown protocol version"):
        features(bad)
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"protocol": bad, "brokers": {}, "topics": []}))
    with pytest.raises(ConfigError, match="unknown protocol version"):
        load_cluster_config(path)
    if isinstance(bad, str):
        with pytest.raises(ConfigError):
            replica("A", bad)


def test_every_feature_has_a_test_here():
    here = sys.modules[__name__]
    missing = [f.name for f in fields(Features) if not hasattr(here, f"test_feature_{f.name}")]
    assert missing == []


# -- one test per feature ----------------------------------------------------------------


@pytest.mark.parametrize("on", [True, False])
def test_feature_leader_epochs(on):
    """Kafka 0.11, KIP-101: the leader adds (epoch, start offset) to its epoch cache
    on its first append in an epoch, a follower on its first record of a newer epoch;
    without the rule both caches stay empty."""
    a = toggled(replica("A", "0.11"), leader_epochs=on)
    b = toggled(replica("B", "0.11"), leader_epochs=on)
    lead(a, 0, ["A"])
    a.append_as_leader(1, 1, 0)
    follow(b, "A", 0, ["A"])
    fetcher_round(b, a)
    assert values(b) == [1]
    assert a.epoch_cache.entries == b.epoch_cache.entries == ([(0, 0)] if on else [])


@pytest.mark.parametrize("truncation,log,state,first", [
    ("hw", ["m0"], "fetching", ("replica-fetch", None)),
    ("offsets_for_leader_epoch", ["m0", "m1"], "truncating", ("offsets-for-leader-epoch", 0)),
    ("diverging_epoch", ["m0", "m1"], "fetching", ("replica-fetch", 0)),
])
def test_feature_truncation(truncation, log, state, first):
    """How a replica that starts following finds its truncation point: Kafka 0.10
    truncates to its HW; 0.11 (KIP-101) asks OffsetsForLeaderEpoch first; 2.8
    (KAFKA-10554) fetches at once, sending its last fetched epoch."""
    b = toggled(replica("B", "2.0", [(0, "m0"), (0, "m1")], hw=1), truncation=truncation)
    follow(b, "A", 0, ["A", "B"])
    assert (values(b), b.follower_state) == (log, state)
    req = b.next_follower_request()
    epoch = req["leader_epoch_request"] if req["type"] == "offsets-for-leader-epoch" \
        else req["last_fetched_epoch"]
    assert (req["type"], epoch) == first


@pytest.mark.parametrize("on", [True, False])
def test_feature_truncation_on_fetch_leader_side(on):
    """Kafka 2.8.0, KAFKA-10554: a leader checks a fetch's last fetched epoch and, if
    the follower's log diverges, answers with the diverging epoch and where it ends
    instead of records; before, the fetch offset alone decides."""
    a, _ = unclean_history("2.0")
    if on:
        toggled(a, truncation="diverging_epoch")
    resp, _ = a.fetch_for_replica("B", 3, 3, None, 10, 0)   # B: r0@0 r1@1 r5@3
    if on:
        assert resp["records"] == [] and resp["diverging_epoch"] == {"epoch": 2, "end_offset": 4}
    else:
        assert "diverging_epoch" not in resp and [r[0] for r in resp["records"]] == [3, 4, 5]


@pytest.mark.parametrize("answer,expected", [
    ("none", ("INVALID_REQUEST", None, None)),
    ("kip101", (None, -1, 4)),
    ("kip279", (None, 2, 4)),
])
def test_feature_epoch_answer(answer, expected):
    """How a leader answers OffsetsForLeaderEpoch(3) when it never led epoch 3:
    Kafka 0.10 has no such request; 0.11 (KIP-101) answers the start of the next
    epoch, without an epoch; 2.0 (KIP-279) the largest epoch <= 3 and its end."""
    a, _ = unclean_history("2.0")
    resp, _ = toggled(a, epoch_answer=answer).offsets_for_leader_epoch(3, None)
    assert (resp["error"], resp.get("leader_epoch"), resp.get("end_offset")) == expected


@pytest.mark.parametrize("on", [True, False])
def test_feature_epoch_iteration(on):
    """Kafka 2.0, KIP-279: a follower compares the leader's answer with its own
    epochs and asks again about an older epoch while they differ; with 0.11's
    single answer B keeps r1 and r5 and its log forks from the leader's."""
    a, b = unclean_history("2.0")
    toggled(b, epoch_iteration=on)
    fetcher_round(b, a)                       # asks about epoch 3, A answers (2, 4)
    if on:
        assert (b.log.leo, b.follower_state) == (2, "truncating")
        assert b.next_follower_request()["leader_epoch_request"] == 1
        sync(b, a)
        assert values(b) == values(a)
    else:
        assert (b.log.leo, b.follower_state) == (3, "fetching")
        sync(b, a)
        assert values(b) == ["r0", "r1", "r5", "r4", "r6", "r7"] != values(a)


@pytest.mark.parametrize("on", [True, False])
def test_feature_leader_epoch_fencing(on):
    """Kafka 2.1, KIP-320: a follower's requests carry its current leader epoch and
    the leader refuses an older one (FENCED_LEADER_EPOCH) or a newer one
    (UNKNOWN_LEADER_EPOCH). Shown here on OffsetsForLeaderEpoch and the follower's
    request; test_partition.test_kip320_fencing_on_fetch covers Fetch."""
    a, b = unclean_history("2.0")
    toggled(a, leader_epoch_fencing=on)
    toggled(b, leader_epoch_fencing=on)
    assert b.next_follower_request().get("current_leader_epoch") == (4 if on else None)
    stale, effects = a.offsets_for_leader_epoch(3, 3)
    newer, _ = a.offsets_for_leader_epoch(3, 5)
    if on:
        assert (stale["error"], newer["error"]) == ("FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH")
        assert any(isinstance(e, Event) and e.type == "fetch-fenced" for e in effects)
    else:
        assert (stale["error"], newer["error"]) == (None, None)


@pytest.mark.parametrize("on", [True, False])
def test_feature_epoch_on_become_leader(on):
    """Kafka 2.1, KAFKA-7415: a new leader adds (its epoch, its LEO) to the epoch
    cache at once, so before its first append it already answers
    OffsetsForLeaderEpoch about its own epoch; before, epoch 1 is unknown to it."""
    a = toggled(replica("A", "2.0", [(0, "m0")], hw=1), epoch_on_become_leader=on)
    lead(a, 1, ["A"])
    assert a.epoch_cache.entries == ([(0, 0), (1, 1)] if on else [(0, 0)])
    resp, _ = a.offsets_for_leader_epoch(1, None)
    # Off, 2.0's cache answers (-1, -1) for an epoch above its latest: KAFKA-7415.
    assert (resp["leader_epoch"], resp["end_offset"]) == ((1, 1) if on else (-1, -1))


@pytest.mark.parametrize("on", [True, False])
def test_feature_isr_join_waits_for_epoch_start(on):
    """Kafka 2.1, KAFKA-7128: a follower that reached the HW but not the start of
    the leader's current epoch stays out of the ISR; before, the HW was enough."""
    a = replica("A", "2.0", [(0, 1), (0, 2)], hw=1, replicas=("A", "B", "C"))
    toggled(a, isr_join_waits_for_epoch_start=on)
    lead(a, 1, ["A", "C"])          # C never fetches: the HW stays 1
    a.append_as_leader(3, 1, 0)     # epoch 1 starts at offset 2
    assert (a.hw, a.epoch_cache.start_offset_of(1)) == (1, 2)
    _, effects = a.fetch_for_replica("B", 1, None, None, 10, 0)
    assert any(isinstance(e, ProposeIsr) for e in effects) is not on


@pytest.mark.parametrize("on", [True, False])
def test_feature_hw_frozen_below_min_isr(on):
    """Kafka 3.7, KAFKA-15583: while the ISR is smaller than min.insync.replicas
    the leader's HW does not move; before, an acks=1 write was committed by the
    leader alone."""
    a = toggled(replica("A", "latest", min_insync_replicas=2), hw_frozen_below_min_isr=on)
    lead(a, 0, ["A"])
    a.append_as_leader(1, 1, 0)
    assert a.hw == (0 if on else 1)
    lead(a, 0, ["A", "B"], pe=1)
    a.fetch_for_replica("B", 1, 0, 0, 10, 0)
    assert a.hw == 1, "min ISR met again: the HW moves in both cases"


@pytest.mark.parametrize("on", [True, False])
def test_feature_refollow_on_epoch_change(on):
    """Kafka 2.1.0 Partition.makeFollower (KAFKA-7164) returns true on a new leader
    epoch of the same leader, so the follower truncates again; at 0.10.2.0-2.0.0 it
    returned false unless the leader changed."""
    b = toggled(replica("B", "0.10", [(0, "m0"), (0, "m1")], hw=1),
                refollow_on_epoch_change=on)
    follow(b, "A", 0, ["A", "B"])
    b.log.append_replicated(Record(1, 0, "m2"))
    effects = follow(b, "A", 1, ["A", "B"])
    assert b.leader_epoch == 1
    assert any(isinstance(e, Event) and e.type == "truncate" for e in effects) is on
    assert values(b) == (["m0"] if on else ["m0", "m2"]), "HW 1 is where 0.10 truncates"


@pytest.mark.parametrize("on", [True, False])
def test_feature_offset_out_of_range_halts(on):
    """Kafka 0.10.2.0 / 2.0.0 ReplicaFetcherThread.handleOffsetOutOfRange: a leader LEO
    below the follower's with unclean election off is fatal (the broker exits);
    2.1.0 AbstractFetcherThread (KAFKA-7414) truncates to the leader's LEO."""
    a = replica("A", "2.0", [(1, 1)], hw=1)
    lead(a, 1, ["A", "B"])
    b = toggled(replica("B", "2.0", [(0, 1), (0, 2)], hw=2), offset_out_of_range_halts=on)
    b.epoch_cache.entries = []  # no epoch to ask about: straight to fetching at HW 2
    follow(b, "A", 1, ["A", "B"])
    r = fetcher_round(b, a)
    assert r["response"]["error"] == "OFFSET_OUT_OF_RANGE"
    assert any(isinstance(e, HaltBroker) for e in r["follower_effects"]) is on
    assert values(b) == ([1, 2] if on else [1])


@pytest.mark.parametrize("on", [True, False])
def test_feature_caught_up_at_leader_leo(on):
    """Kafka 2.1.0 Partition.getOutOfSyncReplicas (KAFKA-7152): a follower at the
    leader's LEO is not out of sync however long it has been silent."""
    a = toggled(replica("A", "2.0", [(0, 1)], hw=1, replica_lag_time_max_ms=500),
                caught_up_at_leader_leo=on)
    lead(a, 0, ["A", "B"])
    a.fetch_for_replica("B", 1, None, None, 10, now=0)
    effects = a.tick(10_000)
    assert any(isinstance(e, ProposeIsr) for e in effects) is not on


@pytest.mark.parametrize("on", [True, False])
def test_feature_epoch_cache_truncate_and_append(on):
    """Kafka 2.1.0 LeaderEpochFileCache.assign (KAFKA-7415, truncateAndAppend): a new
    epoch starting before the latest start replaces it; 0.11.0.0 / 2.0.0 ignore it
    (`epoch > latestEpoch && offset >= latestOffset`). Partition passes its row's rule."""
    a = toggled(replica("A", "2.0"), epoch_cache_truncate_and_append=on)
    a.epoch_cache.assign(2, 9)
    a._assign_epoch(3, 8)
    assert a.epoch_cache.entries == ([(3, 8)] if on else [(2, 9)])


@pytest.mark.parametrize("on", [True, False])
def test_feature_isr_change_via_controller(on):
    """Kafka 2.7.0 Partition.handleAlterIsrResponse (KIP-497): an AlterIsr refused with
    INVALID_UPDATE_VERSION leaves the expansion pending (it keeps counting for the
    HW) until newer state arrives; before 2.7 a failed ZooKeeper write is dropped.
    No answer at all is retried in both."""
    a = toggled(replica("A", "2.1", [(0, 1)] * 4), isr_change_via_controller=on)
    lead(a, 0, ["A"])
    a.fetch_for_replica("B", 4, None, None, 10, now=0)
    assert a.pending_isr == ("A", "B")
    a.isr_proposal_failed("INVALID_UPDATE_VERSION")
    assert a.pending_isr == (("A", "B") if on else None)
    a.isr_proposal_failed(None)
    assert a.pending_isr is None


@pytest.mark.parametrize("quorum", ["zookeeper", "kraft"])
def test_feature_quorum(quorum):
    """A second incarnation is refused while the first one's session lives:
    ZooKeeper (KafkaZkClient.registerBroker, ephemeral node exists) or KRaft 3.7.0
    ClusterControlManager.registerBroker (DuplicateBrokerRegistrationException)."""
    c = controller("2.0" if quorum == "zookeeper" else "3.7")
    assert c.core.features.quorum == quorum
    err = c.register("B", "B2", 500)["error"]
    assert err == ("NODE_EXISTS" if quorum == "zookeeper" else "DUPLICATE_BROKER_REGISTRATION")


@pytest.mark.parametrize("on", [True, False])
def test_feature_controller_isr_removal_bumps_leader_epoch(on):
    """Kafka 0.10.2.0 KafkaController.removeReplicaFromIsr / 2.0.0-2.8.0
    ReplicaStateMachine.doRemoveReplicasFromIsr (LeaderAndIsr.newLeaderAndIsr): the
    ZooKeeper controller writes leaderEpoch + 1 when it takes a shutting-down or dead
    follower out of the ISR; KRaft (KAFKA-15021, 3.6) bumps the partition epoch only."""
    c = controller("2.7")
    c.core.features = replace(c.core.features, controller_isr_removal_bumps_leader_epoch=on)
    st = c.core.partitions[("t", 0)]
    c.shutdown("C")
    assert (st.leader, st.isr, st.partition_epoch) == ("A", ["A", "B"], 2)
    assert st.leader_epoch == (1 if on else 0)
    shrink, = [e for e in c.events if e.type == "isr-shrink"]
    assert shrink.fields["leader_epoch"] == st.leader_epoch


@pytest.mark.parametrize("on", [True, False])
def test_feature_follower_ignores_offline_leader(on):
    """Kafka 0.10.2.0-2.8.0 ReplicaManager.makeFollowers: a LeaderAndIsr whose leader
    (-1) is not a live broker is not applied ("cannot become follower since the new
    leader -1 is unavailable"): the follower keeps its leader, epoch and fetcher.
    3.7.0 applyLocalFollowersDelta applies it: no leader, no fetcher."""
    b = toggled(replica("B", "2.7", [(0, "m0")], hw=1), follower_ignores_offline_leader=on)
    follow(b, "A", 0, ["A", "B"])
    assert b.apply_leader_and_isr(None, 1, ["A"], 1, ["A", "B"], 0) == ([] if on else [
        Event("became-none", {"topic": "t", "partition": 0, "leader_epoch": 1})])
    assert (b.role, b.leader, b.leader_epoch) == (("follower", "A", 0) if on
                                                  else ("none", None, 1))
    assert (b.next_follower_request() is not None) is on


@pytest.mark.parametrize("on", [True, False])
def test_feature_isr_empties_under_unclean_election(on):
    """Kafka 0.10.2.0 / 0.11.0.0 KafkaController.removeReplicaFromIsr keeps the last
    ISR member only with unclean election off; from 1.1.0 (KAFKA-5642)
    ReplicaStateMachine keeps it whatever the setting."""
    c = ControllerClient(ControllerCore(
        [{"name": "t", "partitions": 1, "replicas": [["A", "B", "C"]]}], 1000, True,
        protocol="0.11"))
    for b in "ABC":
        c.register(b, f"{b}1", 0)
    c.core.features = replace(c.core.features, isr_empties_under_unclean_election=on)
    for b in "CBA":
        c.shutdown(b)
    st = c.core.partitions[("t", 0)]
    assert (st.leader, st.isr) == ((None, []) if on else (None, ["A"]))
    c.register("B", "B2", 10)
    assert (st.leader, st.isr) == ("B", ["B"]), "either way B's election is unclean"
    assert c.events[-1].fields["unclean"] is True


@pytest.mark.parametrize("on", [True, False])
def test_feature_fenced_replicas_kept_out_of_isr(on):
    """KIP-841 (Kafka 3.3, ReplicationControlManager.validateAlterPartitionData):
    an AlterPartition that adds a fenced or shutting-down broker is refused."""
    c = controller("2.7")
    c.core.features = replace(c.core.features, fenced_replicas_kept_out_of_isr=on)
    c.shutdown("C")
    st = c.core.partitions[("t", 0)]
    err = c.alter_partition("A", st.leader_epoch, st.partition_epoch, ["A", "B", "C"])["error"]
    assert (err == "INELIGIBLE_REPLICA") is on


@pytest.mark.parametrize("on", [True, False])
def test_feature_group_heartbeat_while_awaiting_sync(on):
    """KAFKA-10134 (Kafka 2.7.0, GroupCoordinator.handleHeartbeat): a member's
    heartbeat between its JoinGroup and SyncGroup answers (CompletingRebalance) is
    answered with no error; before, REBALANCE_IN_PROGRESS (AwaitingSync)."""
    c = controller("2.7")
    c.core.features = c.core.groups.features = replace(
        c.core.features, group_heartbeat_while_awaiting_sync=on)
    joined = c.ask(0, type="join-group", group_id="g", member_id="", session_timeout_ms=1000,
                   rebalance_timeout_ms=1000, protocol_type="consumer",
                   protocols=[["range", ""]])
    assert c.core.groups.groups["g"].state == "CompletingRebalance"
    err = c.ask(1, type="group-heartbeat", group_id="g", member_id=joined["member_id"],
                generation_id=joined["generation_id"])["error"]
    assert err == (None if on else "REBALANCE_IN_PROGRESS")


@pytest.mark.parametrize("on", [True, False])
def test_feature_alter_partition_broker_epochs(on):
    """KIP-903 (Kafka 3.5, ReplicationControlManager.validateAlterPartitionData with
    AlterPartition v3 broker epochs): a replica whose broker epoch is stale is refused."""
    c = controller("3.7")
    c.core.features = replace(c.core.features, alter_partition_broker_epochs=on)
    c.shutdown("C")
    stale = c.core.broker_epochs["C"]
    resp = c.register("C", "C2", 10)
    assert (resp["error"], resp["broker_epoch"]) == (None, stale + 1)
    st = c.core.partitions[("t", 0)]
    err = c.alter_partition("A", st.leader_epoch, st.partition_epoch, ["A", "B", "C"],
                            {"B": c.core.broker_epochs["B"], "C": stale})["error"]
    assert (err == "INELIGIBLE_REPLICA") is on


@pytest.mark.parametrize("on", [True, False])
def test_feature_eligible_leader_replicas(on):
    """KIP-966 (Kafka 4.0 line, PartitionChangeBuilder.maybePopulateTargetElr /
    electAnyLeader): with min ISR 2, the ISR shrinks to A and B, C stays in the
    ELR; when A dies, B leads; without the ELR the ISR is {B}."""
    c = controller("4.0", min_isr=2)
    c.core.elr_enabled = True
    c.core.features = replace(c.core.features, eligible_leader_replicas=on)
    st = c.core.partitions[("t", 0)]
    c.alter_partition("A", 0, st.partition_epoch, ["A"])
    assert st.elr == (["B", "C"] if on else [])
    c.shutdown("A")
    assert (st.leader, st.isr) == (("B", ["B"]) if on else (None, ["A"]))


@pytest.mark.parametrize("on", [True, False])
def test_feature_idempotence(on):
    """Kafka 0.11, KIP-98: a leader keeps an idempotent producer's state and
    answers a retried batch with its original offset instead of appending it
    again; 0.10 has no idempotent producer (UNSUPPORTED_VERSION)."""
    a = toggled(replica("A", "0.11"), idempotence=on)
    lead(a, 0, ["A"])
    first = a.append_batch_as_leader([7, 8], 1, 0, ProducerBatchHeader(1, 0, 0))
    retry = a.append_batch_as_leader([7, 8], 1, 0, ProducerBatchHeader(1, 0, 0))
    if on:
        assert (first.error, first.offset, retry.error, retry.offset) == (None, 0, None, 0)
        # Nothing appended: the only effect is the event that shows the resend.
        assert retry.duplicate and retry.last_offset == 1
        assert [(type(e).__name__, e.type, e.fields["offset"]) for e in retry.effects] == [
            ("Event", "producer-duplicate", 0)]
        assert values(a) == [7, 8] and a.log.records[0].producer == (1, 0, 0, 1)
    else:
        assert first.error == retry.error == "UNSUPPORTED_VERSION" and values(a) == []


@pytest.mark.parametrize("cached", [1, 5])
def test_feature_producer_batches_cached(cached):
    """Kafka 1.0, KAFKA-5494: a replica keeps a producer's last 5 batches, so a
    retry of any of them is a duplicate; 0.11.0 keeps one, and a retry of an
    earlier in-flight batch is out of order."""
    a = toggled(replica("A", "2.0"), producer_batches_cached=cached)
    lead(a, 0, ["A"])
    for seq in range(3):
        a.append_batch_as_leader([seq], 1, 0, ProducerBatchHeader(1, 0, seq))
    retry = a.append_batch_as_leader([0], 1, 0, ProducerBatchHeader(1, 0, 0))
    if cached == 5:
        assert (retry.error, retry.offset, retry.duplicate) == (None, 0, True)
    else:
        assert (retry.error, retry.offset) == ("OUT_OF_ORDER_SEQUENCE_NUMBER", None)
    assert values(a) == [0, 1, 2]


@pytest.mark.parametrize("mode,error", [
    ("out_of_order", "OUT_OF_ORDER_SEQUENCE_NUMBER"),
    ("unknown_producer_id", "UNKNOWN_PRODUCER_ID"),
    ("accept", None),
])
def test_feature_unknown_producer(mode, error):
    """A producer id the leader has no state for, its batch at sequence 5: Kafka
    0.11.0 answers out of order, 1.0 (KAFKA-5793) UNKNOWN_PRODUCER_ID, 2.5
    (KIP-360) appends it; at sequence 0 it is appended in every release."""
    a = toggled(replica("A", "2.0"), unknown_producer=mode)
    lead(a, 0, ["A"])
    res = a.append_batch_as_leader([5], 1, 0, ProducerBatchHeader(9, 0, 5))
    assert res.error == error and values(a) == ([] if error else [5])
    assert a.append_batch_as_leader([0], 1, 0, ProducerBatchHeader(10, 0, 0)).error is None


# -- no version string outside the table -------------------------------------------------


def _version_checks(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and node.value in PROTOCOLS:
            found.append(f"{path.name}:{node.lineno}: literal {node.value!r}")
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                name = getattr(operand, "id", None) or getattr(operand, "attr", None)
                if name == "protocol":
                    found.append(f"{path.name}:{node.lineno}: compares `protocol`")
    return found


def test_no_version_string_in_the_broker_outside_the_tables():
    # The three tables keyed by release: the rules, Kafka's defaults, and the API
    # versions each release's broker offered.
    tables = (BROKER / "protocol.py", BROKER / "defaults.py", BROKER / "kafka" / "versions.py")
    sources = [p for p in sorted(BROKER.rglob("*.py")) if p not in tables]
    assert BROKER / "partition.py" in sources
    assert [hit for p in sources for hit in _version_checks(p)] == []


def test_the_version_check_finds_what_it_should(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f(p):\n    return p.protocol in PROTOCOLS[1:] or p.x == "latest"\n')
    assert len(_version_checks(bad)) == 2


# -- broker/PROTOCOL.md names exactly the error codes the broker sends -------------------


def test_protocol_md_lists_exactly_the_error_codes_in_the_code():
    in_code = set()
    for path in BROKER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"[A-Z]+(_[A-Z]+)+", node.value):
                in_code.add(node.value)
    text = (BROKER / "PROTOCOL.md").read_text()
    listed = text.split("Error codes:", 1)[1].split(".", 1)[0]
    assert set(re.findall(r"`([A-Z_]+)`", listed)) == in_code
