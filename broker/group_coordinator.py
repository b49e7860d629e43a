"""Kafka's classic consumer-group coordinator, sans-IO, kept by the controller.

A modelling choice (broker/PROTOCOL.md, "Consumer groups"): Kafka keeps a group's
state and committed offsets in the replicated `__consumer_offsets` topic, led by
the group's coordinator broker; the model keeps them in the controller's
metadata store, where ZooKeeper kept offsets before 0.8.2. Group coordination is
not what isrlab studies, and this way a group survives any broker fault. Every
broker answers FindCoordinator with itself and forwards the group's requests
here (broker/kafka/groups.py).

The rules restate GroupCoordinator.scala and GroupMetadata.scala of apache/kafka
(core/src/main/scala/kafka/coordinator/group/, tags 0.11.0.0, 2.1.0, 2.7.0,
3.7.0; 0.10.2.0 under kafka/coordinator/); each names the release and JIRA/KIP
it follows. Release differences come from the `Features` row
(`group_heartbeat_while_awaiting_sync`) and the release's config defaults
(`group.initial.rebalance.delay.ms`, the session timeout bounds); differences by
request version (KIP-394's MEMBER_ID_REQUIRED for JoinGroup v4+, the rebalance
timeout from v1) arrive as request fields. Static membership (KIP-345) and
KIP-848's protocol are not modelled: a group instance id is ignored.

`handle(rid, msg, now)` and `tick(now)` return the answers due now as (rid,
answer) pairs: a JoinGroup is answered when its rebalance completes, a
SyncGroup when the leader's assignment arrives, maybe during another request.
Groups' offsets and generations are persisted (`snapshot`); members are not --
after a controller restart they rejoin (UNKNOWN_MEMBER_ID), as after a
coordinator move in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .protocol import Features

# Group states (GroupMetadata.scala; 0.10's AwaitingSync is 2.x's
# CompletingRebalance). Dead is not modelled: groups are never unloaded or deleted.
EMPTY, PREPARING, COMPLETING, STABLE = ("Empty", "PreparingRebalance",
                                        "CompletingRebalance", "Stable")

Answer = tuple[Any, dict[str, Any]]


@dataclass
class Member:
    member_id: str
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[list[str]]  # [name, metadata (base64)], the member's preference order
    last_heartbeat: float
    join_rid: Any = None  # a JoinGroup waiting for the rebalance to complete
    sync_rid: Any = None  # a SyncGroup waiting for the leader's assignment
    awaiting_join: bool = False
    awaiting_sync: bool = False
    assignment: str = ""  # base64

    def names(self) -> list[str]:
        return [p[0] for p in self.protocols]


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # KIP-394 (2.2): member ids handed out with MEMBER_ID_REQUIRED, not joined yet;
    # id -> (when handed out, session timeout).
    pending: dict[str, tuple[float, int]] = field(default_factory=dict)
    join_deadline: float | None = None
    # KIP-134 InitialDelayedJoin: the rebalance of an empty group waits this long
    # again while new members keep coming, up to the rebalance timeout.
    initial_remaining: int | None = None
    new_member_added: bool = False
    # (topic, partition) -> [offset, leader epoch, metadata]
    offsets: dict[tuple[str, int], list[Any]] = field(default_factory=dict)
    via: str | None = None  # the broker the group's latest request came through

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        """GroupMetadata.supportsProtocols: an empty group takes any non-empty
        protocol type and list; otherwise the type must match and one of the
        protocols must be supported by every member."""
        if self.state == EMPTY and not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and any(
            all(n in m.names() for m in self.members.values()) for n in names)

    def select_protocol(self) -> str:
        """GroupMetadata.selectProtocol: the candidates are the protocols every
        member supports; each member votes for its first candidate; most votes
        wins. Kafka leaves a tie to a hash map's order; here the leader's
        preference breaks it, so the choice is deterministic."""
        candidates = [n for n in self.members[self.leader or next(iter(self.members))].names()
                      if all(n in m.names() for m in self.members.values())]
        votes = {n: 0 for n in candidates}
        for m in self.members.values():
            votes[next(n for n in m.names() if n in votes)] += 1
        return max(candidates, key=lambda n: votes[n])  # first of the leader's on a tie


class GroupCoordinator:
    def __init__(self, features: Features, initial_rebalance_delay_ms: int,
                 min_session_timeout_ms: int, max_session_timeout_ms: int,
                 saved: dict[str, Any] | None = None, member_id_seed: str = "0") -> None:
        self.features = features
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        # Member ids must not repeat across controller restarts (a stale member
        # would pass for a new one): the shell gives a fresh seed per incarnation.
        self.member_id_seed = member_id_seed
        self._next_member = 0
        self.groups: dict[str, Group] = {}
        self.dirty = False  # offsets or generations changed since the last snapshot
        self._out: list[Answer] = []
        for gid, raw in (saved or {}).items():
            g = self.groups[gid] = Group(gid, generation=int(raw.get("generation", 0)))
            for t, p, off, epoch, meta in raw.get("offsets", []):
                g.offsets[(t, p)] = [off, epoch, meta]

    # -- inputs ------------------------------------------------------------------------

    def handle(self, rid: Any, msg: dict[str, Any], now: float) -> list[Answer]:
        """One forwarded group request; the answers due now (maybe not its own yet)."""
        t = msg["type"]
        gid = msg.get("group_id") or ""
        resp: dict[str, Any] | None
        if t == "join-group":
            resp = self._join(rid, msg, now)
        elif t == "sync-group":
            resp = self._sync(rid, msg, now)
        elif t == "group-heartbeat":
            resp = {"error": self._heartbeat(msg, now)}
        elif t == "leave-group":
            resp = self._leave(msg, now)
        elif t == "offset-commit":
            resp = self._commit(msg, now)
        elif t == "offset-fetch":
            resp = self._fetch(msg)
        else:
            resp = {"error": "INVALID_REQUEST", "message": f"unknown request type {t!r}"}
        if msg.get("id") and gid in self.groups:
            self.groups[gid].via = msg["id"]
        if resp is not None:
            self._out.append((rid, resp))
        return self._take()

    def tick(self, now: float) -> list[Answer]:
        """Time passes: silent members' sessions end, rebalances time out."""
        for g in list(self.groups.values()):
            for mid, (since, timeout) in list(g.pending.items()):
                if now - since > timeout:
                    # GroupCoordinator.onExpirePendingMember... (2.2, KIP-394).
                    del g.pending[mid]
                    self._try_complete_join(g, now)
            for m in list(g.members.values()):
                # MemberMetadata.shouldKeepAlive (2.x): a member with a JoinGroup or
                # SyncGroup in flight is alive; else its last heartbeat counts.
                if m.awaiting_join or m.awaiting_sync:
                    continue
                if now - m.last_heartbeat > m.session_timeout_ms:
                    self._remove_member(g, m.member_id, now, "session-timeout")
            if g.state == PREPARING and g.join_deadline is not None and now >= g.join_deadline:
                self._join_deadline(g, now)
        return self._take()

    def next_deadline(self) -> float:
        out = float("inf")
        for g in self.groups.values():
            for since, timeout in g.pending.values():
                out = min(out, since + timeout + 1)
            for m in g.members.values():
                if not (m.awaiting_join or m.awaiting_sync):
                    out = min(out, m.last_heartbeat + m.session_timeout_ms + 1)
            if g.state == PREPARING and g.join_deadline is not None:
                out = min(out, g.join_deadline)
        return out

    # -- state -------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {gid: {"generation": g.generation,
                      "offsets": [[t, p, *v] for (t, p), v in sorted(g.offsets.items())]}
                for gid, g in sorted(self.groups.items())}

    def status(self) -> dict[str, Any]:
        return {gid: {"state": g.state, "generation": g.generation, "protocol": g.protocol,
                      "leader": g.leader, "members": sorted(g.members), "via": g.via,
                      "offsets": [[t, p, v[0]] for (t, p), v in sorted(g.offsets.items())]}
                for gid, g in sorted(self.groups.items())}

    def _take(self) -> list[Answer]:
        out, self._out = self._out, []
        return out

    # -- JoinGroup ---------------------------------------------------------------------

    def _join(self, rid: Any, msg: dict[str, Any], now: float) -> dict[str, Any] | None:
        gid, mid = msg.get("group_id") or "", msg.get("member_id") or ""
        session = int(msg["session_timeout_ms"])
        if not gid:
            return _join_error("INVALID_GROUP_ID", mid)  # GroupCoordinator.isValidGroupId
        if not self.min_session_timeout_ms <= session <= self.max_session_timeout_ms:
            # group.min/max.session.timeout.ms (0.9+).
            return _join_error("INVALID_SESSION_TIMEOUT", mid)
        g = self.groups.get(gid)
        if g is None:
            if mid:
                return _join_error("UNKNOWN_MEMBER_ID", mid)
            g = self.groups[gid] = Group(gid)
        names = [p[0] for p in msg["protocols"]]
        if not g.supports(msg["protocol_type"], names):
            return _join_error("INCONSISTENT_GROUP_PROTOCOL", mid)
        if not mid:
            mid = f"{msg.get('client_id') or 'member'}-{self.member_id_seed}-{self._next_member}"
            self._next_member += 1
            if msg.get("require_known_member_id"):
                # KIP-394 (2.2.0, KAFKA-7824): a JoinGroup v4+ without a member id is
                # given one and must join again with it; until then it is pending
                # and holds a rebalance back for one session timeout.
                g.pending[mid] = (now, session)
                return _join_error("MEMBER_ID_REQUIRED", mid)
            self._add_member(g, rid, mid, msg, now)
            return None
        if mid in g.pending:
            del g.pending[mid]
            self._add_member(g, rid, mid, msg, now)
            return None
        m = g.members.get(mid)
        if m is None:
            return _join_error("UNKNOWN_MEMBER_ID", mid)
        same = m.protocols == msg["protocols"]
        if g.state == PREPARING:
            self._update_member(m, rid, msg)
            self._try_complete_join(g, now)
            return None
        if g.state == COMPLETING and same:
            # A JoinGroup repeated after its answer got lost: the same answer.
            return self._join_answer(g, m)
        if g.state == STABLE and same and mid != g.leader:
            return self._join_answer(g, m)
        # New metadata, or the leader rejoining (to rebalance on a metadata change).
        self._update_member(m, rid, msg)
        self._prepare_rebalance(g, now)
        return None

    def _add_member(self, g: Group, rid: Any, mid: str, msg: dict[str, Any],
                    now: float) -> None:
        """GroupCoordinator.addMemberAndRebalance."""
        session = int(msg["session_timeout_ms"])
        # JoinGroup v0 has no rebalance timeout: the session timeout is also the
        # rebalance timeout (KIP-62, 0.10.1).
        rebalance = int(msg.get("rebalance_timeout_ms") or -1)
        m = Member(mid, msg.get("client_id") or "", session,
                   rebalance if rebalance > 0 else session, msg["protocol_type"],
                   [list(p) for p in msg["protocols"]], now)
        if g.state == PREPARING and g.generation == 0:
            g.new_member_added = True  # KIP-134: extends the initial delay
        if not g.members:
            g.protocol_type = m.protocol_type  # GroupMetadata.add: the first member's
        g.members[mid] = m
        m.join_rid, m.awaiting_join = rid, True
        if g.leader is None:
            g.leader = mid
        if g.state in (EMPTY, STABLE, COMPLETING):
            self._prepare_rebalance(g, now)
        else:
            self._try_complete_join(g, now)

    def _update_member(self, m: Member, rid: Any, msg: dict[str, Any]) -> None:
        m.protocols = [list(p) for p in msg["protocols"]]
        m.session_timeout_ms = int(msg["session_timeout_ms"])
        rebalance = int(msg.get("rebalance_timeout_ms") or -1)
        m.rebalance_timeout_ms = rebalance if rebalance > 0 else m.session_timeout_ms
        m.join_rid, m.awaiting_join = rid, True

    def _prepare_rebalance(self, g: Group, now: float) -> None:
        """GroupCoordinator.prepareRebalance."""
        if g.state == COMPLETING:
            # resetAndPropagateAssignmentError: members waiting for their
            # assignment learn that a new rebalance started.
            for m in g.members.values():
                m.assignment = ""
                if m.awaiting_sync:
                    self._answer_sync(m, "REBALANCE_IN_PROGRESS", "")
        timeout = g.rebalance_timeout_ms()
        if g.state == EMPTY and self.initial_rebalance_delay_ms > 0:
            # KIP-134 (0.11.0): an empty group's first rebalance waits
            # group.initial.rebalance.delay.ms for more members (InitialDelayedJoin).
            delay = min(self.initial_rebalance_delay_ms, timeout)
            g.join_deadline = now + delay
            g.initial_remaining = max(timeout - delay, 0)
        else:
            g.join_deadline = now + timeout
            g.initial_remaining = None
        g.new_member_added = False
        g.state = PREPARING
        self._try_complete_join(g, now)

    def _try_complete_join(self, g: Group, now: float) -> None:
        """DelayedJoin.tryComplete: every member (and no pending one, KIP-394) has
        joined. The initial delay only ends by its timer."""
        if g.state != PREPARING or g.initial_remaining is not None:
            return
        if all(m.awaiting_join for m in g.members.values()) and not g.pending:
            self._complete_join(g, now)

    def _join_deadline(self, g: Group, now: float) -> None:
        if g.initial_remaining is not None and g.new_member_added and g.initial_remaining > 0:
            # InitialDelayedJoin.onComplete: new members came; wait once more.
            delay = min(self.initial_rebalance_delay_ms, g.initial_remaining)
            g.initial_remaining -= delay
            g.new_member_added = False
            g.join_deadline = now + delay
            return
        self._complete_join(g, now)

    def _complete_join(self, g: Group, now: float) -> None:
        """GroupCoordinator.onCompleteJoin: members that did not rejoin are out;
        the next generation starts."""
        for m in [m for m in g.members.values() if not m.awaiting_join]:
            self._remove_member(g, m.member_id, now, "not-rejoined", update=False)
        g.join_deadline, g.initial_remaining = None, None
        g.generation += 1
        self.dirty = True
        if not g.members:
            g.state, g.protocol, g.protocol_type, g.leader = EMPTY, None, None, None
            return
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.protocol = g.select_protocol()
        g.state = COMPLETING
        for m in g.members.values():
            answer = self._join_answer(g, m)
            rid = m.join_rid
            m.join_rid, m.awaiting_join = None, False
            m.last_heartbeat = now  # completeAndScheduleNextHeartbeatExpiration
            self._out.append((rid, answer))

    def _join_answer(self, g: Group, m: Member) -> dict[str, Any]:
        leader = m.member_id == g.leader
        members = ([[x.member_id, _metadata(x, g.protocol)] for x in g.members.values()]
                   if leader else [])
        return {"error": None, "generation_id": g.generation, "protocol_type": g.protocol_type,
                "protocol_name": g.protocol, "leader": g.leader, "member_id": m.member_id,
                "members": members}

    # -- SyncGroup ---------------------------------------------------------------------

    def _sync(self, rid: Any, msg: dict[str, Any], now: float) -> dict[str, Any] | None:
        g = self.groups.get(msg.get("group_id") or "")
        mid = msg.get("member_id") or ""
        if g is None or mid not in g.members:
            return _sync_error("UNKNOWN_MEMBER_ID")
        if int(msg["generation_id"]) != g.generation:
            return _sync_error("ILLEGAL_GENERATION")
        for key, have in (("protocol_type", g.protocol_type), ("protocol_name", g.protocol)):
            # KIP-559 (2.5.0): SyncGroup v5 names the protocol; a mismatch is refused.
            if msg.get(key) is not None and msg[key] != have:
                return _sync_error("INCONSISTENT_GROUP_PROTOCOL")
        m = g.members[mid]
        if g.state == PREPARING:
            return _sync_error("REBALANCE_IN_PROGRESS")
        m.last_heartbeat = now
        if g.state == STABLE:
            return self._sync_answer(g, m.assignment)
        # CompletingRebalance: wait for the leader's assignment.
        m.sync_rid, m.awaiting_sync = rid, True
        if mid == g.leader:
            given = {a[0]: a[1] for a in msg.get("assignments", [])}
            for x in g.members.values():
                x.assignment = given.get(x.member_id, "")  # missing: empty (KAFKA-3240)
            g.state = STABLE
            for x in g.members.values():
                if x.awaiting_sync:
                    self._answer_sync(x, None, x.assignment, g)
        return None

    def _sync_answer(self, g: Group | None, assignment: str,
                     error: str | None = None) -> dict[str, Any]:
        return {"error": error, "assignment": assignment,
                "protocol_type": g.protocol_type if g else None,
                "protocol_name": g.protocol if g else None}

    def _answer_sync(self, m: Member, error: str | None, assignment: str,
                     g: Group | None = None) -> None:
        rid = m.sync_rid
        m.sync_rid, m.awaiting_sync = None, False
        self._out.append((rid, self._sync_answer(g, assignment, error)))

    # -- Heartbeat, LeaveGroup, membership -----------------------------------------------

    def _heartbeat(self, msg: dict[str, Any], now: float) -> str | None:
        g = self.groups.get(msg.get("group_id") or "")
        mid = msg.get("member_id") or ""
        if g is None or mid not in g.members:
            return "UNKNOWN_MEMBER_ID"
        m = g.members[mid]
        if g.state == COMPLETING and not self.features.group_heartbeat_while_awaiting_sync:
            # Up to 2.6 (0.10.2.0-2.1.0 handleHeartbeat, AwaitingSync /
            # CompletingRebalance): rebalancing, whatever the generation; the
            # session timer is not reset.
            return "REBALANCE_IN_PROGRESS"
        if int(msg["generation_id"]) != g.generation:
            return "ILLEGAL_GENERATION"
        m.last_heartbeat = now
        if g.state == PREPARING:
            return "REBALANCE_IN_PROGRESS"
        # Stable; or CompletingRebalance from 2.7 (KAFKA-10134): a member may
        # heartbeat between its JoinGroup and SyncGroup answers.
        return None

    def _leave(self, msg: dict[str, Any], now: float) -> dict[str, Any]:
        g = self.groups.get(msg.get("group_id") or "")
        out = []
        for mid in msg.get("members", []):
            if g is not None and mid in g.pending:
                del g.pending[mid]  # KIP-394: a pending member may leave too
                self._try_complete_join(g, now)
                out.append([mid, None])
            elif g is None or mid not in g.members:
                out.append([mid, "UNKNOWN_MEMBER_ID"])
            else:
                self._remove_member(g, mid, now, "leave-group")
                out.append([mid, None])
        return {"error": None, "members": out}

    def _remove_member(self, g: Group, mid: str, now: float, reason: str,
                       update: bool = True) -> None:
        """GroupCoordinator.removeMemberAndUpdateGroup."""
        m = g.members.pop(mid)
        if m.awaiting_join and m.join_rid is not None:
            self._out.append((m.join_rid, _join_error("UNKNOWN_MEMBER_ID", mid)))
        if m.awaiting_sync and m.sync_rid is not None:
            self._out.append((m.sync_rid, _sync_error("UNKNOWN_MEMBER_ID")))
        if g.leader == mid:
            g.leader = next(iter(g.members), None)
        if not update:
            return
        if g.state in (STABLE, COMPLETING):
            self._prepare_rebalance(g, now)
        elif g.state == PREPARING:
            self._try_complete_join(g, now)

    # -- offsets ------------------------------------------------------------------------

    def _commit(self, msg: dict[str, Any], now: float) -> dict[str, Any]:
        """GroupCoordinator.handleCommitOffsets / doCommitOffsets (0.10.2.0-3.7.0)."""
        gid = msg.get("group_id") or ""
        gen, mid = int(msg.get("generation_id", -1)), msg.get("member_id") or ""
        if not gid:
            return {"error": "INVALID_GROUP_ID"}
        g = self.groups.get(gid)
        if g is None:
            if gen >= 0:
                return {"error": "ILLEGAL_GENERATION"}  # a commit from an old generation
            g = self.groups[gid] = Group(gid)
        if gen < 0 and g.state == EMPTY:
            pass  # the group only stores offsets (a "simple" consumer's commit)
        elif g.state == COMPLETING:
            return {"error": "REBALANCE_IN_PROGRESS"}
        elif mid not in g.members:
            return {"error": "UNKNOWN_MEMBER_ID"}
        elif gen != g.generation:
            return {"error": "ILLEGAL_GENERATION"}
        else:
            g.members[mid].last_heartbeat = now  # a commit counts as a heartbeat
        for t, p, off, epoch, meta in msg.get("offsets", []):
            g.offsets[(t, int(p))] = [int(off), int(epoch), meta]
        self.dirty = True
        return {"error": None}

    def _fetch(self, msg: dict[str, Any]) -> dict[str, Any]:
        """GroupCoordinator.handleFetchOffsets: an offset never committed is -1
        with no error; `partitions` null asks for every committed offset (v2+)."""
        g = self.groups.get(msg.get("group_id") or "")
        offsets = {} if g is None else g.offsets
        asked = msg.get("partitions")
        keys = sorted(offsets) if asked is None else [(t, int(p)) for t, p in asked]
        return {"error": None,
                "offsets": [[t, p, *offsets.get((t, p), [-1, -1, ""])] for t, p in keys]}


def _metadata(m: Member, chosen: str | None) -> str:
    """The member's metadata for the group's chosen (group) protocol."""
    return next((meta for name, meta in m.protocols if name == chosen), "")


def _join_error(error: str, member_id: str) -> dict[str, Any]:
    return {"error": error, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "member_id": member_id, "members": []}


def _sync_error(error: str) -> dict[str, Any]:
    return {"error": error, "assignment": "", "protocol_type": None, "protocol_name": None}
