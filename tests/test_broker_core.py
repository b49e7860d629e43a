"""BrokerCore, the sans-IO broker both shells drive: the decisions around the
partitions (Kafka's DelayedProduce and DelayedFetch, the replica fetcher's
backoff, the controller session, flush policy, HW checkpoint timer, controlled
shutdown), fed inputs by hand."""

from __future__ import annotations

from typing import Any

import pytest

from broker.broker_core import (
    CONTROLLER,
    BrokerCore,
    FlushAll,
    FlushPartition,
    LoadedPartition,
    Respond,
    Send,
    ShutdownDone,
    StoreEffect,
    WriteCleanShutdown,
    WriteHwCheckpoint,
)
from broker.config import BrokerConfig
from broker.partition import AppendRecords, Event

KEY = ("t", 0)


def _core(node: str, protocol: str = "2.1", **cfg: Any) -> BrokerCore:
    return BrokerCore(node, f"{node}:9092", protocol, BrokerConfig.from_dict(cfg, protocol),
                      {"A": "A:9092", "B": "B:9092"}, f"inc-{node}",
                      {KEY: LoadedPartition([], [], 0)})


def _of(effects: list, kind: type) -> list:
    return [e for e in effects if isinstance(e, kind)]


def _metadata(leader: str | None = "A", epoch: int = 0, broker_epoch: int = 0,
              isr: tuple[str, ...] = ("A", "B"), partition_epoch: int = 0) -> dict[str, Any]:
    return {"error": None, "broker_epoch": broker_epoch, "brokers": {"A": "A:9092", "B": "B:9092"},
            "partitions": [{"topic": "t", "partition": 0, "leader": leader,
                            "leader_epoch": epoch, "isr": list(isr),
                            "partition_epoch": partition_epoch, "replicas": ["A", "B"]}]}


def _registered(node: str, now: float = 0.0, protocol: str = "2.1",
                **cfg: Any) -> tuple[BrokerCore, list]:
    """A started core whose registration the controller answered; its effects."""
    core = _core(node, protocol, **cfg)
    reg, = _of(core.start(now), Send)
    assert reg.to == CONTROLLER and reg.msg["type"] == "register"
    return core, core.on_answer(reg.tag, _metadata(), now)


def _fetch(effects: list) -> Send:
    sends = [s for s in _of(effects, Send) if s.msg["type"] == "replica-fetch"]
    assert len(sends) == 1, effects
    return sends[0]


def test_acks_all_produce_answers_when_the_hw_passes_it_else_times_out():
    """Kafka's DelayedProduce: the answer waits for the follower's next fetch to
    move the HW past the record; with no fetch it is REQUEST_TIMED_OUT, appended."""
    a, _ = _registered("A")
    b, beff = _registered("B")
    out = a.on_request("p1", {"type": "produce", "topic": "t", "partition": 0, "value": 7,
                              "acks": "all"}, 1)
    assert not _of(out, Respond)  # held
    f1 = _fetch(beff)
    out = a.on_request("f1", f1.msg, 2)
    (resp,) = [r for r in _of(out, Respond) if r.rid == "f1"]
    assert resp.resp["records"] == [[0, 0, 7]]
    f2 = _fetch(b.on_answer(f1.tag, resp.resp, 3))
    out = a.on_request("f2", f2.msg, 4)  # B's LEO 1 reaches A: HW 1, the produce is acked
    assert [(r.rid, r.resp["error"], r.resp["offset"]) for r in _of(out, Respond)] \
        == [("p1", None, 0)]

    out = a.on_request("p2", {"type": "produce", "topic": "t", "partition": 0, "value": 8,
                              "acks": "all", "timeout_ms": 100}, 10)
    # The record completes B's held fetch f2; the produce itself waits.
    assert [r.rid for r in _of(out, Respond)] == ["f2"]
    assert a.next_deadline() <= 110
    (timed_out,) = [r for r in _of(a.tick(110), Respond) if r.rid == "p2"]
    assert timed_out.resp == {"error": "REQUEST_TIMED_OUT", "offset": 1, "appended": True}


def test_empty_follower_fetch_is_held_until_data_or_wait_max():
    """Kafka's DelayedFetch: an empty fetch waits replica.fetch.wait.max.ms at the
    leader, and is answered at once when a record arrives."""
    a, _ = _registered("A", replica_fetch_wait_max_ms=500)
    out = a.on_request("f", {"type": "replica-fetch", "topic": "t", "partition": 0,
                             "replica_id": "B", "offset": 0, "current_leader_epoch": 0}, 0)
    assert not _of(out, Respond)
    assert not _of(a.tick(499), Respond)
    (held,) = _of(a.tick(500), Respond)
    assert held.resp["records"] == [] and held.resp["error"] is None

    a.on_request("g", {"type": "replica-fetch", "topic": "t", "partition": 0,
                       "replica_id": "B", "offset": 0, "current_leader_epoch": 0}, 600)
    out = a.on_request("p", {"type": "produce", "topic": "t", "partition": 0, "value": 1,
                             "acks": 1}, 610)
    assert {r.rid: r.resp.get("records") for r in _of(out, Respond)} \
        == {"p": None, "g": [[0, 0, 1]]}


def test_fetcher_keeps_one_request_in_flight_and_backs_off_after_a_lost_answer():
    b, beff = _registered("B", replica_fetch_backoff_ms=50)
    f1 = _fetch(beff)
    assert f1.to == "A" and f1.timeout_ms == 100 + 1000
    assert not [s for s in _of(b.tick(10), Send) if s.msg["type"] == "replica-fetch"]
    out = b.on_answer(f1.tag, None, 20)  # lost or timed out
    assert not [s for s in _of(out, Send) if s.msg["type"] == "replica-fetch"]
    assert b.next_deadline() <= 70
    assert not [s for s in _of(b.tick(69), Send) if s.msg["type"] == "replica-fetch"]
    assert _fetch(b.tick(70)).msg["offset"] == 0


def test_session_registers_heartbeats_and_registers_again_when_unknown():
    b, beff = _registered("B", heartbeat_interval_ms=100)
    assert b.broker_epoch == 0
    assert not [s for s in _of(b.tick(50), Send) if s.to == CONTROLLER]
    (hb,) = [s for s in _of(b.tick(100), Send) if s.to == CONTROLLER]
    assert hb.msg["type"] == "heartbeat"
    out = b.on_answer(hb.tag, {"error": "UNKNOWN_BROKER"}, 120)
    (reg,) = [s for s in _of(out, Send) if s.to == CONTROLLER]
    assert reg.msg["type"] == "register" and reg.msg["previous_broker_epoch"] == 0


def test_flush_messages_flushes_every_n_records_and_checkpoint_timer():
    a, _ = _registered("A", flush_messages=2,
                       replica_high_watermark_checkpoint_interval_ms=1000)
    flushes = []
    for i in range(4):
        out = a.on_request(i, {"type": "produce", "topic": "t", "partition": 0, "value": i,
                               "acks": 1}, i)
        assert [e.effect for e in _of(out, StoreEffect)][-1] \
            == AppendRecords(tuple(a.partitions[KEY].log.records[i:i + 1]))
        flushes.append(len(_of(out, FlushPartition)))
    assert flushes == [0, 1, 0, 1]
    assert not _of(a.tick(999), WriteHwCheckpoint)
    assert a.next_deadline() <= 1000
    (cp,) = _of(a.tick(1000), WriteHwCheckpoint)
    assert cp.hws == {KEY: 0}  # no follower fetched: the HW stays 0


def test_controlled_shutdown_then_flush_checkpoint_and_clean_marker():
    a, _ = _registered("A")
    out = a.begin_shutdown(5)
    (sd,) = _of(out, Send)
    assert sd.msg == {"type": "shutdown", "id": "A", "incarnation": "inc-A"}
    out = a.on_answer(sd.tag, {"error": None}, 6)
    kinds = [type(e) for e in out if not isinstance(e, Event)]
    assert kinds == [FlushAll, WriteHwCheckpoint, WriteCleanShutdown, ShutdownDone]
    assert _of(out, WriteCleanShutdown)[0].broker_epoch == 0


def test_acks_0_error_closes_the_connection_without_an_answer():
    b, _ = _registered("B")  # a follower: NOT_LEADER_OR_FOLLOWER
    (r,) = _of(b.on_request("x", {"type": "produce", "topic": "t", "partition": 0,
                                  "value": 1, "acks": 0}, 1), Respond)
    assert r.resp is None and r.close


def _heartbeat_answer(core: BrokerCore, now: float, metadata: dict[str, Any]) -> list:
    """The core's next heartbeat, answered with `metadata`; the effects."""
    (hb,) = [s for s in _of(core.tick(now), Send) if s.to == CONTROLLER]
    assert hb.msg["type"] == "heartbeat"
    return core.on_answer(hb.tag, metadata, now)


@pytest.mark.parametrize("protocol", ["2.8", "3.7"])
def test_follower_fetcher_when_the_controller_says_no_leader(protocol):
    """2.8.0 ReplicaManager.makeFollowers ignores a leader of -1 (not a live broker):
    the replica fetcher keeps fetching from A. 3.7.0 applyLocalFollowersDelta applies
    it and removes the fetcher: no more fetches."""
    b, beff = _registered("B", protocol=protocol, heartbeat_interval_ms=100,
                          replica_fetch_backoff_ms=50)
    f1 = _fetch(beff)
    _heartbeat_answer(b, 100, _metadata(leader=None, epoch=1, isr=("A",), partition_epoch=1))
    out = b.on_answer(f1.tag, None, 110)            # A is down: the fetch is lost
    out += b.tick(160)
    fetches = [s for s in _of(out, Send) if s.msg["type"] == "replica-fetch"]
    if protocol == "2.8":
        assert [(f.to, f.msg["current_leader_epoch"]) for f in fetches] == [("A", 0)]
    else:
        assert fetches == []
        assert b.partitions[KEY].role == "none"


def test_delayed_produce_survives_a_new_epoch_of_the_same_leader():
    """2.1.0 DelayedProduce (Partition.checkEnoughReplicasReachOffset asks only whether
    the replica still leads): the ZooKeeper controller's new epoch for A, given when a
    follower left the ISR (ReplicaStateMachine.doRemoveReplicasFromIsr), does not fail
    an acks=all produce that was waiting; the leader keeps leading (makeLeader,
    isNewLeader false)."""
    a, _ = _registered("A", heartbeat_interval_ms=100)
    out = a.on_request("p", {"type": "produce", "topic": "t", "partition": 0, "value": 7,
                             "acks": "all"}, 1)
    assert not _of(out, Respond)                    # waits for B
    out = _heartbeat_answer(a, 100, _metadata(epoch=1, isr=("A",), partition_epoch=1))
    assert [(r.rid, r.resp["error"]) for r in _of(out, Respond)] == [("p", None)], \
        "ISR {A}: the HW passes the record and the produce is answered ok"
    assert (a.partitions[KEY].role, a.partitions[KEY].leader_epoch) == ("leader", 1)


def _answer(core: BrokerCore, msg: dict[str, Any], now: float = 1) -> dict[str, Any]:
    (resp,) = _of(core.on_request("r", msg, now), Respond)
    return resp.resp


def test_init_producer_id_is_new_every_time_and_unique_per_broker_epoch():
    """KIP-98, TransactionCoordinator.handleInitProducerId (0.11.0-3.7.0): a null
    transactional id always gets a new producer id with epoch 0, whatever id it
    names; ids are blocks of the broker epoch (unique in the cluster's life)."""
    unregistered = _core("A")
    assert _answer(unregistered, {"type": "init-producer-id"})["error"] == \
        "COORDINATOR_NOT_AVAILABLE"
    a, _ = _registered("A")
    a.broker_epoch = 3
    first = _answer(a, {"type": "init-producer-id", "transactional_id": None})
    again = _answer(a, {"type": "init-producer-id", "producer_id": first["producer_id"],
                        "producer_epoch": 0})
    assert (first["error"], first["producer_epoch"], again["producer_epoch"]) == (None, 0, 0)
    assert first["producer_id"] == 3 << 20 and again["producer_id"] == (3 << 20) + 1
    b, _ = _registered("B")
    b.broker_epoch = 4
    assert _answer(b, {"type": "init-producer-id"})["producer_id"] == 4 << 20
    assert _answer(a, {"type": "init-producer-id", "transactional_id": "tx"})["error"] == \
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


def test_list_offsets_answers_log_start_and_hw_with_the_epoch_fenced():
    """ListOffsets: -2 the log start (0, no retention), -1 the HW (the last stable
    offset without transactions), with the leader epoch of the record before it
    (v4, KIP-320, 2.1); a stale current leader epoch is FENCED_LEADER_EPOCH and a
    newer one UNKNOWN_LEADER_EPOCH; a follower answers NOT_LEADER_OR_FOLLOWER."""
    a, _ = _registered("A")
    b, _ = _registered("B")
    _answer(a, {"type": "produce", "topic": "t", "partition": 0, "values": [5, 6], "acks": 1})
    ask = {"type": "list-offsets", "topic": "t", "partition": 0}
    assert _answer(a, {**ask, "timestamp": -2}) == {"error": None, "offset": 0,
                                                    "leader_epoch": 0}
    assert _answer(a, {**ask, "timestamp": -1})["offset"] == 0  # HW 0: B has not fetched
    assert _answer(a, {**ask, "timestamp": 1_700_000_000_000})["offset"] == -1
    assert _answer(a, {**ask, "timestamp": -1, "current_leader_epoch": 1})["error"] == \
        "UNKNOWN_LEADER_EPOCH"
    assert _answer(b, {**ask, "timestamp": -1})["error"] == "NOT_LEADER_OR_FOLLOWER"
    a._apply_metadata(_metadata(epoch=1), 2)
    assert _answer(a, {**ask, "timestamp": -1, "current_leader_epoch": 0})["error"] == \
        "FENCED_LEADER_EPOCH"


@pytest.mark.parametrize("protocol,fenced", [("2.0", False), ("2.1", True)])
def test_a_consumer_fetch_is_fenced_by_its_leader_epoch_from_2_1(protocol: str,
                                                                 fenced: bool) -> None:
    """KIP-320 (2.1): a consumer's Fetch (v9+) names its current leader epoch; an
    older one than the leader's is FENCED_LEADER_EPOCH. Before 2.1 nothing is
    fenced."""
    a, _ = _registered("A", protocol=protocol)
    a._apply_metadata(_metadata(epoch=2), 2)
    resp = _answer(a, {"type": "fetch", "topic": "t", "partition": 0, "offset": 0,
                       "current_leader_epoch": 1})
    assert resp["error"] == ("FENCED_LEADER_EPOCH" if fenced else None)
