"""Kafka's consumer-group APIs on the reference broker: FindCoordinator, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch.

The group coordinator lives in the controller (broker/group_coordinator.py; why:
broker/PROTOCOL.md, "Consumer groups"), so every broker is a group's coordinator:
FindCoordinator names the broker asked, and the group requests go on to the
controller as its own JSON requests. A JoinGroup or SyncGroup waits there for the
rebalance, holding its connection, so the requests go over a small pool of kept
connections (one per request in flight; never one per request: isrlab counts
TIME_WAIT sockets). A controller that cannot be reached makes the broker answer
COORDINATOR_NOT_AVAILABLE, and the client looks for a coordinator again.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..wire import AsyncConnection, WireError, parse_addr
from .error_codes import code
from .listener import kafka_listen_address

log = logging.getLogger("broker.kafka")

API_OFFSET_COMMIT, API_OFFSET_FETCH, API_FIND_COORDINATOR, API_JOIN_GROUP = 8, 9, 10, 11
API_HEARTBEAT, API_LEAVE_GROUP, API_SYNC_GROUP = 12, 13, 14
POOL_IDLE_MAX = 8  # connections kept open when idle
REQUEST_TIMEOUT_S = 10.0  # a group request that does not wait for a rebalance
MARGIN_S = 5.0  # on top of a JoinGroup's rebalance timeout
NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"

Handler = Callable[[int, dict[str, Any]], Awaitable[dict[str, Any]]]


class GroupHost(Protocol):
    """What the group APIs read of the broker that serves them (KafkaApis is one)."""

    node: str
    cluster_id: str
    advertised: dict[str, str]  # broker -> its advertised Kafka address
    node_ids: dict[str, int]
    topics: dict[str, int]  # topic -> partition count
    core: Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


def _b64(data: bytes | None) -> str:
    return base64.b64encode(data or b"").decode()


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


class ControllerPool:
    """Kept connections to the controller, one per request in flight."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self._idle: list[AsyncConnection] = []

    async def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        conn = self._idle.pop() if self._idle else AsyncConnection(self.addr)
        try:
            return await conn.request(msg, timeout)
        except WireError as e:
            log.info("%s to the controller: %s", msg.get("type"), e)
            return None
        finally:
            # A failed request has closed its connection; it reconnects when reused.
            if len(self._idle) < POOL_IDLE_MAX:
                self._idle.append(conn)
            else:
                conn.close()

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()


class GroupApis:
    def __init__(self, apis: GroupHost, controller: str) -> None:
        self.apis = apis
        self.pool = ControllerPool(controller)

    def handlers(self) -> dict[int, Handler]:
        return {API_FIND_COORDINATOR: self.find_coordinator, API_JOIN_GROUP: self.join_group,
                API_SYNC_GROUP: self.sync_group, API_HEARTBEAT: self.heartbeat,
                API_LEAVE_GROUP: self.leave_group, API_OFFSET_COMMIT: self.offset_commit,
                API_OFFSET_FETCH: self.offset_fetch}

    async def _forward(self, msg: dict[str, Any],
                       timeout: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
        resp = await self.pool.request({**msg, "id": self.apis.node,
                                        "cluster_id": self.apis.cluster_id}, timeout)
        return resp if resp is not None else {"error": NOT_AVAILABLE}

    # -- FindCoordinator -----------------------------------------------------------------

    async def find_coordinator(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        meta = await self.apis.core({"type": "metadata"}) or {}
        node = self.apis.node
        addr = self.apis.advertised.get(node) or (
            kafka_listen_address(meta["brokers"][node])
            if node in meta.get("brokers", {}) else None)
        key_type = int(body.get("key_type", 0))
        keys = body.get("coordinator_keys") if version >= 4 else [body.get("key")]
        out = []
        for key in keys or []:
            if key_type == 1:
                # No transactions in the model (as init-producer-id refuses them).
                error = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
            elif key_type != 0:
                error = "INVALID_REQUEST"
            else:
                # A broker without a controller session is no coordinator.
                error = None if addr is not None else NOT_AVAILABLE
            host, port = parse_addr(addr) if addr and not error else ("", -1)
            out.append({"key": key, "error_code": code(error), "error_message": None,
                        "node_id": self.apis.node_ids[node] if not error else -1,
                        "host": host, "port": port})
        if version >= 4:
            return {"throttle_time_ms": 0, "coordinators": out}
        return {"throttle_time_ms": 0, **{k: v for k, v in out[0].items() if k != "key"}}

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---------------------------------------

    async def join_group(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        session = int(body["session_timeout_ms"])
        rebalance = int(body.get("rebalance_timeout_ms", -1)) if version >= 1 else -1
        msg = {"type": "join-group", "group_id": body["group_id"],
               "member_id": body["member_id"], "session_timeout_ms": session,
               "rebalance_timeout_ms": rebalance, "protocol_type": body["protocol_type"],
               "protocols": [[p["name"], _b64(p["metadata"])] for p in body["protocols"]],
               # KIP-394 (2.2.0): JoinGroup v4+ without a member id must ask again
               # with the id it is given (not for a static member, KIP-345).
               "require_known_member_id": version >= 4 and not body.get("group_instance_id")}
        wait = max(rebalance, session) / 1000 + MARGIN_S
        resp = await self._forward(msg, wait)
        name = resp.get("protocol_name")
        return {"throttle_time_ms": 0, "error_code": code(resp.get("error")),
                "generation_id": resp.get("generation_id", -1),
                "protocol_type": resp.get("protocol_type"),
                "protocol_name": name if name is not None or version >= 7 else "",
                "leader": resp.get("leader") or "", "skip_assignment": False,
                "member_id": resp.get("member_id", body["member_id"]),
                "members": [{"member_id": m, "group_instance_id": None, "metadata": _unb64(md)}
                            for m, md in resp.get("members", [])]}

    async def sync_group(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        msg = {"type": "sync-group", "group_id": body["group_id"],
               "generation_id": body["generation_id"], "member_id": body["member_id"],
               "protocol_type": body.get("protocol_type"),
               "protocol_name": body.get("protocol_name"),
               "assignments": [[a["member_id"], _b64(a["assignment"])]
                               for a in body.get("assignments", [])]}
        # The answer waits for the leader's assignment, at most a rebalance timeout
        # (unknown here: the longest a session may last).
        resp = await self._forward(msg, REQUEST_TIMEOUT_S + 300)
        return {"throttle_time_ms": 0, "error_code": code(resp.get("error")),
                "protocol_type": resp.get("protocol_type"),
                "protocol_name": resp.get("protocol_name"),
                "assignment": _unb64(resp.get("assignment"))}

    async def heartbeat(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        resp = await self._forward({"type": "group-heartbeat", "group_id": body["group_id"],
                                    "generation_id": body["generation_id"],
                                    "member_id": body["member_id"]})
        return {"throttle_time_ms": 0, "error_code": code(resp.get("error"))}

    async def leave_group(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        # v3+ (KIP-345, 2.4.0) names a batch of members; before, one member id.
        ids = ([m["member_id"] for m in body.get("members", [])] if version >= 3
               else [body["member_id"]])
        resp = await self._forward({"type": "leave-group", "group_id": body["group_id"],
                                    "members": ids})
        members = resp.get("members", [[m, resp.get("error")] for m in ids])
        if version >= 3:
            return {"throttle_time_ms": 0, "error_code": code(resp.get("error")),
                    "members": [{"member_id": m, "group_instance_id": None,
                                 "error_code": code(e)} for m, e in members]}
        return {"throttle_time_ms": 0,
                "error_code": code(resp.get("error") or (members[0][1] if members else None))}

    # -- OffsetCommit, OffsetFetch -----------------------------------------------------------

    def _known(self, topic: str, partition: int) -> bool:
        return topic in self.apis.topics and 0 <= partition < self.apis.topics[topic]

    async def offset_commit(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        offsets, errors = [], {}
        for t in body.get("topics", []):
            for p in t.get("partitions", []):
                key = (t["name"], p["partition_index"])
                if not self._known(*key):
                    # KafkaApis.handleOffsetCommitRequest: a partition not in the
                    # metadata is refused, the others committed.
                    errors[key] = "UNKNOWN_TOPIC_OR_PARTITION"
                    continue
                offsets.append([*key, p["committed_offset"],
                                p.get("committed_leader_epoch", -1),
                                p.get("committed_metadata") or ""])
        error = None
        if offsets:
            # OffsetCommit v0 carries no generation or member: a simple commit.
            gen = body.get("generation_id_or_member_epoch", -1) if version >= 1 else -1
            resp = await self._forward({"type": "offset-commit", "group_id": body["group_id"],
                                        "generation_id": gen,
                                        "member_id": body.get("member_id", ""),
                                        "offsets": offsets})
            error = resp.get("error")
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"],
                 "error_code": code(errors.get((t["name"], p["partition_index"]), error))}
                for p in t.get("partitions", [])]}
            for t in body.get("topics", [])]}

    async def offset_fetch(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        if version >= 8:
            # v8+ (KIP-709, 3.0.0) asks for several groups at once.
            groups = []
            for g in body.get("groups", []):
                error, topics = await self._fetch_group(g["group_id"], g.get("topics"))
                groups.append({"group_id": g["group_id"], "topics": topics,
                               "error_code": code(error)})
            return {"throttle_time_ms": 0, "groups": groups}
        error, topics = await self._fetch_group(body["group_id"], body.get("topics"))
        if error and version < 2:
            # No group-level error before v2: every partition carries it.
            for t in topics:
                for p in t["partitions"]:
                    p["error_code"] = code(error)
        return {"throttle_time_ms": 0, "topics": topics, "error_code": code(error)}

    async def _fetch_group(self, group: str, asked: list[dict[str, Any]] | None
                           ) -> tuple[str | None, list[dict[str, Any]]]:
        def entry(t: str, p: int, off: int = -1, epoch: int = -1, meta: str = "",
                  error: str | None = None) -> dict[str, Any]:
            return {"partition_index": p, "committed_offset": off,
                    "committed_leader_epoch": epoch, "metadata": meta,
                    "error_code": code(error)}
        names = (None if asked is None else
                 [(t["name"], p) for t in asked for p in t["partition_indexes"]])
        resp = await self._forward({"type": "offset-fetch", "group_id": group,
                                    "partitions": names})
        error = resp.get("error")
        got = {(t, p): (off, ep, meta) for t, p, off, ep, meta in resp.get("offsets", [])}
        out: dict[str, list[dict[str, Any]]] = {}
        for t, p in (names if names is not None else list(got)):
            out.setdefault(t, []).append(entry(t, p, *got.get((t, p), (-1, -1, ""))))
        return error, [{"name": t, "partitions": ps} for t, ps in out.items()]
