"""ControllerCore: sessions, elections, epochs, ISR changes."""

from broker.controller_core import ControllerCore

TOPICS = [{"name": "t", "partitions": 1, "replicas": [["A", "B", "C"]]}]


def core(unclean=False, timeout=1000) -> ControllerCore:
    c = ControllerCore(TOPICS, timeout, unclean)
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


def test_restart_within_session_timeout_keeps_isr_membership():
    c = core()
    c.register("B", "B2", "B:1", 500)    # B restarted: new incarnation, same session window
    assert not c.heartbeat("B", "B1", 600), "the old process is gone"
    assert state(c)[2] == ["A", "B", "C"]


def test_dead_follower_leaves_isr_but_last_member_stays():
    c = core()
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
    c = core()
    saved = c.snapshot()
    c2 = ControllerCore(TOPICS, 1000, False, saved, now=5000)
    assert state(c2) == ("A", 0, ["A", "B", "C"])
    c2.register("B", "B1", "B:1", 5100)
    c2.register("C", "C1", "C:1", 5100)
    c2.tick(6001)
    assert state(c2)[:2] == ("B", 1)
