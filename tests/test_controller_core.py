"""ControllerCore: sessions, elections, epochs, ISR changes; its effects."""

import pytest
from controller_client import ControllerClient

from broker.broker_core import Respond
from broker.controller_core import ControllerCore, WriteControllerState
from broker.partition import Event
from broker.protocol import PROTOCOLS, features

TOPICS = [{"name": "t", "partitions": 1, "replicas": [["A", "B", "C"]]}]


def core(unclean=False, timeout=1000, protocol="3.7", min_isr=1,
         elr=False) -> ControllerClient:
    c = ControllerClient(ControllerCore(TOPICS, timeout, unclean, protocol=protocol,
                                        min_insync_replicas=min_isr, elr=elr))
    for b in "ABC":
        c.register(b, f"{b}1", 0)
    return c


def state(c: ControllerClient):
    st = c.core.partitions[("t", 0)]
    return st.leader, st.leader_epoch, st.isr


def test_first_election_waits_for_all_replicas_and_picks_the_preferred():
    c = ControllerClient(ControllerCore(TOPICS, 1000, False))
    c.register("B", "b", 0)
    c.register("C", "c", 0)
    assert state(c)[0] is None
    c.register("A", "a", 0)
    assert state(c) == ("A", 0, ["A", "B", "C"])


def test_session_timeout_elects_from_isr_and_bumps_epoch():
    c = core()
    for b in "BC":
        assert c.heartbeat(b, f"{b}1", 900)["error"] is None
    c.tick(1001)                         # A silent for > 1000 ms
    assert state(c) == ("B", 1, ["B", "C"])
    assert any(e.type == "leader-elected" and e.fields["leader"] == "B" for e in c.events)


def test_restart_within_session_is_refused_until_the_old_session_ends():
    """ZooKeeper era (2.0.0 KafkaZkClient.registerBroker: the old ephemeral node
    lives until its session expires): a restarted broker does not keep its ISR
    seat; the controller first handles the old incarnation's death."""
    c = core(protocol="2.0")
    assert c.register("B", "B2", 500) == {"error": "NODE_EXISTS"}
    assert state(c)[2] == ["A", "B", "C"]
    for b in "AC":
        c.heartbeat(b, f"{b}1", 900)
    assert c.register("B", "B2", 1001)["error"] is None   # the old session ended at 1000
    assert state(c)[2] == ["A", "C"], "the dead incarnation left the ISR"


def test_restarted_leader_does_not_lead_again_in_the_same_epoch():
    """A leader restarted within its session: its partitions get a new leader (and
    epoch) before the new incarnation is let in (KRaft 3.7.0
    ClusterControlManager.registerBroker: DuplicateBrokerRegistrationException
    while the old registration is unfenced)."""
    c = core(protocol="3.7")
    assert c.register("A", "A2", 500) == {"error": "DUPLICATE_BROKER_REGISTRATION"}
    for b in "BC":
        c.heartbeat(b, f"{b}1", 900)
    assert c.register("A", "A2", 1001)["error"] is None
    assert state(c) == ("B", 1, ["B", "C"])


def test_dead_follower_leaves_isr_but_last_member_stays():
    """Without the ELR (ZooKeeper and KRaft before KIP-966) the ISR never empties."""
    c = core(protocol="3.7")
    c.shutdown("C")
    assert state(c) == ("A", 0, ["A", "B"])
    c.shutdown("B")
    c.shutdown("A")
    leader, epoch, isr = state(c)
    assert leader is None and isr == ["A"] and epoch == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("how", ["controlled-shutdown", "session-timeout"])
def test_zookeeper_controller_bumps_the_leader_epoch_when_a_follower_leaves(protocol, how):
    """Kafka 0.10.2.0 KafkaController.removeReplicaFromIsr (leaderEpoch + 1), 0.11.0.0
    LeaderAndIsr.newLeaderAndIsr, 2.0.0-2.8.0 ReplicaStateMachine.doRemoveReplicasFromIsr:
    a follower's controlled shutdown or death (OfflineReplica) gives the same leader a
    new epoch. KRaft (3.7.0 PartitionChangeBuilder.triggerLeaderEpochBumpIfNeeded,
    KAFKA-15021) bumps the partition epoch only."""
    c = core(protocol=protocol)
    st = c.core.partitions[("t", 0)]
    if how == "controlled-shutdown":
        c.shutdown("C")
    else:
        for b in "AB":
            c.heartbeat(b, f"{b}1", 900)
        c.tick(1001)                     # C silent for > 1000 ms
    zookeeper = features(protocol).quorum == "zookeeper"
    assert state(c) == ("A", 1 if zookeeper else 0, ["A", "B"])
    assert st.partition_epoch == 2
    shrink = c.events[-1]
    assert (shrink.type, shrink.fields["leader_epoch"], shrink.fields["reason"]) \
        == ("isr-shrink", st.leader_epoch, how)


@pytest.mark.parametrize("protocol", ["0.10", "2.0", "3.7"])
def test_a_dead_leader_bumps_the_leader_epoch_once(protocol):
    """0.10.2.0 KafkaController.onBrokerFailure elects first; the dead leader is then
    no longer in the ISR, so removeReplicaFromIsr writes nothing more."""
    c = core(protocol=protocol)
    c.shutdown("A")
    assert state(c) == ("B", 1, ["B", "C"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("unclean", [True, False])
def test_last_isr_member_dying_empties_the_isr_only_before_1_1_with_unclean_election(
        protocol, unclean):
    """0.10.2.0 KafkaController.removeReplicaFromIsr (and 0.11.0.0): "Retaining last ISR
    ... since unclean leader election is disabled" -- enabled, the ISR empties. 1.1.0
    ReplicaStateMachine (KAFKA-5642): `if (leaderAndIsr.isr.size == 1) leaderAndIsr.isr`."""
    c = core(unclean=unclean, protocol=protocol)
    for b in "CBA":
        c.shutdown(b)
    empties = unclean and protocol in ("0.10", "0.11")
    leader, _, isr = state(c)
    assert (leader, isr) == (None, [] if empties else ["A"])
    offline = c.events[-1]
    assert (offline.type, offline.fields["isr"]) == ("leader-offline", isr)


def test_clean_election_waits_for_an_isr_member():
    c = core()
    c.shutdown("B")
    c.shutdown("C")
    c.shutdown("A")                       # ISR {A}, A down
    c.register("B", "B2", 10)
    assert state(c)[0] is None, "unclean election off: B is not in the ISR"
    c.register("A", "A2", 20)
    assert state(c)[:2] == ("A", 2)


def test_unclean_election_picks_a_live_out_of_sync_replica():
    c = core(unclean=True)
    for b in "BCA":
        c.shutdown(b)
    c.register("C", "C2", 10)
    leader, epoch, isr = state(c)
    assert (leader, isr) == ("C", ["C"])
    assert c.events[-1].fields["unclean"] is True


def test_alter_partition_is_validated_by_epochs():
    c = core()
    st = c.core.partitions[("t", 0)]
    pe = st.partition_epoch
    assert c.alter_partition("B", 0, pe, ["B"])["error"] == "FENCED_LEADER_EPOCH"
    assert c.alter_partition("A", 0, pe - 1, ["A"])["error"] == "INVALID_UPDATE_VERSION"
    resp = c.alter_partition("A", 0, pe, ["A", "C"])
    err, new = resp["error"], resp["state"]
    assert err is None and new["isr"] == ["A", "C"] and new["partition_epoch"] == pe + 1
    assert new["leader_epoch"] == 0, "ISR changes do not bump the leader epoch"


def test_restarted_controller_gives_known_brokers_one_session_timeout():
    c = core(protocol="4.0")
    saved = c.saved                      # the state the controller wrote last
    assert saved == c.core.snapshot()
    c2 = ControllerClient(ControllerCore(TOPICS, 1000, False, saved, now=5000,
                                         protocol="4.0"))
    assert state(c2) == ("A", 0, ["A", "B", "C"])
    # The same processes register again, proving their own broker epoch (no
    # unclean shutdown under KIP-966).
    c2.register("B", "B1", 5100, c.core.broker_epochs["B"])
    c2.register("C", "C1", 5100, c.core.broker_epochs["C"])
    c2.tick(6001)
    assert state(c2)[:2] == ("B", 1)


# -- KIP-966 (4.0; on by default for new clusters from 4.1): eligible leader replicas ----


def test_elr_off_keeps_the_last_isr_member_as_in_3_7():
    """Kafka 4.0 with eligible.leader.replicas.version 0 (its default): no ELR, the
    last ISR member stays in the ISR and the partition waits for it."""
    c = core(protocol="4.0", min_isr=2)
    st = c.core.partitions[("t", 0)]
    c.alter_partition("A", 0, st.partition_epoch, ["A"])
    assert (st.isr, st.elr) == (["A"], [])
    c.shutdown("A")
    assert (st.leader, st.isr, st.elr) == (None, ["A"], [])


def test_elr_isr_may_empty_and_unclean_restart_leaves_elr():
    """Kafka 4.0 line (trunk) PartitionChangeBuilder: with ELR the ISR may become
    empty, its members move to the ELR below min ISR; ReplicationControlManager
    .handleBrokerUncleanShutdown removes an uncleanly restarted broker from the ELR."""
    c = core(protocol="4.1", min_isr=2, elr=True)
    st = c.core.partitions[("t", 0)]
    c.alter_partition("A", 0, st.partition_epoch, ["A"])           # B, C fell behind
    assert (st.isr, st.elr) == (["A"], ["B", "C"])
    c.shutdown("B")
    c.shutdown("C")
    c.tick(5000)                                                   # A's session ends
    assert (st.leader, st.isr, st.elr) == (None, [], ["A", "B", "C"])
    assert c.register("A", "A2", 5001, -1)["error"] is None        # unclean: no marker
    assert "A" not in st.elr and st.leader is None
    # B comes back after a clean shutdown (its marker names its epoch): ELR leader.
    c.register("B", "B2", 5002, c.core.broker_epochs["B"])
    assert (st.leader, st.isr) == ("B", ["B"])


def test_elr_last_known_leader_leads_when_isr_and_elr_are_empty():
    """Kafka 4.0 line PartitionChangeBuilder.canElectLastKnownLeader (balanced
    recovery, on by default): with ISR and ELR empty, the last leader may lead."""
    c = core(protocol="4.1", min_isr=1, elr=True)
    c.shutdown("B")
    c.shutdown("C")
    c.tick(5000)
    st = c.core.partitions[("t", 0)]
    assert (st.leader, st.isr, st.elr, st.last_known_elr) == (None, [], ["A"], ["A"])
    c.register("A", "A2", 5001, -1)                                # unclean restart
    assert st.elr == [] and (st.leader, st.isr) == ("A", ["A"])


def test_partition_state_to_dict_names_every_field():
    """to_dict is written out by hand (heartbeat answers carry it): it must not
    drop a field added later."""
    from dataclasses import fields

    from broker.controller_core import PartitionState

    st = PartitionState("t", 0, ["A", "B"], leader="A", isr=["A"], elr=["B"])
    d = st.to_dict()
    assert list(d) == [f.name for f in fields(PartitionState)]
    assert PartitionState(**d) == st


# -- effects: input in, effects out (as BrokerCore) ---------------------------------------


def test_start_is_an_event_that_says_whether_the_controller_restarted():
    fresh = ControllerCore(TOPICS, 1000, False)
    assert fresh.start(0) == [Event("started", {"restarted": False})]
    again = ControllerCore(TOPICS, 1000, False, fresh.snapshot(), now=0)
    assert again.start(0) == [Event("started", {"restarted": True})]


def test_a_request_is_answered_after_its_events_and_the_state_it_changed():
    """The shell publishes the events and writes the state before it answers."""
    c = ControllerCore(TOPICS, 1000, False)
    effects = c.on_request(7, {"type": "register", "id": "A", "incarnation": "a",
                               "addr": "A:1"}, 0)
    assert [type(e) for e in effects] == [Event, WriteControllerState, Respond]
    assert effects[0].type == "broker-registered"
    assert effects[1].state == c.snapshot()
    assert effects[2].rid == 7 and effects[2].resp["broker_epoch"] == 0
    # A heartbeat changes nothing to write: its answer alone.
    effects = c.on_request(8, {"type": "heartbeat", "id": "A", "incarnation": "a"}, 10)
    assert [type(e) for e in effects] == [Respond] and effects[0].resp["error"] is None
    assert c.on_request(9, {"type": "status"}, 10) == [Respond(9, c.status())]


def test_tick_returns_the_effects_of_the_sessions_that_ended():
    c = core()
    assert c.core.tick(1000) == []       # not yet: a session ends when silent for > 1000 ms
    effects = c.core.tick(1001)
    dead = [e.fields["broker"] for e in effects
            if isinstance(e, Event) and e.type == "broker-dead"]
    assert dead == ["A", "B", "C"]
    assert isinstance(effects[-1], WriteControllerState)
    assert effects[-1].state == c.core.snapshot()
