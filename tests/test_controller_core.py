"""ControllerCore: sessions, elections, epochs, ISR changes."""

from broker.controller_core import ControllerCore

TOPICS = [{"name": "t", "partitions": 1, "replicas": [["A", "B", "C"]]}]


def core(unclean=False, timeout=1000, protocol="3.7", min_isr=1) -> ControllerCore:
    c = ControllerCore(TOPICS, timeout, unclean, protocol=protocol, min_insync_replicas=min_isr)
    for b in "ABC":
        c.register(b, f"{b}1", f"{b}:1", 0)
    return c


def state(c):
    st = c.partitions[("t", 0)]
    return st.leader, st.leader_epoch, st.isr


def test_first_election_waits_for_all_replicas_and_picks_the_preferred():
    c = ControllerCore(TOPICS, 1000, False)
    c.register("B", "b", "B:1", 0)
    c.register("C", "c", "C:1", 0)
    assert state(c)[0] is None
    c.register("A", "a", "A:1", 0)
    assert state(c) == ("A", 0, ["A", "B", "C"])


def test_session_timeout_elects_from_isr_and_bumps_epoch():
    c = core()
    for b in "BC":
        assert c.heartbeat(b, f"{b}1", 900)
    c.tick(1001)                         # A silent for > 1000 ms
    assert state(c) == ("B", 1, ["B", "C"])
    assert any(e["type"] == "leader-elected" and e["leader"] == "B" for e in c.events)


def test_restart_within_session_is_refused_until_the_old_session_ends():
    """ZooKeeper era (2.0.0 KafkaZkClient.registerBroker: the old ephemeral node
    lives until its session expires): a restarted broker does not keep its ISR
    seat; the controller first handles the old incarnation's death."""
    c = core(protocol="2.0")
    assert c.register("B", "B2", "B:1", 500) == ("NODE_EXISTS", -1)
    assert state(c)[2] == ["A", "B", "C"]
    for b in "AC":
        c.heartbeat(b, f"{b}1", 900)
    err, _ = c.register("B", "B2", "B:1", 1001)   # the old session ended at 1000
    assert err is None
    assert state(c)[2] == ["A", "C"], "the dead incarnation left the ISR"


def test_restarted_leader_does_not_lead_again_in_the_same_epoch():
    """A leader restarted within its session: its partitions get a new leader (and
    epoch) before the new incarnation is let in (KRaft 3.7.0
    ClusterControlManager.registerBroker: DuplicateBrokerRegistrationException
    while the old registration is unfenced)."""
    c = core(protocol="3.7")
    assert c.register("A", "A2", "A:1", 500)[0] == "DUPLICATE_BROKER_REGISTRATION"
    for b in "BC":
        c.heartbeat(b, f"{b}1", 900)
    assert c.register("A", "A2", "A:1", 1001)[0] is None
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


def test_clean_election_waits_for_an_isr_member():
    c = core()
    c.shutdown("B")
    c.shutdown("C")
    c.shutdown("A")                       # ISR {A}, A down
    c.register("B", "B2", "B:1", 10)
    assert state(c)[0] is None, "unclean election off: B is not in the ISR"
    c.register("A", "A2", "A:1", 20)
    assert state(c)[:2] == ("A", 2)


def test_unclean_election_picks_a_live_out_of_sync_replica():
    c = core(unclean=True)
    for b in "BCA":
        c.shutdown(b)
    c.register("C", "C2", "C:1", 10)
    leader, epoch, isr = state(c)
    assert (leader, isr) == ("C", ["C"])
    assert c.events[-1]["unclean"] is True


def test_alter_partition_is_validated_by_epochs():
    c = core()
    st = c.partitions[("t", 0)]
    pe = st.partition_epoch
    assert c.alter_partition("t", 0, "B", 0, pe, ["B"])[0] == "FENCED_LEADER_EPOCH"
    assert c.alter_partition("t", 0, "A", 0, pe - 1, ["A"])[0] == "INVALID_UPDATE_VERSION"
    err, new = c.alter_partition("t", 0, "A", 0, pe, ["A", "C"])
    assert err is None and new["isr"] == ["A", "C"] and new["partition_epoch"] == pe + 1
    assert new["leader_epoch"] == 0, "ISR changes do not bump the leader epoch"


def test_restarted_controller_gives_known_brokers_one_session_timeout():
    c = core(protocol="4.0")
    saved = c.snapshot()
    c2 = ControllerCore(TOPICS, 1000, False, saved, now=5000, protocol="4.0")
    assert state(c2) == ("A", 0, ["A", "B", "C"])
    # The same processes register again, proving their own broker epoch (no
    # unclean shutdown under KIP-966).
    c2.register("B", "B1", "B:1", 5100, c.broker_epochs["B"])
    c2.register("C", "C1", "C:1", 5100, c.broker_epochs["C"])
    c2.tick(6001)
    assert state(c2)[:2] == ("B", 1)


# -- KIP-966 (4.0): eligible leader replicas ----------------------------------------------


def test_elr_isr_may_empty_and_unclean_restart_leaves_elr():
    """Kafka 4.0 line (trunk) PartitionChangeBuilder: with ELR the ISR may become
    empty, its members move to the ELR below min ISR; ReplicationControlManager
    .handleBrokerUncleanShutdown removes an uncleanly restarted broker from the ELR."""
    c = core(protocol="4.0", min_isr=2)
    st = c.partitions[("t", 0)]
    c.alter_partition("t", 0, "A", 0, st.partition_epoch, ["A"])   # B, C fell behind
    assert (st.isr, st.elr) == (["A"], ["B", "C"])
    c.shutdown("B")
    c.shutdown("C")
    c.tick(5000)                                                   # A's session ends
    assert (st.leader, st.isr, st.elr) == (None, [], ["A", "B", "C"])
    assert c.register("A", "A2", "A:1", 5001, -1)[0] is None       # unclean: no marker
    assert "A" not in st.elr and st.leader is None
    # B comes back after a clean shutdown (its marker names its epoch): ELR leader.
    c.register("B", "B2", "B:1", 5002, c.broker_epochs["B"])
    assert (st.leader, st.isr) == ("B", ["B"])


def test_elr_last_known_leader_leads_when_isr_and_elr_are_empty():
    """Kafka 4.0 line PartitionChangeBuilder.canElectLastKnownLeader (balanced
    recovery, on by default): with ISR and ELR empty, the last leader may lead."""
    c = core(protocol="4.0", min_isr=1)
    c.shutdown("B")
    c.shutdown("C")
    c.tick(5000)
    st = c.partitions[("t", 0)]
    assert (st.leader, st.isr, st.elr, st.last_known_elr) == (None, [], ["A"], ["A"])
    c.register("A", "A2", "A:1", 5001, -1)                         # unclean restart
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
