"""Partition: one replica's replication state machine (sans-IO).

It takes requests, responses, controller metadata and a clock value (`now`, in
ms) and returns response dicts plus a list of effects for the shell to carry out
(write the log, write the epoch checkpoint, tell the controller about an ISR
change, publish an event). No sockets, files, threads or wall clock in here, so
the same object runs in the broker process and in a deterministic simulator.

The protocol version is only looked up once, as its row of features
(`broker.protocol.FEATURES`, docs/protocol-versions.md); every version-dependent
step below asks one feature: leader epochs, how a new follower truncates, how a
leader answers OffsetsForLeaderEpoch, KIP-279 iteration, KIP-320 fencing, the
epoch entry on becoming leader, the KAFKA-7128 ISR join, HW frozen below min ISR,
a ZooKeeper-era follower ignoring a leader of -1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import BrokerConfig
from .epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache
from .log import Log, Record
from .producer_state import (
    UNSUPPORTED_VERSION,
    ProducerBatchHeader,
    ProducerStateManager,
    increment_sequence,
)
from .protocol import Features
from .protocol import features as features_of

MAX_FETCH_RECORDS = 500
# A truncate event lists at most this many of the records it removed (the first
# ones, lowest offsets); `removed_count` always says how many there were.
MAX_TRUNCATED_LISTED = 50

# Which rule made a follower truncate, as a truncate event's `rule`
# (docs/run-directory.md): to its HW (0.10, or no epoch to ask about, or an
# UNDEFINED OffsetsForLeaderEpoch answer), to an OffsetsForLeaderEpoch answer
# (KIP-101/KIP-279), to the diverging epoch a Fetch answer named (KAFKA-10554),
# to the leader's LEO after OFFSET_OUT_OF_RANGE.
TRUNCATION_RULES = ("hw", "offsets_for_leader_epoch", "diverging_epoch", "offset_out_of_range")
# The controller's refusals of an ISR change that an AlterIsr leader does not retry:
# it waits for newer partition state (2.7.0 handleAlterIsrResponse; 3.7.0
# handleAlterPartitionError adds INVALID_REQUEST).
ISR_CHANGE_GIVE_UP = ("FENCED_LEADER_EPOCH", "INVALID_UPDATE_VERSION",
                      "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_REQUEST")


# -- effects ---------------------------------------------------------------------


@dataclass(frozen=True)
class AppendRecords:
    records: tuple[Record, ...]


@dataclass(frozen=True)
class TruncateLog:
    offset: int


@dataclass(frozen=True)
class WriteEpochCache:
    entries: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class ProposeIsr:
    """Ask the controller to change the ISR (Kafka's AlterPartition)."""

    isr: tuple[str, ...]
    leader_epoch: int
    partition_epoch: int
    # KIP-903: the broker epoch each follower last fetched with (None: not known).
    broker_epochs: tuple[tuple[str, int | None], ...] = ()


@dataclass(frozen=True)
class HaltBroker:
    """Stop this broker (0.10-2.0 handleOffsetOutOfRange: fatal, then exit)."""

    reason: str


@dataclass(frozen=True)
class Event:
    type: str
    fields: dict[str, Any]


Effect = AppendRecords | TruncateLog | WriteEpochCache | ProposeIsr | HaltBroker | Event


class LeaderAppend(tuple):  # type: ignore[type-arg]
    """What append_batch_as_leader did. It unpacks as (error, base offset, effects),
    as before idempotence, and also says whether the batch was a retry of one
    already in the log (`duplicate`: nothing appended, the offsets are the
    original batch's) and the batch's `last_offset` (what an acks=all produce
    waits for the HW to pass)."""

    error: str | None
    offset: int | None
    effects: list[Effect]
    last_offset: int | None
    duplicate: bool

    def __new__(cls, error: str | None, offset: int | None, effects: list[Effect],
                last_offset: int | None = None, duplicate: bool = False) -> LeaderAppend:
        self = super().__new__(cls, (error, offset, effects))
        self.error, self.offset, self.effects = error, offset, effects
        self.last_offset, self.duplicate = last_offset, duplicate
        return self


@dataclass
class RemoteReplica:
    """What a leader knows about one follower (Kafka's Replica on the leader)."""

    leo: int | None = None
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_leo: int = 0
    broker_epoch: int | None = None  # KIP-903: the epoch its last fetch carried


@dataclass
class Partition:
    topic: str
    partition: int
    node: str
    protocol: str
    config: BrokerConfig
    log: Log = field(default_factory=Log)
    epoch_cache: LeaderEpochCache = field(default_factory=LeaderEpochCache)
    hw: int = 0

    role: str = "none"  # leader | follower | none
    leader: str | None = None
    leader_epoch: int = -1
    isr: list[str] = field(default_factory=list)
    replicas: list[str] = field(default_factory=list)
    partition_epoch: int = -1
    # The leader epoch this replica's current leadership began in (it keeps leading
    # through later epochs of its own: _new_epoch_as_leader).
    leader_since_epoch: int = -1
    # Bumped on every role change, so the shell can drop answers to requests it
    # sent under an earlier role.
    generation: int = 0
    follower_state: str = "fetching"  # truncating | fetching
    remotes: dict[str, RemoteReplica] = field(default_factory=dict)
    pending_isr: tuple[str, ...] | None = None
    # The row of `protocol` in broker.protocol.FEATURES (ConfigError if unknown).
    features: Features = field(init=False, repr=False)
    # KIP-98: the idempotent producers' state, a function of the log (rebuilt from
    # it here, on truncation, and so on a restart: Kafka's loadProducerState).
    producer_state: ProducerStateManager = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.features = features_of(self.protocol)
        self.producer_state = ProducerStateManager.for_features(self.features)
        self.producer_state.rebuild(self.log.records)
        self.lag_time_max_ms = self.config.replica_lag_time_max_ms
        self.hw = min(self.hw, self.log.leo)
        self._effects: list[Effect] = []
        self._isr_check_slot: int | None = None

    # -- helpers -------------------------------------------------------------------

    def _emit(self, type_: str, **fields: Any) -> None:
        fields = {"topic": self.topic, "partition": self.partition,
                  "leader_epoch": self.leader_epoch, **fields}
        self._effects.append(Event(type_, fields))

    def _take(self) -> list[Effect]:
        out, self._effects = self._effects, []
        return out

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        if self.epoch_cache.assign(epoch, start_offset,
                                   self.features.epoch_cache_truncate_and_append):
            self._effects.append(WriteEpochCache(tuple(self.epoch_cache.entries)))
            self._emit("epoch-assigned", epoch=epoch, start_offset=start_offset)

    def _truncate(self, offset: int, reason: str, rule: str) -> None:
        old_leo = self.log.leo
        offset = max(offset, 0)
        removed = self.log.records[offset:]
        if self.log.truncate_to(offset):
            self._effects.append(TruncateLog(offset))
            if self.producer_state.producers:
                # Kafka's truncateAndReload: the state as of the new log end.
                self.producer_state.rebuild(self.log.records)
        if self.epoch_cache.truncate_from_end(offset):
            self._effects.append(WriteEpochCache(tuple(self.epoch_cache.entries)))
        self.hw = min(self.hw, self.log.leo)
        # Emitted even when nothing was removed: "B truncated to its HW" is a
        # protocol step a scenario can wait on, whatever the HW was. What was
        # removed is listed so a report can show what the replica held there.
        self._emit("truncate", **{
            "from": old_leo, "to": self.log.leo, "reason": reason, "rule": rule,
            "removed": [r.to_json() for r in removed[:MAX_TRUNCATED_LISTED]],
            "removed_count": len(removed)})

    # -- controller metadata ---------------------------------------------------------

    def apply_leader_and_isr(self, leader: str | None, leader_epoch: int, isr: list[str],
                             partition_epoch: int, replicas: list[str],
                             now: float) -> list[Effect]:
        """Apply the controller's view of this partition (LeaderAndIsr)."""
        if leader_epoch < self.leader_epoch:
            return []
        if (leader is None and self.role == "follower"
                and self.features.follower_ignores_offline_leader):
            # ZooKeeper era, ReplicaManager.makeFollowers: leader -1 is not a live
            # broker, so "cannot become follower since the new leader -1 is
            # unavailable": makeFollower is not called, the fetcher goes on fetching
            # from the leader it had, in the epoch it had.
            return []
        self.replicas = list(replicas)
        new_epoch = leader_epoch > self.leader_epoch
        role_changes = self.leader != leader or (self.role == "none" and leader is not None)
        # A leader told of a new epoch of its own leadership (the ZooKeeper controller
        # took a dead follower out of the ISR) stays leader: Partition.makeLeader with
        # isNewLeader false.
        stays_leader = (new_epoch and not role_changes and leader == self.node
                        and self.role == "leader")
        if new_epoch and not stays_leader and (
                leader == self.node or self.features.refollow_on_epoch_change):
            role_changes = True
        # Before KAFKA-7164 (2.1) a follower of the same leader only takes the new
        # epoch: Partition.makeFollower returned false, no truncation, same fetcher.
        if new_epoch and not role_changes:
            self.leader_epoch = leader_epoch
        if partition_epoch >= self.partition_epoch:
            old_isr = self.isr
            self.isr = list(isr)
            if partition_epoch > self.partition_epoch:
                self.pending_isr = None
            self.partition_epoch = partition_epoch
            if self.role == "leader" and not role_changes and set(old_isr) != set(isr):
                kind = "isr-shrink" if len(isr) < len(old_isr) else "isr-expand"
                self._emit(kind, old=old_isr, new=list(isr))
        if stays_leader:
            self._new_epoch_as_leader(now)
        if role_changes:
            self.leader_epoch = leader_epoch
            self.leader = leader
            self.generation += 1
            if leader == self.node:
                self._become_leader(now)
            elif leader is not None:
                self._become_follower()
            else:
                self.role = "none"
                self.remotes = {}
                self._emit("became-none")
        if self.role == "leader":
            self._maybe_advance_hw()
        return self._take()

    def _become_leader(self, now: float) -> None:
        self.role = "leader"
        self.leader_since_epoch = self.leader_epoch
        self.follower_state = "fetching"
        self.pending_isr = None
        # Followers in the ISR get a full lag window to show up (Kafka resets
        # lastCaughtUpTime on leader election).
        self.remotes = {r: RemoteReplica(last_caught_up_ms=now, last_fetch_ms=now)
                        for r in self.replicas if r != self.node}
        self._emit("became-leader", leo=self.log.leo, hw=self.hw, isr=list(self.isr))
        if self.features.epoch_on_become_leader:
            self._assign_epoch(self.leader_epoch, self.log.leo)

    def _new_epoch_as_leader(self, now: float) -> None:
        """Partition.makeLeader when this replica already leads (isNewLeader false):
        what it knows of its followers' LEOs stays; each one's caught-up time starts
        again now (resetLastCaughtUpTime); from 2.1 (KAFKA-7415) the new epoch enters
        the epoch cache at the LEO at once, before, at the next append."""
        for r, remote in self.remotes.items():
            if r in self.isr:
                remote.last_caught_up_ms = now
            remote.last_fetch_ms = now
            remote.last_fetch_leader_leo = self.log.leo
        if self.features.epoch_on_become_leader:
            self._assign_epoch(self.leader_epoch, self.log.leo)

    def _become_follower(self) -> None:
        self.role = "follower"
        self.remotes = {}
        self.pending_isr = None
        self._emit("became-follower", leader=self.leader, leo=self.log.leo, hw=self.hw)
        truncation = self.features.truncation
        if truncation == "hw" or (self.log.leo > 0 and not self.epoch_cache.entries):
            # Pre-KIP-101 (or no epochs to ask about): the HW is the only guide.
            self._truncate(self.hw, "high-watermark", "hw")
            self.follower_state = "fetching"
        elif truncation == "offsets_for_leader_epoch" and self.log.leo > 0:
            self.follower_state = "truncating"
        else:
            # Empty log, or truncation on fetch (the leader names the diverging epoch).
            self.follower_state = "fetching"

    # -- leader side -------------------------------------------------------------------

    def _maximal_isr(self) -> set[str]:
        # A pending expansion already counts for the HW (it only makes the HW
        # wait for more replicas); a pending shrink does not count until done.
        return set(self.isr) | set(self.pending_isr or ())

    def _maybe_advance_hw(self) -> None:
        if self.role != "leader":
            return
        if (self.features.hw_frozen_below_min_isr
                and len(self.isr) < self.config.min_insync_replicas):
            return
        leos = [self.log.leo]
        for r in self._maximal_isr():
            if r == self.node:
                continue
            remote = self.remotes.get(r)
            leos.append(remote.leo if remote and remote.leo is not None else 0)
        new_hw = min(leos)
        if new_hw > self.hw:
            old, self.hw = self.hw, new_hw
            self._emit("hw-advance", old=old, new=new_hw)

    def append_as_leader(self, value: int, acks: Any,
                         now: float) -> tuple[str | None, int | None, list[Effect]]:
        """Append one produced value (a batch of one); returns (error, offset, effects)."""
        return self.append_batch_as_leader([value], acks, now)

    def append_batch_as_leader(self, values: list[int], acks: Any, now: float,
                               producer: ProducerBatchHeader | None = None) -> LeaderAppend:
        """Append a producer's batch atomically, as Kafka appends a record batch: all
        of it or none, one effect; returns (error, base offset, effects) as a
        LeaderAppend.

        With `producer` (an idempotent producer's batch, KIP-98) the batch is
        checked against the producer's state first (broker/producer_state.py): an
        error changes nothing; a retry of a batch in the log appends nothing and
        answers with the original batch's offsets (`duplicate`). A producer id of
        -1 (RecordBatch.NO_PRODUCER_ID) is a plain batch."""
        if self.role != "leader":
            return LeaderAppend("NOT_LEADER_OR_FOLLOWER", None, [])
        if acks in ("all", -1) and len(self.isr) < self.config.min_insync_replicas:
            return LeaderAppend("NOT_ENOUGH_REPLICAS", None, [])
        info = None
        if producer is not None and producer.producer_id >= 0:
            if not self.features.idempotence:
                return LeaderAppend(UNSUPPORTED_VERSION, None, [])
            check = self.producer_state.check_append(
                producer.producer_id, producer.producer_epoch, producer.base_sequence,
                len(values))
            # Both outcomes are events: the only trace in a run of a client's own
            # resend (a report shows it beside the send).
            batch = {"producer_id": producer.producer_id,
                     "producer_epoch": producer.producer_epoch,
                     "base_sequence": producer.base_sequence, "count": len(values)}
            if check.error:
                self._emit("producer-refused", error=check.error, **batch)
                return LeaderAppend(check.error, None, self._take())
            if check.duplicate is not None:
                # the record the batch starts with, so a report can name what the
                # resend was (the log may have been trimmed: then nothing)
                held = self.log.read(check.duplicate.first_offset,
                                     check.duplicate.first_offset + 1, 1)
                self._emit("producer-duplicate", offset=check.duplicate.first_offset,
                           last_offset=check.duplicate.last_offset,
                           held=[held[0].epoch, held[0].value] if held else None, **batch)
                return LeaderAppend(None, check.duplicate.first_offset, self._take(),
                                    check.duplicate.last_offset, duplicate=True)
            info = (producer.producer_id, producer.producer_epoch, producer.base_sequence,
                    increment_sequence(producer.base_sequence, len(values) - 1))
        if self.features.leader_epochs:
            self._assign_epoch(self.leader_epoch, self.log.leo)
        recs = tuple(self.log.append(self.leader_epoch, v, info) for v in values)
        if info is not None:
            self.producer_state.apply(recs)
        self._effects.append(AppendRecords(recs))
        self._maybe_advance_hw()
        return LeaderAppend(None, recs[0].offset, self._take(), recs[-1].offset)

    def produce_outcome(self, offset: int, leader_epoch: int) -> str | None:
        """For an acks=all append: None while waiting, else "ok" or an error code."""
        # The append's epoch `leader_epoch` must be of this leadership: a new epoch
        # of the same leader keeps it waiting (DelayedProduce asks only whether the
        # replica still leads, Partition.checkEnoughReplicasReachOffset).
        if self.role != "leader" or leader_epoch < self.leader_since_epoch:
            return "NOT_LEADER_OR_FOLLOWER"
        if self.hw > offset:
            if len(self.isr) < self.config.min_insync_replicas:
                return "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
            return "ok"
        return None

    def _check_fencing(self, current_leader_epoch: int | None, source: str) -> str | None:
        """KIP-320: a request names the leader epoch its sender believes in."""
        if not self.features.leader_epoch_fencing or current_leader_epoch is None:
            return None
        if current_leader_epoch < self.leader_epoch:
            self._emit("fetch-fenced", replica=source, request_epoch=current_leader_epoch)
            return "FENCED_LEADER_EPOCH"
        if current_leader_epoch > self.leader_epoch:
            return "UNKNOWN_LEADER_EPOCH"
        return None

    def fetch_for_replica(self, replica: str, offset: int, last_fetched_epoch: int | None,
                          current_leader_epoch: int | None, max_records: int,
                          now: float, replica_epoch: int | None = None
                          ) -> tuple[dict[str, Any], list[Effect]]:
        """Serve a follower's fetch; the fetch offset is the follower's LEO.

        As Kafka's ReplicaManager.fetchMessages: read first, then update what the
        leader knows of the follower (its LEO, the ISR, the HW). So the answer
        carries the HW as it was before this fetch moved it, and the follower
        learns a new HW one fetch round after the data (docs/catalogue.md#hw-lags-one-fetch).
        """
        resp = self._read_for_replica(replica, offset, last_fetched_epoch,
                                      current_leader_epoch, max_records)
        if resp.get("error") or "diverging_epoch" in resp:
            return resp, self._take()
        self._update_remote(replica, offset, now, replica_epoch)
        self._maybe_expand_isr(replica)
        self._maybe_advance_hw()
        return resp, self._take()

    def reread_for_replica(self, replica: str, offset: int, last_fetched_epoch: int | None,
                           current_leader_epoch: int | None,
                           max_records: int) -> tuple[dict[str, Any], list[Effect]]:
        """A delayed fetch completing (Kafka's DelayedFetch.onComplete): read again,
        with the HW as it is now, without updating the follower's fetch state again."""
        resp = self._read_for_replica(replica, offset, last_fetched_epoch,
                                      current_leader_epoch, max_records)
        return resp, self._take()

    def _read_for_replica(self, replica: str, offset: int, last_fetched_epoch: int | None,
                          current_leader_epoch: int | None, max_records: int) -> dict[str, Any]:
        # KIP-320: the epoch fence comes before the leadership check
        # (Partition.getLocalReplica at 2.1.0).
        err = self._check_fencing(current_leader_epoch, replica)
        if err:
            return {"error": err, "leader_epoch": self.leader_epoch}
        if self.role != "leader":
            return {"error": "NOT_LEADER_OR_FOLLOWER"}
        if replica not in self.replicas or replica == self.node:
            return {"error": "INVALID_REQUEST"}
        if (self.features.truncation == "diverging_epoch" and last_fetched_epoch is not None
                and last_fetched_epoch >= 0 and offset > 0):
            epoch, end = self._end_offset(last_fetched_epoch)
            if epoch == UNDEFINED_EPOCH or end == UNDEFINED_OFFSET:
                # 2.8.0 Partition.readRecords: no end for the follower's epoch at all
                # is OFFSET_OUT_OF_RANGE, not a diverging epoch of (-1, -1).
                return {"error": "OFFSET_OUT_OF_RANGE", "leo": self.log.leo}
            if epoch != last_fetched_epoch or end < offset:
                return {"error": None, "records": [], "hw": self.hw, "leo": self.log.leo,
                        "diverging_epoch": {"epoch": epoch, "end_offset": end}}
        if offset > self.log.leo:
            return {"error": "OFFSET_OUT_OF_RANGE", "leo": self.log.leo}
        records = self.log.read(offset, self.log.leo, max_records)
        if records and records[-1].producer is not None:
            # Whole record batches only, as Kafka serves them: a follower never
            # holds part of an idempotent producer's batch it would have to
            # answer for as leader.
            records = self.log.records[offset:self.log.batch_end(offset + len(records))]
        return {"error": None, "records": [r.to_json() for r in records], "hw": self.hw,
                "leo": self.log.leo}

    def _end_offset(self, epoch: int) -> tuple[int, int]:
        """This release's LeaderEpochFileCache.endOffsetFor (leader and follower alike)."""
        if self.features.epoch_answer == "kip279":
            return self.epoch_cache.end_offset_v20(epoch, self.log.leo)
        return self.epoch_cache.end_offset_for(epoch, self.log.leo)

    def _update_remote(self, replica: str, offset: int, now: float,
                       replica_epoch: int | None = None) -> None:
        remote = self.remotes.setdefault(replica, RemoteReplica(last_caught_up_ms=now))
        remote.leo = offset
        if replica_epoch is not None:
            remote.broker_epoch = replica_epoch
        # Kafka's rule: caught up now if the fetch reached our LEO; caught up as of
        # the previous fetch if it reached the LEO we had then.
        if offset >= self.log.leo:
            remote.last_caught_up_ms = now
        elif offset >= remote.last_fetch_leader_leo:
            remote.last_caught_up_ms = max(remote.last_caught_up_ms, remote.last_fetch_ms)
        remote.last_fetch_leader_leo = self.log.leo
        remote.last_fetch_ms = now

    def _maybe_expand_isr(self, replica: str) -> None:
        if self.pending_isr is not None or replica in self.isr:
            return
        remote = self.remotes[replica]
        assert remote.leo is not None
        if remote.leo < self.hw:
            return
        if self.features.isr_join_waits_for_epoch_start:
            # KAFKA-7128: not before it holds everything from the current epoch's start.
            start = self.epoch_cache.start_offset_of(self.leader_epoch)
            if start is not None and remote.leo < start:
                return
        # No replica.lag.max.messages test here: 0.8.2.2's
        # Partition.updateLeaderHWAndMaybeExpandIsr takes a follower back at the HW
        # however far it trails the LEO -- which is why bursts make the ISR flap.
        self._propose_isr([*self.isr, replica])

    def _propose_isr(self, isr: list[str]) -> None:
        self.pending_isr = tuple(isr)
        epochs: tuple[tuple[str, int | None], ...] = ()
        if self.features.alter_partition_broker_epochs:
            epochs = tuple((r, self.remotes[r].broker_epoch if r in self.remotes else None)
                           for r in isr if r != self.node)
        self._effects.append(ProposeIsr(self.pending_isr, self.leader_epoch, self.partition_epoch,
                                        epochs))

    def isr_proposal_failed(self, error: str | None = None) -> None:
        """The controller did not take our ISR change (`error`; None: no answer).

        With AlterIsr (2.7, KIP-497) a refusal as stale leaves the change pending
        until newer partition state arrives, as Kafka "gives up" waiting for
        metadata; otherwise (no answer, INELIGIBLE_REPLICA, before 2.7 a failed
        ZooKeeper write) the change is dropped and a later fetch or tick proposes
        again."""
        if self.features.isr_change_via_controller and error in ISR_CHANGE_GIVE_UP:
            return
        self.pending_isr = None

    def _isr_check_due(self, now: float) -> bool:
        """Kafka runs the ISR shrink check on a timer, every replica.lag.time.max.ms
        / 2 since 0.10.2.0 (ReplicaManager.startup's "isr-expiration" task,
        KAFKA-4485), not on every tick: a lagging follower leaves up to half a lag
        window after it fell out of sync. Slots count from time zero, as the
        broker-wide task does from the broker's start."""
        slot = int(now // max(self.lag_time_max_ms / 2, 1))
        if slot == self._isr_check_slot:
            return False
        self._isr_check_slot = slot
        return True

    def next_tick_at(self) -> float:
        """When `tick` may have work next: the start of the next ISR check slot
        (infinity while not leader)."""
        if self.role != "leader":
            return float("inf")
        if self._isr_check_slot is None:
            return 0.0
        return (self._isr_check_slot + 1) * max(self.lag_time_max_ms / 2, 1)

    def tick(self, now: float) -> list[Effect]:
        """Time passes: on the ISR check's period, shrink the ISR of followers
        that fell behind."""
        if (self.role != "leader" or not self._isr_check_due(now)
                or self.pending_isr is not None):
            return self._take()
        lag_ms = self.lag_time_max_ms
        lag_max = self.config.replica_lag_max_messages
        out = []
        for r in self.isr:
            if r == self.node:
                continue
            remote = self.remotes.get(r)
            if remote is None:
                continue
            stuck = now - remote.last_caught_up_ms > lag_ms
            if (self.features.caught_up_at_leader_leo and remote.leo is not None
                    and remote.leo == self.log.leo):
                stuck = False  # KAFKA-7152: at the leader's LEO, silent or not
            too_far = (lag_max is not None and remote.leo is not None
                       and self.log.leo - remote.leo > lag_max)
            if stuck or too_far:
                out.append(r)
        if out:
            self._propose_isr([r for r in self.isr if r not in out])
        return self._take()

    def fetch_for_consumer(self, offset: int, max_records: int,
                           current_leader_epoch: int | None = None) -> dict[str, Any]:
        """A consumer's fetch: records below the HW. KIP-320 (2.1): a consumer's
        Fetch (v9+) names the leader epoch it believes in, fenced as a follower's."""
        err = self._check_fencing(current_leader_epoch, "consumer")
        if err:
            self._take()  # the fetch-fenced event is a replica's, not a consumer's
            return {"error": err, "leader_epoch": self.leader_epoch}
        if self.role != "leader":
            return {"error": "NOT_LEADER_OR_FOLLOWER"}
        if offset > self.log.leo or offset < 0:
            return {"error": "OFFSET_OUT_OF_RANGE", "hw": self.hw, "leo": self.log.leo}
        records = self.log.read(offset, self.hw, max_records)
        return {"error": None, "records": [r.to_json() for r in records], "hw": self.hw,
                "leo": self.log.leo, "leader_epoch": self.leader_epoch}

    def list_offsets(self, timestamp: int,
                     current_leader_epoch: int | None = None) -> dict[str, Any]:
        """ListOffsets for a consumer: -2 the log start (0: no retention), -1 the HW
        (what a read_uncommitted consumer may read; there are no transactions, so
        the last stable offset is the HW too). The log keeps no timestamps, so a
        time finds no offset (-1, as Kafka answers for a time after every record).
        From 2.1 (KIP-320, ListOffsets v4) the answer names the leader epoch of the
        record before the offset, and the request is fenced by its current epoch."""
        err = self._check_fencing(current_leader_epoch, "consumer")
        if err:
            self._take()
            return {"error": err}
        if self.role != "leader":
            return {"error": "NOT_LEADER_OR_FOLLOWER"}
        if timestamp == -2:
            offset = 0
        elif timestamp == -1:
            offset = self.hw
        else:
            return {"error": None, "offset": -1, "leader_epoch": -1}
        epoch = self.log.records[offset - 1].epoch if offset > 0 else self.leader_epoch
        return {"error": None, "offset": offset,
                "leader_epoch": epoch if self.features.leader_epochs else -1}

    def offsets_for_leader_epoch(self, epoch: int,
                                 current_leader_epoch: int | None) -> tuple[dict[str, Any],
                                                                            list[Effect]]:
        """The leader's answer to OffsetsForLeaderEpoch(epoch)."""
        answer = self.features.epoch_answer
        if answer == "none":
            return {"error": "INVALID_REQUEST"}, []
        err = self._check_fencing(current_leader_epoch, "offsets-for-leader-epoch")
        if err:
            return {"error": err}, self._take()
        if self.role != "leader":
            return {"error": "NOT_LEADER_OR_FOLLOWER"}, []
        if answer == "kip101":
            end = self.epoch_cache.end_offset_v011(epoch, self.log.leo)
            return {"error": None, "leader_epoch": UNDEFINED_EPOCH, "end_offset": end}, []
        e, end = self._end_offset(epoch)
        return {"error": None, "leader_epoch": e, "end_offset": end}, []

    # -- follower side -------------------------------------------------------------

    def next_follower_request(self) -> dict[str, Any] | None:
        """What the replica fetcher should send next to the leader (None: nothing)."""
        if self.role != "follower" or self.leader is None:
            return None
        base = {"topic": self.topic, "partition": self.partition, "replica_id": self.node,
                "generation": self.generation}
        if self.features.leader_epoch_fencing:
            base["current_leader_epoch"] = self.leader_epoch
        if self.follower_state == "truncating":
            return {"type": "offsets-for-leader-epoch", **base,
                    "leader_epoch_request": self.epoch_cache.latest_epoch}
        on_fetch = self.features.truncation == "diverging_epoch"
        last = self.epoch_cache.latest_epoch if on_fetch else None
        return {"type": "replica-fetch", **base, "offset": self.log.leo,
                "last_fetched_epoch": last, "max_records": MAX_FETCH_RECORDS}

    def on_offsets_for_leader_epoch_response(self, generation: int, resp: dict[str, Any],
                                             now: float) -> list[Effect]:
        if generation != self.generation or self.follower_state != "truncating":
            return []
        if resp.get("error"):
            return []
        end = resp["end_offset"]
        self._emit("epoch-response", requested=self.epoch_cache.latest_epoch,
                   answer_epoch=resp.get("leader_epoch"), end_offset=end)
        if not self.features.epoch_iteration:
            # KIP-101: the one answer is final (UNDEFINED: fall back to the HW).
            if end == UNDEFINED_OFFSET:
                self._truncate(self.hw, "high-watermark", "hw")
            elif end < self.log.leo:
                self._truncate(end, "leader-epoch", "offsets_for_leader_epoch")
            self.follower_state = "fetching"
        else:
            # KIP-279: compare epochs; ask again about an older one until they agree.
            done = self._truncate_kip279(resp["leader_epoch"], end, "offsets_for_leader_epoch")
            if done or self.log.leo == 0:
                self.follower_state = "fetching"
        return self._take()

    def _truncate_kip279(self, leader_epoch: int, leader_end: int, rule: str) -> bool:
        """One KIP-279 truncation round; True when truncation is complete. `rule`
        says where the leader's answer came from (OffsetsForLeaderEpoch, or the
        diverging epoch of a Fetch answer)."""
        leo = self.log.leo
        if leader_end == UNDEFINED_OFFSET:
            self._truncate(self.hw, "high-watermark", "hw")
            return True
        if leader_epoch == UNDEFINED_EPOCH:
            self._truncate(min(leader_end, leo), "leader-epoch", rule)
            return True
        my_epoch, my_end = self._end_offset(leader_epoch)
        if my_end == UNDEFINED_OFFSET:
            self._truncate(min(leader_end, leo), "leader-epoch", rule)
            return True
        if my_epoch != leader_epoch:
            # We never saw the leader's epoch: cut back to where our older epoch
            # ends and ask again about the epoch before it.
            self._truncate(min(my_end, leo), "leader-epoch-iteration", rule)
            return False
        self._truncate(min(my_end, leader_end, leo), "leader-epoch", rule)
        return True

    def on_fetch_response(self, generation: int, resp: dict[str, Any],
                          now: float) -> list[Effect]:
        if generation != self.generation or self.role != "follower":
            return []
        err = resp.get("error")
        if err == "OFFSET_OUT_OF_RANGE":
            leader_leo = resp.get("leo", 0)
            if leader_leo < self.log.leo:
                if (self.features.offset_out_of_range_halts
                        and not self.config.unclean_leader_election_enable):
                    # 0.10-2.0 handleOffsetOutOfRange: truncating would lose data
                    # unclean election is off for, so the broker exits instead.
                    self._emit("halt", reason="offset-out-of-range", leader_leo=leader_leo,
                               leo=self.log.leo)
                    self._effects.append(HaltBroker(
                        f"leader {self.leader}'s LEO {leader_leo} is below this replica's "
                        f"LEO {self.log.leo} and unclean leader election is off"))
                    return self._take()
                self._truncate(leader_leo, "offset-out-of-range", "offset_out_of_range")
            return self._take()
        if err:
            return self._take()
        diverging = resp.get("diverging_epoch")
        if diverging:
            self._truncate_kip279(diverging["epoch"], diverging["end_offset"], "diverging_epoch")
            return self._take()
        appended = []
        for item in resp.get("records", []):
            offset, epoch = item[0], item[1]
            if offset != self.log.leo:
                break
            rec = Record.from_json(item)
            if self.features.leader_epochs and epoch > self.epoch_cache.latest_epoch:
                self._assign_epoch(epoch, offset)
            self.log.append_replicated(rec)
            appended.append(rec)
        if appended:
            # Kafka's origin=Replication: the leader checked these, the follower
            # only takes them into its producer state (KAFKA-6003, 1.0.0).
            self.producer_state.apply(appended)
            # The epoch cache write (if any) comes first in the effect list, before
            # the records, as Kafka assigns the epoch before appending.
            self._effects.append(AppendRecords(tuple(appended)))
        new_hw = min(resp.get("hw", 0), self.log.leo)
        if new_hw != self.hw:
            old, self.hw = self.hw, new_hw
            if new_hw > old:
                self._emit("hw-advance", old=old, new=new_hw)
        return self._take()

    # -- inspection ------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "partition": self.partition, "role": self.role,
            "leader": self.leader, "leader_epoch": self.leader_epoch, "leo": self.log.leo,
            "hw": self.hw, "isr": list(self.isr), "replicas": list(self.replicas),
            "partition_epoch": self.partition_epoch,
            "epoch_cache": [list(e) for e in self.epoch_cache.entries],
            "state": self.follower_state if self.role == "follower" else self.role,
            "pending_isr": list(self.pending_isr) if self.pending_isr is not None else None,
            # A leader's view of each follower's LEO: set only by a fetch that found no
            # diverging epoch, so it says the follower's log matches up to there.
            "remote_leo": {r: m.leo for r, m in self.remotes.items()},
        }
