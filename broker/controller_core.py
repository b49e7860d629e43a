"""The controller's decisions (sans-IO): liveness, incarnations, elections, ISR store.

Brokers hold a session by heartbeating; a session that is silent for
`broker.session.timeout.ms` ends and the broker is dead (a ZooKeeper session
expiring; a KRaft broker fenced). A restarted broker is a new incarnation and does
not inherit the old one's ISR seat: its registration is refused while the old
session lives (ZooKeeper: the ephemeral /brokers/ids node still exists; KRaft:
DUPLICATE_BROKER_REGISTRATION, ClusterControlManager.registerBroker), so the
controller first handles the old incarnation's death -- drops it from the ISR,
moves or ends its leaderships with a new leader epoch. A clean shutdown ends the
session at once. Every leader change bumps the leader epoch; every ISR change
bumps the partition epoch. The ZooKeeper controller also bumps the leader epoch
when it takes a dead follower out of the ISR, and under 0.10/0.11 with unclean
election on lets the ISR empty (`Features`, broker/protocol.py).

From 4.0 (KIP-966), with `eligible.leader.replicas.version` 1 (off by default in
4.0, on for new clusters from 4.1), the controller also keeps the eligible leader
replicas (ELR): PartitionChangeBuilder.maybePopulateTargetElr and electAnyLeader
at apache/kafka trunk (4.0 line).

Like `BrokerCore`, it takes inputs with a clock value (`now`, ms) -- `start`,
`on_request`, `tick` -- and returns effects, in the order the shell must carry
them out (the controller process, controller.py; the simulator, sim_cluster.py):

- `Event`: a controller event for the event log.
- `WriteControllerState(state)`: persist `state` (what a restarted controller is
  given back as `saved`), at most once per input, before the answer goes out.
- `Respond(rid, resp)`: the answer to request `rid`. Every request is answered
  at once except a consumer group's JoinGroup and SyncGroup (`GROUP_REQUESTS`,
  broker/group_coordinator.py), which may be answered later, by `tick` or
  during another request.

Timers: the shell calls `tick(now)` no later than `next_deadline()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .broker_core import Respond
from .group_coordinator import GroupCoordinator
from .partition import Event
from .protocol import PROTOCOLS, Features
from .protocol import features as features_of


@dataclass
class PartitionState:
    topic: str
    partition: int
    replicas: list[str]
    leader: str | None = None
    leader_epoch: int = -1
    isr: list[str] = field(default_factory=list)
    partition_epoch: int = 0
    # KIP-966 (4.0): replicas that left the ISR below min.insync.replicas and may
    # still lead, and the last known leader once ISR and ELR are empty.
    elr: list[str] = field(default_factory=list)
    last_known_elr: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        # By hand, not dataclasses.asdict (a deep copy): every heartbeat answer
        # carries every partition's state.
        return {"topic": self.topic, "partition": self.partition,
                "replicas": list(self.replicas), "leader": self.leader,
                "leader_epoch": self.leader_epoch, "isr": list(self.isr),
                "partition_epoch": self.partition_epoch, "elr": list(self.elr),
                "last_known_elr": list(self.last_known_elr)}


@dataclass(frozen=True)
class WriteControllerState:
    state: dict[str, Any]  # ControllerCore.snapshot()


ControllerEffect = Event | WriteControllerState | Respond

# The consumer-group requests brokers forward (broker/kafka/groups.py).
GROUP_REQUESTS = frozenset({"join-group", "sync-group", "group-heartbeat", "leave-group",
                            "offset-commit", "offset-fetch"})


@dataclass
class Session:
    incarnation: str | None
    addr: str | None
    last_heartbeat_ms: float
    broker_epoch: int = -1


class ControllerCore:
    def __init__(self, topics: list[dict[str, Any]], session_timeout_ms: int,
                 unclean_election: bool, saved: dict[str, Any] | None = None,
                 now: float = 0.0, protocol: str | None = None,
                 min_insync_replicas: int = 1, elr: bool = False,
                 group_config: dict[str, int] | None = None,
                 member_id_seed: str = "0") -> None:
        self.session_timeout_ms = session_timeout_ms
        self.unclean_election = unclean_election
        # No version given: the newest release's rules.
        self.features: Features = features_of(protocol or PROTOCOLS[-1])
        # KIP-966's feature switched on (eligible.leader.replicas.version 1; the
        # config refuses it before 4.0).
        self.elr_enabled = elr
        self.min_insync_replicas = min_insync_replicas
        self.sessions: dict[str, Session] = {}
        # The epoch of each broker's latest registration (ZooKeeper: the czxid of
        # its node; KRaft: the broker epoch), increasing across the cluster.
        self.broker_epochs: dict[str, int] = {}
        self.next_broker_epoch = 0
        self._restarted = saved is not None
        self._out: list[ControllerEffect] = []
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        for t in topics:
            for p, replicas in enumerate(t["replicas"]):
                self.partitions[(t["name"], p)] = PartitionState(
                    t["name"], p, list(replicas), isr=list(replicas))
        if saved:
            for raw in saved["partitions"]:
                st = PartitionState(**raw)
                self.partitions[(st.topic, st.partition)] = st
            self.broker_epochs = dict(saved.get("broker_epochs", {}))
            self.next_broker_epoch = int(saved.get("next_broker_epoch", 0))
            # After a controller restart every known broker gets one session
            # timeout to say hello again before it is declared dead.
            for b in {r for st in self.partitions.values() for r in st.replicas}:
                self.sessions[b] = Session(None, None, now, self.broker_epochs.get(b, -1))
        self._dirty = False  # the state changed since it was last written
        # Consumer groups (a modelling choice: broker/PROTOCOL.md "Consumer groups").
        gc = group_config or {}
        self.groups = GroupCoordinator(
            self.features,
            gc.get("initial_rebalance_delay_ms", 0), gc.get("min_session_timeout_ms", 0),
            gc.get("max_session_timeout_ms", 1_800_000),
            (saved or {}).get("groups"), member_id_seed)

    # -- inputs (both shells: the controller process and the simulator) ---------------

    def start(self, now: float) -> list[ControllerEffect]:
        """The first effects of a starting controller."""
        self._event("started", restarted=self._restarted)
        return self._finish()

    def on_request(self, rid: Any, msg: dict[str, Any], now: float) -> list[ControllerEffect]:
        """A broker's register, heartbeat, alter-partition or shutdown, or the
        harness's status; answered at once by Respond(rid). A group request may
        be answered later; its effects may answer others."""
        if msg.get("type") in GROUP_REQUESTS:
            return self._group_answers(self.groups.handle(rid, msg, now))
        resp = self._handle(msg, now)
        effects = self._finish()
        effects.append(Respond(rid, resp))
        return effects

    def tick(self, now: float) -> list[ControllerEffect]:
        """Time passes: sessions that stayed silent too long end."""
        self._expire_sessions(now)
        return self._group_answers(self.groups.tick(now))

    def _group_answers(self, answers: list[tuple[Any, dict[str, Any]]]
                       ) -> list[ControllerEffect]:
        # Committed offsets are written before any answer goes out.
        if self.groups.dirty:
            self.groups.dirty = False
            self._dirty = True
        effects = self._finish()
        effects.extend(Respond(rid, resp) for rid, resp in answers)
        return effects

    def _handle(self, msg: dict[str, Any], now: float) -> dict[str, Any]:
        t = msg["type"]
        if t == "status":
            return self.status()
        if t == "register":
            try:
                err, epoch = self._register(msg["id"], msg["incarnation"], msg["addr"], now,
                                            int(msg.get("previous_broker_epoch", -1)))
            except KeyError:
                return {"error": "INVALID_REQUEST", "message": f"unknown broker {msg['id']}"}
            if err:
                return {"error": err}
            return {**self.metadata(), "broker_epoch": epoch}
        if t == "heartbeat":
            if not self._heartbeat(msg["id"], msg["incarnation"], now):
                return {"error": "UNKNOWN_BROKER"}
            return self.metadata()
        if t == "alter-partition":
            err, state = self._alter_partition(
                msg["topic"], msg["partition"], msg["id"], msg["leader_epoch"],
                msg["partition_epoch"], msg["isr"], msg.get("broker_epochs"))
            return {"error": err, "state": state}
        if t == "shutdown":
            self._shutdown(msg["id"], msg.get("incarnation"))
            return {"error": None}
        return {"error": "INVALID_REQUEST", "message": f"unknown request type {t!r}"}

    def metadata(self) -> dict[str, Any]:
        """What a registration or heartbeat answer carries: live brokers and every
        partition's state."""
        return {"error": None, "live": self.live,
                "brokers": {b: s.addr for b, s in self.sessions.items() if s.addr},
                "partitions": [st.to_dict() for st in self.partitions.values()]}

    def status(self) -> dict[str, Any]:
        return {"error": None, "node": "controller", "live": self.live,
                "partitions": [st.to_dict() for st in self.partitions.values()],
                "groups": self.groups.status()}

    # -- state ---------------------------------------------------------------------

    @property
    def live(self) -> list[str]:
        return sorted(self.sessions)

    def snapshot(self) -> dict[str, Any]:
        return {"partitions": [st.to_dict() for st in self.partitions.values()],
                "broker_epochs": dict(self.broker_epochs),
                "next_broker_epoch": self.next_broker_epoch,
                "groups": self.groups.snapshot()}

    # -- plumbing ----------------------------------------------------------------------

    def _event(self, type_: str, **fields: Any) -> None:
        self._out.append(Event(type_, fields))

    def _changed(self, st: PartitionState) -> None:
        self._dirty = True

    def _finish(self) -> list[ControllerEffect]:
        """This input's effects: its events, then its state if it changed."""
        if self._dirty:
            self._dirty = False
            self._out.append(WriteControllerState(self.snapshot()))
        out, self._out = self._out, []
        return out

    @property
    def _elr(self) -> bool:
        return self.features.eligible_leader_replicas and self.elr_enabled

    # -- broker sessions ---------------------------------------------------------------

    def _register(self, broker: str, incarnation: str, addr: str, now: float,
                  previous_broker_epoch: int = -1) -> tuple[str | None, int]:
        """Register one incarnation of `broker`: (error, broker epoch).

        A second incarnation is refused while the first one's session lives
        (ZooKeeper: NODE_EXISTS on the ephemeral broker node; KRaft:
        DUPLICATE_BROKER_REGISTRATION), so the old one's death is handled first.
        `previous_broker_epoch` is the broker's clean-shutdown marker (KIP-966):
        the epoch it shut down cleanly in, or -1.
        """
        known = broker in {r for st in self.partitions.values() for r in st.replicas}
        if not known:
            raise KeyError(broker)
        self._expire_sessions(now)
        old = self.sessions.get(broker)
        if old is not None and old.incarnation == incarnation:
            old.addr, old.last_heartbeat_ms = addr, now
            return None, old.broker_epoch
        if old is not None and old.incarnation is not None:
            error = ("DUPLICATE_BROKER_REGISTRATION" if self.features.quorum == "kraft"
                     else "NODE_EXISTS")
            self._event("registration-refused", broker=broker, incarnation=incarnation,
                        error=error)
            return error, -1
        unclean = (self._elr and broker in self.broker_epochs
                   and previous_broker_epoch != self.broker_epochs[broker])
        epoch = self.next_broker_epoch
        self.next_broker_epoch += 1
        self.broker_epochs[broker] = epoch
        self.sessions[broker] = Session(incarnation, addr, now, epoch)
        self._dirty = True
        self._event("broker-registered", broker=broker, incarnation=incarnation,
                    broker_epoch=epoch, unclean_shutdown=unclean)
        if unclean:
            self._unclean_shutdown(broker)
        self._elect_where_needed()
        return None, epoch

    def _heartbeat(self, broker: str, incarnation: str, now: float) -> bool:
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

    def _shutdown(self, broker: str, incarnation: str | None = None) -> None:
        """Controlled shutdown: the broker leaves now, leadership moves at once."""
        s = self.sessions.get(broker)
        if s is not None and (incarnation is None or s.incarnation in (None, incarnation)):
            self._broker_dead(broker, "controlled-shutdown")

    def _expire_sessions(self, now: float) -> None:
        for broker, s in list(self.sessions.items()):
            if now - s.last_heartbeat_ms > self.session_timeout_ms:
                self._broker_dead(broker, "session-timeout")

    def next_deadline(self) -> float:
        """The earliest time (ms) a session can time out: when `tick` has work."""
        groups = self.groups.next_deadline()
        if not self.sessions:
            return groups
        # _expire_sessions' test is strict (now - last > timeout): due one ms after.
        return min(groups, min(s.last_heartbeat_ms for s in self.sessions.values())
                   + self.session_timeout_ms + 1)

    def _broker_dead(self, broker: str, reason: str) -> None:
        del self.sessions[broker]
        self._event("broker-dead", broker=broker, reason=reason)
        for st in self.partitions.values():
            if broker not in st.replicas or st.leader_epoch < 0:
                continue
            if st.leader == broker:
                self._elect(st)
            elif broker in st.isr and (len(st.isr) > 1 or self._elr):
                # Without the ELR the last ISR member stays (it holds everything
                # committed); with it the ISR may empty, the member moving to the ELR.
                if self.features.controller_isr_removal_bumps_leader_epoch:
                    # The ZooKeeper controller writes a new leader epoch of the same
                    # leader (ReplicaStateMachine OfflineReplica ->
                    # doRemoveReplicasFromIsr -> LeaderAndIsr.newLeaderAndIsr).
                    st.leader_epoch += 1
                self._set_isr(st, [r for r in st.isr if r != broker], reason)
            elif broker in st.elr and self._elr and not st.isr:
                pass  # a dead ELR member stays eligible until it returns uncleanly

    def _unclean_shutdown(self, broker: str) -> None:
        """KIP-966 handleBrokerUncleanShutdown: out of every ISR and ELR."""
        for st in self.partitions.values():
            if broker in st.isr or broker in st.elr:
                st.elr = [r for r in st.elr if r != broker]
                self._set_isr(st, [r for r in st.isr if r != broker], "unclean-shutdown",
                              unclean=(broker,))

    def _set_isr(self, st: PartitionState, isr: list[str], reason: str,
                 unclean: tuple[str, ...] = ()) -> None:
        old = st.isr
        self._update_elr(st, old, isr, unclean)
        st.isr = list(isr)
        st.partition_epoch += 1
        self._changed(st)
        kind = "isr-shrink" if len(isr) < len(old) else "isr-expand"
        self._event(kind, topic=st.topic, partition=st.partition, leader_epoch=st.leader_epoch,
                    old=old, isr=list(isr), elr=list(st.elr), reason=reason)

    def _update_elr(self, st: PartitionState, old_isr: list[str], new_isr: list[str],
                    unclean: tuple[str, ...] = ()) -> None:
        """PartitionChangeBuilder.maybePopulateTargetElr (KIP-966)."""
        if not self._elr:
            return
        if len(new_isr) >= self.min_insync_replicas:
            st.elr, st.last_known_elr = [], []
            return
        candidates = set(st.elr) | set(old_isr)
        st.elr = [r for r in st.replicas
                  if r in candidates and r not in new_isr and r not in unclean]

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
        if self._elr:
            self._elect_with_elr(st)
            return
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
                # the one replica known to hold everything committed -- except in
                # 0.10/0.11 with unclean election on (removeReplicaFromIsr), where
                # it empties (here no replica is live: one would have been elected).
                isr = [r for r in st.isr if r in self.sessions] or (
                    [] if self.unclean_election
                    and self.features.isr_empties_under_unclean_election
                    else [st.leader] if st.leader in st.isr else st.isr[:1])
        if leader is None and st.leader is None and st.leader_epoch >= 0:
            return  # still no leader; nothing changes
        self._new_leader(st, leader, isr, unclean)

    def _elect_with_elr(self, st: PartitionState) -> None:
        """PartitionChangeBuilder.electAnyLeader with the ELR (KIP-966, 4.0 line).

        Dead replicas leave the ISR, even the last one (into the ELR below min ISR).
        The leader is the first live ISR member; with the ISR empty, the first live
        ELR member; with both empty, the last known leader if it is live (Kafka's
        balanced recovery); then an unclean election if enabled.
        """
        old_isr = list(st.isr)
        live_isr = [r for r in st.replicas if r in st.isr and r in self.sessions]
        self._update_elr(st, old_isr, live_isr)
        via = "isr"
        leader = live_isr[0] if live_isr else None
        if leader is None:
            live_elr = [r for r in st.elr if r in self.sessions]
            if live_elr:
                leader, via = live_elr[0], "elr"
        if leader is None and not st.elr and len(st.last_known_elr) == 1 \
                and st.last_known_elr[0] in self.sessions:
            leader, via = st.last_known_elr[0], "last-known-leader"
        if leader is None and self.unclean_election:
            live = [r for r in st.replicas if r in self.sessions]
            if live:
                leader, via = live[0], "unclean"
        if leader is None:
            if not live_isr and st.leader is not None and not st.last_known_elr:
                st.last_known_elr = [st.leader]
            if st.leader is None and st.leader_epoch >= 0 and st.isr == live_isr:
                return  # still no leader; nothing changes
            self._new_leader(st, None, live_isr, False)
            return
        isr = live_isr if via == "isr" else [leader]
        if via != "isr":
            st.elr = [r for r in st.elr if r != leader]
        if via in ("last-known-leader", "unclean"):
            st.elr = []  # an unclean election clears the ELR fields
        st.last_known_elr = []
        if via == "elr":
            self._update_elr(st, old_isr, isr)
        self._new_leader(st, leader, isr, via in ("last-known-leader", "unclean"), via)

    def _new_leader(self, st: PartitionState, leader: str | None, isr: list[str],
                    unclean: bool, via: str = "isr") -> None:
        st.leader = leader
        st.leader_epoch += 1
        st.isr = list(isr)
        st.partition_epoch += 1
        self._changed(st)
        if leader is None:
            self._event("leader-offline", topic=st.topic, partition=st.partition,
                        leader_epoch=st.leader_epoch, isr=list(isr), elr=list(st.elr))
        else:
            self._event("leader-elected", topic=st.topic, partition=st.partition,
                        leader=leader, leader_epoch=st.leader_epoch, isr=list(isr),
                        unclean=unclean, elr=list(st.elr), via=via)

    # -- ISR changes proposed by leaders --------------------------------------------

    def _alter_partition(self, topic: str, partition: int, broker: str, leader_epoch: int,
                         partition_epoch: int, isr: list[str],
                         broker_epochs: dict[str, int | None] | None = None
                         ) -> tuple[str | None, dict]:
        st = self.partitions.get((topic, partition))
        if st is None:
            return "UNKNOWN_TOPIC_OR_PARTITION", {}
        if st.leader != broker or st.leader_epoch != leader_epoch:
            return "FENCED_LEADER_EPOCH", st.to_dict()
        if st.partition_epoch != partition_epoch:
            return "INVALID_UPDATE_VERSION", st.to_dict()
        if broker not in isr or any(r not in st.replicas for r in isr) or not isr:
            return "INVALID_REQUEST", st.to_dict()
        added = [r for r in isr if r not in st.isr]
        if self.features.fenced_replicas_kept_out_of_isr and any(
                r not in self.sessions for r in added):
            # KIP-841: a fenced or shutting-down broker does not join the ISR.
            return "INELIGIBLE_REPLICA", st.to_dict()
        if self.features.alter_partition_broker_epochs:
            # KIP-903: the follower's fetches came from this broker epoch; a stale
            # incarnation (restarted since, maybe without its data) is refused.
            for r in added:
                known = (broker_epochs or {}).get(r)
                s = self.sessions.get(r)
                if known is not None and (s is None or s.broker_epoch != known):
                    return "INELIGIBLE_REPLICA", st.to_dict()
        self._set_isr(st, list(isr), "alter-partition")
        return None, st.to_dict()
