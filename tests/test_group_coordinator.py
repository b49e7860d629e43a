"""The sans-IO group coordinator (broker/group_coordinator.py) and its place in the
ControllerCore: Kafka's classic group protocol as of the modelled releases."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import free_port
from controller_client import ControllerClient

from broker.broker_core import Respond
from broker.controller_core import ControllerCore, WriteControllerState
from broker.group_coordinator import COMPLETING, EMPTY, PREPARING, STABLE, GroupCoordinator
from broker.kafka.apis import Changes, KafkaApis
from broker.kafka.error_codes import code
from broker.protocol import features

SESSION = 1000
REBALANCE = 5000


def coordinator(protocol: str = "latest", delay: int = 0, saved: Any = None) -> GroupCoordinator:
    return GroupCoordinator(features(protocol), delay, 100, 300_000, saved)


def join(gc: GroupCoordinator, rid: Any, now: float, member: str = "",
         protocols: list[list[str]] | None = None, known: bool = False,
         session: int = SESSION) -> dict[Any, dict[str, Any]]:
    return dict(gc.handle(rid, {
        "type": "join-group", "group_id": "g", "member_id": member, "client_id": "c",
        "session_timeout_ms": session, "rebalance_timeout_ms": REBALANCE,
        "protocol_type": "consumer",
        "protocols": protocols or [["range", "bWQ="], ["roundrobin", "cnI="]],
        "require_known_member_id": known}, now))


def sync(gc: GroupCoordinator, rid: Any, now: float, member: str, gen: int,
         assignments: list[list[str]] | None = None) -> dict[Any, dict[str, Any]]:
    return dict(gc.handle(rid, {"type": "sync-group", "group_id": "g", "generation_id": gen,
                                "member_id": member, "assignments": assignments or []}, now))


def heartbeat(gc: GroupCoordinator, now: float, member: str, gen: int) -> str | None:
    return gc.handle("hb", {"type": "group-heartbeat", "group_id": "g", "generation_id": gen,
                            "member_id": member}, now)[0][1]["error"]


def commit(gc: GroupCoordinator, now: float, member: str, gen: int,
           offset: int = 5, group: str = "g") -> str | None:
    return gc.handle("c", {"type": "offset-commit", "group_id": group, "generation_id": gen,
                           "member_id": member, "offsets": [["t", 0, offset, 3, "m"]]},
                     now)[0][1]["error"]


def fetch(gc: GroupCoordinator, group: str = "g", partitions: Any = None) -> list:
    return gc.handle("f", {"type": "offset-fetch", "group_id": group,
                           "partitions": partitions}, 0)[0][1]["offsets"]


def two_members(gc: GroupCoordinator) -> tuple[str, str]:
    """Members 1 and 2 joined (generation 1) and synced (Stable)."""
    assert join(gc, 1, 0) != {}
    m1 = gc.groups["g"].leader
    assert m1 is not None
    # With no initial delay, the first JoinGroup completes the rebalance at once.
    assert gc.groups["g"].state == COMPLETING
    answers = join(gc, 2, 10)
    assert answers == {}  # a rebalance with m1 to rejoin
    answers = join(gc, 3, 20, m1)
    assert set(answers) == {2, 3}
    m2 = answers[2]["member_id"]
    assert answers[3]["generation_id"] == answers[2]["generation_id"] == 2
    assert answers[3]["leader"] == m1 and [m[0] for m in answers[3]["members"]] == [m1, m2]
    assert answers[2]["members"] == []  # only the leader gets the members' metadata
    assert answers[3]["protocol_name"] == "range"
    assert sync(gc, 4, 30, m2, 2) == {}  # waits for the leader
    answers = sync(gc, 5, 30, m1, 2, [[m1, "YQ=="], [m2, "Yg=="]])
    assert answers[4]["assignment"] == "Yg==" and answers[5]["assignment"] == "YQ=="
    assert gc.groups["g"].state == STABLE
    return m1, m2


def test_two_members_join_and_sync():
    gc = coordinator()
    two_members(gc)


def test_a_third_member_starts_a_rebalance():
    gc = coordinator()
    m1, m2 = two_members(gc)
    assert join(gc, 6, 100) == {}
    assert gc.groups["g"].state == PREPARING
    # Heartbeats tell the members to rejoin (GroupCoordinator.handleHeartbeat).
    assert heartbeat(gc, 110, m1, 2) == "REBALANCE_IN_PROGRESS"
    assert join(gc, 7, 120, m1) == {}
    answers = join(gc, 8, 130, m2)
    assert set(answers) == {6, 7, 8}
    assert {a["generation_id"] for a in answers.values()} == {3}
    assert len(answers[7]["members"]) == 3


def test_protocol_selection_is_what_every_member_supports():
    gc = coordinator()
    join(gc, 1, 0, protocols=[["roundrobin", ""], ["range", ""]])
    m1 = gc.groups["g"].leader
    join(gc, 2, 1, protocols=[["range", ""]])
    answers = join(gc, 3, 2, m1, protocols=[["roundrobin", ""], ["range", ""]])
    assert answers[3]["protocol_name"] == "range"
    # A member with no protocol in common is refused.
    assert join(gc, 4, 3, protocols=[["sticky", ""]])[4]["error"] == \
        "INCONSISTENT_GROUP_PROTOCOL"


@pytest.mark.parametrize(("protocol", "awaiting_sync"), [
    ("2.1", "REBALANCE_IN_PROGRESS"),  # before KAFKA-10134
    ("2.7", None),                     # KAFKA-10134
])
def test_heartbeat_errors(protocol, awaiting_sync):
    gc = coordinator(protocol)
    join(gc, 1, 0)
    m1 = gc.groups["g"].leader
    assert heartbeat(gc, 1, m1, 1) == awaiting_sync
    assert heartbeat(gc, 1, "nobody", 1) == "UNKNOWN_MEMBER_ID"
    sync(gc, 2, 2, m1, 1, [[m1, ""]])
    assert heartbeat(gc, 3, m1, 1) is None
    assert heartbeat(gc, 3, m1, 0) == "ILLEGAL_GENERATION"
    assert gc.handle("x", {"type": "group-heartbeat", "group_id": "other", "generation_id": 1,
                           "member_id": m1}, 4)[0][1]["error"] == "UNKNOWN_MEMBER_ID"


def test_sync_errors():
    gc = coordinator()
    m1, m2 = two_members(gc)
    assert sync(gc, 9, 40, "nobody", 2)[9]["error"] == "UNKNOWN_MEMBER_ID"
    assert sync(gc, 9, 40, m1, 1)[9]["error"] == "ILLEGAL_GENERATION"
    join(gc, 10, 50)
    assert sync(gc, 9, 60, m1, 2)[9]["error"] == "REBALANCE_IN_PROGRESS"


def test_a_silent_member_is_evicted_and_the_group_rebalances():
    gc = coordinator()
    m1, m2 = two_members(gc)
    assert heartbeat(gc, 500, m1, 2) is None
    assert gc.next_deadline() == 30 + SESSION + 1  # m2's last sign of life: its SyncGroup
    assert gc.tick(30 + SESSION) == []
    assert gc.tick(30 + SESSION + 1) == []
    g = gc.groups["g"]
    assert list(g.members) == [m1] and g.state == PREPARING
    answers = join(gc, 11, 1100, m1)
    assert answers[11]["generation_id"] == 3 and [m[0] for m in answers[11]["members"]] == [m1]
    # A member that stays silent through a rebalance is left out of the next
    # generation when the rebalance timeout ends.
    gc2 = coordinator()
    a, b = two_members(gc2)
    join(gc2, 20, 100, a)
    for t in range(200, 100 + REBALANCE, 500):  # b heartbeats but does not rejoin
        assert heartbeat(gc2, t, b, 2) == "REBALANCE_IN_PROGRESS"
        assert gc2.tick(t) == []
    answers = dict(gc2.tick(100 + REBALANCE))
    assert answers[20]["generation_id"] == 3 and list(gc2.groups["g"].members) == [a]


@pytest.mark.parametrize("protocol", ["2.7", "3.7", "4.1"])
def test_member_id_required_for_join_group_v4(protocol):
    """KIP-394 (2.2.0): JoinGroup v4+ without a member id (the broker says so:
    `require_known_member_id`; 2.1 and older offer JoinGroup up to v3)."""
    gc = coordinator(protocol)
    first = join(gc, 1, 0, known=True)[1]
    assert first["error"] == "MEMBER_ID_REQUIRED" and first["member_id"]
    assert gc.groups["g"].members == {}
    # The pending member holds nothing up once its session passes.
    answers = join(gc, 2, 10, first["member_id"], known=True)
    assert answers[2]["error"] is None and answers[2]["member_id"] == first["member_id"]
    assert answers[2]["leader"] == first["member_id"]
    # A pending member that never comes back stops holding a rebalance back.
    pending = join(gc, 3, 20, known=True)[3]["member_id"]
    sync(gc, 4, 30, first["member_id"], 1, [])
    join(gc, 5, 40, first["member_id"], protocols=[["range", "eA=="]], known=True)
    assert gc.groups["g"].state == PREPARING and pending in gc.groups["g"].pending
    answers = dict(gc.tick(20 + SESSION + 1))
    assert answers[5]["generation_id"] == 2


def test_leave_group():
    gc = coordinator()
    m1, m2 = two_members(gc)
    resp = gc.handle("l", {"type": "leave-group", "group_id": "g", "members": [m2, "x"]},
                     40)[0][1]
    assert resp["members"] == [[m2, None], ["x", "UNKNOWN_MEMBER_ID"]]
    assert gc.groups["g"].state == PREPARING
    answers = join(gc, 12, 50, m1)
    assert answers[12]["generation_id"] == 3


def test_initial_rebalance_delay():
    """KIP-134 (0.11.0): an empty group's first rebalance waits the delay, again
    while new members keep coming, at most the rebalance timeout."""
    gc = coordinator(delay=300)
    assert join(gc, 1, 0) == {}
    assert gc.next_deadline() == 300
    assert join(gc, 2, 200) == {}
    assert gc.tick(300) == []  # a new member came: wait once more
    answers = dict(gc.tick(600))
    assert set(answers) == {1, 2} and answers[1]["generation_id"] == 1


def test_offset_commit_checks_the_generation_and_member():
    gc = coordinator()
    # A "simple" commit: no generation, no member, while the group is empty.
    assert commit(gc, 0, "", -1, group="simple") is None
    assert fetch(gc, "simple") == [["t", 0, 5, 3, "m"]]
    assert commit(gc, 0, "", 1, group="nogroup") == "ILLEGAL_GENERATION"
    join(gc, 1, 0)
    m1 = gc.groups["g"].leader
    assert commit(gc, 1, m1, 1) == "REBALANCE_IN_PROGRESS"  # CompletingRebalance
    sync(gc, 2, 2, m1, 1, [[m1, ""]])
    assert commit(gc, 3, m1, 1, 7) is None
    assert commit(gc, 3, m1, 0) == "ILLEGAL_GENERATION"
    assert commit(gc, 3, "x", 1) == "UNKNOWN_MEMBER_ID"
    assert commit(gc, 3, "", -1) == "UNKNOWN_MEMBER_ID"  # not simple: the group has members
    assert fetch(gc, "g", [["t", 0], ["t", 1]]) == [["t", 0, 7, 3, "m"], ["t", 1, -1, -1, ""]]
    assert fetch(gc, "unknown", [["t", 0]]) == [["t", 0, -1, -1, ""]]


def test_offsets_persist_with_the_controller_state():
    c = ControllerClient(ControllerCore(
        [{"name": "t", "partitions": 1, "replicas": [["A"]]}], 1000, False,
        group_config={"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 100,
                      "max_session_timeout_ms": 300_000}))
    effects = c.core.on_request(7, {"type": "offset-commit", "group_id": "g",
                                    "generation_id": -1, "member_id": "",
                                    "offsets": [["t", 0, 42, 1, ""]]}, 0)
    # The offsets are written before the answer goes out.
    assert [type(e) for e in effects] == [WriteControllerState, Respond]
    c.take(effects)
    assert c.saved is not None
    restarted = ControllerCore([{"name": "t", "partitions": 1, "replicas": [["A"]]}], 1000,
                               False, saved=c.saved)
    answer = restarted.on_request(8, {"type": "offset-fetch", "group_id": "g",
                                      "partitions": None}, 0)
    assert answer == [Respond(8, {"error": None, "offsets": [["t", 0, 42, 1, ""]]})]
    assert restarted.groups.groups["g"].state == EMPTY


def test_join_waits_in_the_controller_and_is_answered_by_a_later_input():
    c = ControllerCore([{"name": "t", "partitions": 1, "replicas": [["A"]]}], 1000, False,
                       group_config={"initial_rebalance_delay_ms": 50,
                                     "min_session_timeout_ms": 100,
                                     "max_session_timeout_ms": 300_000})
    msg = {"type": "join-group", "group_id": "g", "member_id": "", "session_timeout_ms": 500,
           "rebalance_timeout_ms": 1000, "protocol_type": "consumer",
           "protocols": [["range", ""]]}
    assert not any(isinstance(e, Respond) for e in c.on_request(1, msg, 0))
    assert c.next_deadline() == 50
    answers = [e for e in c.tick(50) if isinstance(e, Respond)]
    assert [a.rid for a in answers] == [1] and answers[0].resp["generation_id"] == 1


def test_session_timeout_bounds():
    gc = coordinator()
    assert join(gc, 1, 0, session=50)[1]["error"] == "INVALID_SESSION_TIMEOUT"
    assert gc.handle(2, {"type": "join-group", "group_id": "", "member_id": "",
                         "session_timeout_ms": SESSION, "protocol_type": "consumer",
                         "protocols": [["range", ""]]}, 0)[0][1]["error"] == "INVALID_GROUP_ID"


# -- the brokers' side: broker/kafka/groups.py ---------------------------------------------


def kafka_apis(controller: str):
    async def core(msg: dict[str, Any]) -> dict[str, Any]:
        assert msg == {"type": "metadata"}
        return {"brokers": {"A": "127.0.0.2:9000", "B": "127.0.0.3:9000"}, "partitions": []}
    return KafkaApis("B", "latest", ["A", "B"], [{"name": "t", "partitions": 1}], core,
                     Changes(), controller=controller)


def test_every_broker_is_its_own_coordinator():
    apis = kafka_apis(f"127.0.0.1:{free_port()}")
    v3 = asyncio.run(apis.groups.find_coordinator(3, {"key": "g", "key_type": 0}))
    assert (v3["error_code"], v3["node_id"], v3["host"], v3["port"]) == (0, 1, "127.0.0.3", 9001)
    v4 = asyncio.run(apis.groups.find_coordinator(4, {"key_type": 0,
                                                      "coordinator_keys": ["g", "h"]}))
    assert [(c["key"], c["node_id"], c["port"]) for c in v4["coordinators"]] == [
        ("g", 1, 9001), ("h", 1, 9001)]


def test_an_unreachable_controller_is_coordinator_not_available():
    apis = kafka_apis(f"127.0.0.1:{free_port()}")  # nothing listens there
    resp = asyncio.run(apis.groups.heartbeat(4, {"group_id": "g", "generation_id": 1,
                                                 "member_id": "m"}))
    assert resp["error_code"] == code("COORDINATOR_NOT_AVAILABLE")
