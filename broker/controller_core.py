"""The controller's decisions (sans-IO): liveness, leader election, ISR store.

Brokers hold a session by heartbeating; a session that is silent for
`broker.session.timeout.ms` ends and the broker is dead (as a ZooKeeper session
expiring). A broker that restarts within that time keeps its ISR membership — the
window KIP-101's first scenario needs. A clean shutdown ends the session at once.
Every leader change bumps the leader epoch; ISR changes bump the partition epoch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class PartitionState:
    topic: str
    partition: int
    replicas: list[str]
    leader: str | None = None
    leader_epoch: int = -1
    isr: list[str] = field(default_factory=list)
    partition_epoch: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Session:
    incarnation: str | None
    addr: str | None
    last_heartbeat_ms: float


class ControllerCore:
    def __init__(self, topics: list[dict[str, Any]], session_timeout_ms: int,
                 unclean_election: bool, saved: dict[str, Any] | None = None,
                 now: float = 0.0) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.unclean_election = unclean_election
        self.sessions: dict[str, Session] = {}
        self.events: list[dict[str, Any]] = []
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        for t in topics:
            for p, replicas in enumerate(t["replicas"]):
                self.partitions[(t["name"], p)] = PartitionState(
                    t["name"], p, list(replicas), isr=list(replicas))
        if saved:
            for raw in saved["partitions"]:
                st = PartitionState(**raw)
                self.partitions[(st.topic, st.partition)] = st
            # After a controller restart every known broker gets one session
            # timeout to say hello again before it is declared dead.
            for b in {r for st in self.partitions.values() for r in st.replicas}:
                self.sessions[b] = Session(None, None, now)
        self.dirty = False

    # -- state ---------------------------------------------------------------------

    @property
    def live(self) -> list[str]:
        return sorted(self.sessions)

    def snapshot(self) -> dict[str, Any]:
        return {"partitions": [st.to_dict() for st in self.partitions.values()]}

    def _event(self, type_: str, **fields: Any) -> None:
        self.events.append({"type": type_, **fields})

    def _changed(self, st: PartitionState) -> None:
        self.dirty = True

    # -- broker sessions ---------------------------------------------------------------

    def register(self, broker: str, incarnation: str, addr: str, now: float) -> None:
        known = broker in {r for st in self.partitions.values() for r in st.replicas}
        if not known:
            raise KeyError(broker)
        self.sessions[broker] = Session(incarnation, addr, now)
        self._event("broker-registered", broker=broker, incarnation=incarnation)
        self._elect_where_needed()

    def heartbeat(self, broker: str, incarnation: str, now: float) -> bool:
        """False if the broker must register (unknown, dead, or a new process)."""
        s = self.sessions.get(broker)
        if s is None:
            return False
        if s.incarnation is None:
            return False
        if s.incarnation != incarnation:
            return False
        s.last_heartbeat_ms = now
        return True

    def shutdown(self, broker: str) -> None:
        """Controlled shutdown: the broker leaves now, leadership moves at once."""
        if broker in self.sessions:
            self._broker_dead(broker, "controlled-shutdown")

    def tick(self, now: float) -> None:
        for broker, s in list(self.sessions.items()):
            if now - s.last_heartbeat_ms > self.session_timeout_ms:
                self._broker_dead(broker, "session-timeout")

    def _broker_dead(self, broker: str, reason: str) -> None:
        del self.sessions[broker]
        self._event("broker-dead", broker=broker, reason=reason)
        for st in self.partitions.values():
            if broker not in st.replicas or st.leader_epoch < 0:
                continue
            if st.leader == broker:
                self._elect(st)
            elif broker in st.isr and len(st.isr) > 1:
                st.isr = [r for r in st.isr if r != broker]
                st.partition_epoch += 1
                self._event("isr-shrink", topic=st.topic, partition=st.partition,
                            leader_epoch=st.leader_epoch, isr=list(st.isr), reason=reason)
                self._changed(st)

    # -- elections ---------------------------------------------------------------------

    def _elect_where_needed(self) -> None:
        for st in self.partitions.values():
            if st.leader_epoch < 0:
                # First election waits for every replica, so the preferred replica
                # (the first) always starts as leader and runs are repeatable.
                if all(r in self.sessions for r in st.replicas):
                    self._elect(st)
            elif st.leader is None:
                self._elect(st)

    def _elect(self, st: PartitionState) -> None:
        live_isr = [r for r in st.replicas if r in st.isr and r in self.sessions]
        unclean = False
        if live_isr:
            leader = live_isr[0]
            isr = live_isr
        else:
            live = [r for r in st.replicas if r in self.sessions]
            if live and self.unclean_election:
                leader, isr, unclean = live[0], [live[0]], True
            else:
                leader = None
                # With every ISR member down, the ISR keeps its last member: it is
                # the one replica known to hold everything committed.
                isr = [r for r in st.isr if r in self.sessions] or (
                    [st.leader] if st.leader in st.isr else st.isr[:1])
        if leader is None and st.leader is None and st.leader_epoch >= 0:
            return  # still no leader; nothing changes
        st.leader = leader
        st.leader_epoch += 1
        st.isr = isr
        st.partition_epoch += 1
        self._changed(st)
        if leader is None:
            self._event("leader-offline", topic=st.topic, partition=st.partition,
                        leader_epoch=st.leader_epoch, isr=list(isr))
        else:
            self._event("leader-elected", topic=st.topic, partition=st.partition,
                        leader=leader, leader_epoch=st.leader_epoch, isr=list(isr),
                        unclean=unclean)

    # -- ISR changes proposed by leaders --------------------------------------------

    def alter_partition(self, topic: str, partition: int, broker: str, leader_epoch: int,
                        partition_epoch: int, isr: list[str]) -> tuple[str | None, dict]:
        st = self.partitions.get((topic, partition))
        if st is None:
            return "UNKNOWN_TOPIC_OR_PARTITION", {}
        if st.leader != broker or st.leader_epoch != leader_epoch:
            return "FENCED_LEADER_EPOCH", st.to_dict()
        if st.partition_epoch != partition_epoch:
            return "INVALID_UPDATE_VERSION", st.to_dict()
        if broker not in isr or any(r not in st.replicas for r in isr) or not isr:
            return "INVALID_REQUEST", st.to_dict()
        old = st.isr
        st.isr = list(isr)
        st.partition_epoch += 1
        self._changed(st)
        kind = "isr-shrink" if len(isr) < len(old) else "isr-expand"
        self._event(kind, topic=topic, partition=partition, leader_epoch=leader_epoch,
                    old=old, isr=list(isr), reason="alter-partition")
        return None, st.to_dict()
