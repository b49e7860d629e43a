"""One broker's protocol decisions, sans-IO: what the broker process and the
deterministic simulator both drive ("one protocol, two shells").

`Partition` decides replication for one replica; `BrokerCore` decides everything a
broker does around its partitions: the replica fetcher (what to send, backoff
after an error), a produce with acks=all waiting for the HW (Kafka's
DelayedProduce), a follower's empty fetch held at the leader (DelayedFetch),
the controller session (register, heartbeat, register again), AlterPartition,
the HW checkpoint timer, the flush policy and the controlled shutdown.

It takes inputs with a clock value (`now`, ms) and returns effects, in the order
the shell must carry them out:

- `StoreEffect(key, AppendRecords | TruncateLog | WriteEpochCache)`,
  `FlushPartition`, `FlushAll`, `WriteHwCheckpoint`, `WriteCleanShutdown`:
  storage. The durability contract every shell's store keeps: appended records
  are durable once flushed; the epoch checkpoint, the HW checkpoint and the
  clean-shutdown marker are fsynced when written (Kafka fsyncs its checkpoint
  files on every write).
- `Send(tag, to, channel, msg, timeout_ms)`: a request to the controller or a
  broker; its answer (or None: lost, timed out, unreachable) comes back by
  `on_answer(tag, ...)`. One request in flight per channel.
- `Respond(rid, resp, close)`: the answer to request `rid` given to `on_request`,
  now or later; resp None = no answer (acks 0), close = close the connection.
- `Event`: a protocol event for the event log. `HaltBroker`: stop the process.
- `ShutdownDone`: the controlled shutdown finished; the process may exit.

Timers: the shell calls `tick(now)` no later than `next_deadline()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import BrokerConfig
from .epoch_cache import LeaderEpochCache
from .log import Log, Record
from .partition import (
    AppendRecords,
    Effect,
    Event,
    HaltBroker,
    Partition,
    ProposeIsr,
    TruncateLog,
    WriteEpochCache,
)
from .producer_state import ProducerBatchHeader

Key = tuple[str, int]
CONTROLLER = "controller"
HEARTBEAT_TIMEOUT_MS = 1_000
ALTER_PARTITION_TIMEOUT_MS = 2_000
SHUTDOWN_TIMEOUT_MS = 2_000
# A follower's fetch may wait replica.fetch.wait.max.ms at the leader; its socket
# waits this much longer for the answer.
FETCH_TIMEOUT_SLACK_MS = 1_000
NEVER = float("inf")


# -- effects ---------------------------------------------------------------------


@dataclass(frozen=True)
class StoreEffect:
    key: Key
    effect: AppendRecords | TruncateLog | WriteEpochCache


@dataclass(frozen=True)
class FlushPartition:
    key: Key


@dataclass(frozen=True)
class FlushAll:
    pass


@dataclass(frozen=True)
class WriteHwCheckpoint:
    hws: dict[Key, int]


@dataclass(frozen=True)
class WriteCleanShutdown:
    broker_epoch: int | None  # None: clear the marker


@dataclass(frozen=True)
class Send:
    tag: int
    to: str  # CONTROLLER or a broker id
    channel: str  # one request in flight per channel (the shell's connection)
    msg: dict[str, Any]
    timeout_ms: float


@dataclass(frozen=True)
class Respond:
    rid: Any
    resp: dict[str, Any] | None
    close: bool = False


@dataclass(frozen=True)
class ShutdownDone:
    clean: bool


BrokerEffect = (StoreEffect | FlushPartition | FlushAll | WriteHwCheckpoint | WriteCleanShutdown
                | Send | Respond | Event | HaltBroker | ShutdownDone)
# The effects a shell hands to its store (storage.BrokerStore, sim_cluster.MemoryStore:
# `store.perform(effect)`), under the durability contract above.
STORAGE_EFFECTS = (StoreEffect, FlushPartition, FlushAll, WriteHwCheckpoint, WriteCleanShutdown)


@dataclass(frozen=True)
class LoadedPartition:
    """What a broker's files hold for one partition when it starts."""

    records: list[Record]
    epoch_entries: list[tuple[int, int]]
    hw_checkpoint: int


@dataclass
class _Fetcher:
    """Kafka's replica fetcher for one partition: one request in flight, a backoff
    (replica.fetch.backoff.ms) after an error."""

    inflight: int | None = None
    not_before: float = 0.0


@dataclass
class _DelayedProduce:
    rid: Any
    key: Key
    base: int
    last: int
    leader_epoch: int
    deadline: float


@dataclass
class _DelayedFetch:
    rid: Any
    key: Key
    args: tuple
    deadline: float


@dataclass
class _Session:
    """The controller session: register, then heartbeat every interval."""

    registered: bool = False
    inflight: int | None = None
    next_at: float = 0.0


@dataclass
class BrokerCore:
    node: str
    advertise: str
    protocol: str
    config: BrokerConfig
    peers: dict[str, str]
    incarnation: str
    loaded: dict[Key, LoadedPartition]
    # KIP-966: the epoch a clean shutdown left behind (-1: none), used once.
    previous_broker_epoch: int = -1
    clean_marker_present: bool = False

    broker_epoch: int = -1
    partitions: dict[Key, Partition] = field(default_factory=dict)
    hw_checkpointed: dict[Key, int] = field(default_factory=dict)
    cluster_states: list[dict[str, Any]] = field(default_factory=list)
    stopping: bool = False

    def __post_init__(self) -> None:
        self._out: list[BrokerEffect] = []
        self._next_tag = 0
        self._sends: dict[int, tuple[str, Any]] = {}  # tag -> (what, detail)
        self._fetchers: dict[Key, _Fetcher] = {}
        self._produces: list[_DelayedProduce] = []
        self._fetches: list[_DelayedFetch] = []
        self._session = _Session()
        self._appends_since_flush: dict[Key, int] = {}
        self._next_hw_checkpoint = NEVER
        self._producer_ids_handed = 0

    # -- inputs ------------------------------------------------------------------------

    def start(self, now: float) -> list[BrokerEffect]:
        """Load the partitions; the first effects of a starting broker."""
        if self.clean_marker_present:
            self._out.append(WriteCleanShutdown(None))
        for key, lp in sorted(self.loaded.items()):
            log_ = Log(lp.records)
            cache = LeaderEpochCache(lp.epoch_entries)
            if cache.truncate_from_end(log_.leo):
                # A power cut may have taken records the (fsynced) epoch checkpoint names.
                self._out.append(StoreEffect(key, WriteEpochCache(tuple(cache.entries))))
            self.hw_checkpointed[key] = lp.hw_checkpoint
            self.partitions[key] = Partition(key[0], key[1], self.node, self.protocol,
                                             self.config, log_, cache, lp.hw_checkpoint)
        self._event("started", incarnation=self.incarnation, protocol=self.protocol,
                    partitions=[p.status() for p in self.partitions.values()])
        self._next_hw_checkpoint = now + self.config.replica_high_watermark_checkpoint_interval_ms
        self._session.next_at = now
        return self._finish(now)

    def on_request(self, rid: Any, msg: dict[str, Any], now: float) -> list[BrokerEffect]:
        """A request from a client, a follower or the harness; its answer is a
        Respond(rid), now or (produce, a follower's empty fetch) later."""
        resp = self._handle(rid, msg, now)
        if resp is not _LATER:
            self._out.append(resp if isinstance(resp, Respond) else Respond(rid, resp))
        return self._finish(now)

    def on_answer(self, tag: int, resp: dict[str, Any] | None,
                  now: float) -> list[BrokerEffect]:
        """The answer to Send(tag); None if it was lost or timed out."""
        what, detail = self._sends.pop(tag, (None, None))
        if self.stopping and what != "shutdown":
            return self._take()  # the fetchers and the session stopped with the broker
        if what == "session":
            self._on_session_answer(resp, now)
        elif what == "fetch":
            self._on_fetch_answer(detail, tag, resp, now)
        elif what == "alter-partition":
            self._on_alter_partition_answer(detail, resp, now)
        elif what == "shutdown":
            self._shutdown_done(resp is not None and not resp.get("error"))
        return self._finish(now)

    def tick(self, now: float) -> list[BrokerEffect]:
        """Time passes: ISR checks, HW checkpoint, heartbeat, backoffs, delayed ops."""
        if self.stopping:
            return self._finish(now)
        for key, p in self.partitions.items():
            self._apply(key, p.tick(now))
        if now >= self._next_hw_checkpoint:
            self.checkpoint_hw()
            self._next_hw_checkpoint = now + \
                self.config.replica_high_watermark_checkpoint_interval_ms
        return self._finish(now)

    def begin_shutdown(self, now: float) -> list[BrokerEffect]:
        """Kafka's controlled shutdown: tell the controller, then flush and checkpoint."""
        if not self.stopping:
            self.stopping = True
            self._send(CONTROLLER, "shutdown", {"type": "shutdown", "id": self.node,
                                                "incarnation": self.incarnation},
                       SHUTDOWN_TIMEOUT_MS, ("shutdown", None))
        return self._take()

    def next_deadline(self) -> float:
        """The latest time (ms) `tick` must be called next (NEVER: no timer)."""
        if self.stopping:
            return NEVER
        # Asked after every input (the simulator's hottest path): a running
        # minimum, no list.
        due = self._next_hw_checkpoint
        if self._session.inflight is None and self._session.next_at < due:
            due = self._session.next_at
        for d in self._produces:
            if d.deadline < due:
                due = d.deadline
        for d in self._fetches:
            if d.deadline < due:
                due = d.deadline
        parts = self.partitions
        for key, f in self._fetchers.items():
            if f.inflight is None and f.not_before < due and parts[key].role == "follower":
                due = f.not_before
        for p in parts.values():
            t = p.next_tick_at()
            if t < due:
                due = t
        return due

    # -- the shell's questions -----------------------------------------------------------

    def address_of(self, node: str) -> str | None:
        return self.peers.get(node)

    def status(self) -> dict[str, Any]:
        parts = []
        for key, p in self.partitions.items():
            st = p.status()
            st["hw_checkpoint"] = self.hw_checkpointed.get(key, 0)
            parts.append(st)
        return {"error": None, "node": self.node, "incarnation": self.incarnation,
                "protocol": self.protocol, "partitions": parts}

    def checkpoint_hw(self) -> None:
        hws = {key: p.hw for key, p in self.partitions.items()}
        self._out.append(WriteHwCheckpoint(hws))
        self.hw_checkpointed = hws
        for (topic, part), hw in hws.items():
            self._event("hw-checkpoint", topic=topic, partition=part, hw=hw)

    def flush(self) -> None:
        self._out.append(FlushAll())
        for (topic, part), p in self.partitions.items():
            self._event("flush", topic=topic, partition=part, leo=p.log.leo)

    # -- plumbing ----------------------------------------------------------------------

    def _event(self, type_: str, **fields: Any) -> None:
        self._out.append(Event(type_, fields))

    def _take(self) -> list[BrokerEffect]:
        out, self._out = self._out, []
        return out

    def _send(self, to: str, channel: str, msg: dict[str, Any], timeout_ms: float,
              what: tuple[str, Any]) -> int:
        tag = self._next_tag
        self._next_tag += 1
        self._sends[tag] = what
        self._out.append(Send(tag, to, channel, msg, timeout_ms))
        return tag

    def _apply(self, key: Key, effects: list[Effect]) -> None:
        for eff in effects:
            if isinstance(eff, (AppendRecords, TruncateLog, WriteEpochCache)):
                self._out.append(StoreEffect(key, eff))
                if isinstance(eff, AppendRecords):
                    self._maybe_flush(key, len(eff.records))
            elif isinstance(eff, ProposeIsr):
                self._alter_partition(key, eff)
            else:
                self._out.append(eff)

    def _maybe_flush(self, key: Key, n: int) -> None:
        """flush.messages: fsync the log every N appended records (Kafka's
        log.flush.interval.messages); None: never (Kafka's default)."""
        every = self.config.flush_messages
        if every is None:
            return
        self._appends_since_flush[key] = self._appends_since_flush.get(key, 0) + n
        if self._appends_since_flush[key] >= every:
            self._out.append(FlushPartition(key))
            self._appends_since_flush[key] = 0

    def _finish(self, now: float) -> list[BrokerEffect]:
        """After any input: complete delayed operations whose condition now holds or
        whose deadline passed, send what the session and fetchers are due to send."""
        if not self.stopping:
            self._complete_delayed(now)
            self._pump_session(now)
            self._pump_fetchers(now)
        return self._take()

    # -- requests ----------------------------------------------------------------------

    def _handle(self, rid: Any, msg: dict[str, Any], now: float) -> Any:
        t = msg["type"]
        if t == "status":
            return self.status()
        if t == "metadata":
            return {"error": None, "brokers": self.peers, "partitions": self.cluster_states}
        if t == "init-producer-id":
            return self._init_producer_id(msg)
        if t == "flush":
            self.flush()
            return {"error": None}
        if t == "checkpoint-hw":
            self.checkpoint_hw()
            return {"error": None}
        key = (msg["topic"], int(msg["partition"]))
        p = self.partitions.get(key)
        if p is None:
            return {"error": "UNKNOWN_TOPIC_OR_PARTITION"}
        if t == "produce":
            return self._produce(rid, key, p, msg, now)
        if t == "fetch":
            return p.fetch_for_consumer(int(msg["offset"]), int(msg.get("max_records", 500)),
                                        msg.get("current_leader_epoch"))
        if t == "list-offsets":
            return p.list_offsets(int(msg["timestamp"]), msg.get("current_leader_epoch"))
        if t == "replica-fetch":
            return self._replica_fetch(rid, key, p, msg, now)
        if t == "offsets-for-leader-epoch":
            resp, effects = p.offsets_for_leader_epoch(msg["leader_epoch_request"],
                                                       msg.get("current_leader_epoch"))
            self._apply(key, effects)
            return resp
        if t == "dump-log":
            return {"error": None, "records": [r.to_json() for r in p.log.records]}
        return {"error": "INVALID_REQUEST", "message": f"unknown request type {t!r}"}

    def _produce(self, rid: Any, key: Key, p: Partition, msg: dict[str, Any],
                 now: float) -> Any:
        acks = msg.get("acks", "all")
        # `values`: a producer's batch (linger + batch size), appended atomically
        # and acknowledged as one; `offset` is then its base offset.
        batch = msg.get("values")
        values = batch if batch is not None else [msg.get("value")]
        if not isinstance(values, list) or not values or any(
                not isinstance(v, int) or isinstance(v, bool) for v in values):
            resp = {"error": "INVALID_REQUEST",
                    "message": "value must be an integer, values a non-empty list of them"}
            return self._produce_answer(rid, acks, resp)
        producer = msg.get("producer")
        header = None if producer is None else ProducerBatchHeader(
            int(producer["producer_id"]), int(producer["producer_epoch"]),
            int(producer["base_sequence"]))
        err, offset, effects = p.append_batch_as_leader(values, acks, now, header)
        self._apply(key, effects)
        if err:
            return self._produce_answer(rid, acks, {"error": err, "offset": None,
                                                    "appended": False})
        if acks not in ("all", -1):
            return self._produce_answer(rid, acks, {"error": None, "offset": offset,
                                                    "appended": True})
        assert offset is not None
        # Kafka's DelayedProduce: acknowledged once the HW passes the whole batch,
        # or an error when the request timeout passes first.
        timeout_ms = min(int(msg.get("timeout_ms", self.config.request_timeout_ms)),
                         self.config.request_timeout_ms)
        self._produces.append(_DelayedProduce(rid, key, offset, offset + len(values) - 1,
                                              p.leader_epoch, now + timeout_ms))
        return _LATER

    def _init_producer_id(self, msg: dict[str, Any]) -> dict[str, Any]:
        """InitProducerId for an idempotent (non-transactional) producer (KIP-98).

        Kafka answers a null transactional id with a new producer id and epoch 0,
        whatever id and epoch the request names (TransactionCoordinator.
        handleInitProducerId, 0.11.0 to 3.7.0: "blindly accept"); ids come in
        blocks from one cluster-wide counter (ZooKeeper, or the controller's
        AllocateProducerIds from 3.0, KIP-730), so no two producers of a cluster's
        life share one. The model's block is the broker epoch, which the controller
        makes unique and never reuses: id = broker epoch << 20 | a counter of this
        incarnation."""
        if msg.get("transactional_id") is not None:
            # No transaction coordinator in the model: a transactional producer
            # is refused outright rather than half served.
            return {"error": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}
        if self.broker_epoch < 0 or self._producer_ids_handed >= 1 << 20:
            return {"error": "COORDINATOR_NOT_AVAILABLE"}
        pid = self.broker_epoch << 20 | self._producer_ids_handed
        self._producer_ids_handed += 1
        return {"error": None, "producer_id": pid, "producer_epoch": 0}

    @staticmethod
    def _produce_answer(rid: Any, acks: Any, resp: dict[str, Any]) -> Respond:
        if acks == 0:
            # Kafka's KafkaApis.handleProduceRequest (0.10.2.0; the close since
            # KAFKA-955, 0.8.1): no answer to acks 0; on an error the broker closes
            # the connection instead, so the producer refreshes its metadata.
            return Respond(rid, None, close=bool(resp.get("error")))
        return Respond(rid, resp)

    def _replica_fetch(self, rid: Any, key: Key, p: Partition, msg: dict[str, Any],
                       now: float) -> Any:
        args = (msg["replica_id"], int(msg["offset"]), msg.get("last_fetched_epoch"),
                msg.get("current_leader_epoch"), int(msg.get("max_records", 500)))
        resp, effects = p.fetch_for_replica(*args, now, msg.get("replica_epoch"))
        self._apply(key, effects)
        if resp.get("error") or resp.get("records") or resp.get("diverging_epoch"):
            return resp
        # Long poll: nothing new yet, so hold the answer until data arrives or
        # replica.fetch.wait.max.ms passes (Kafka's DelayedFetch).
        self._fetches.append(_DelayedFetch(rid, key, args,
                                           now + self.config.replica_fetch_wait_max_ms))
        return _LATER

    def _complete_delayed(self, now: float) -> None:
        if not self._produces and not self._fetches:
            return  # after most inputs (the simulator's hottest path)
        for d in list(self._produces):
            outcome = self.partitions[d.key].produce_outcome(d.last, d.leader_epoch)
            if outcome is None and now >= d.deadline:
                outcome = "REQUEST_TIMED_OUT"
            if outcome is None:
                continue
            self._produces.remove(d)
            self._out.append(Respond(d.rid, {"error": None if outcome == "ok" else outcome,
                                             "offset": d.base, "appended": True}))
        for f in list(self._fetches):
            p = self.partitions[f.key]
            if p.role == "leader" and p.log.leo <= f.args[1] and now < f.deadline:
                continue
            self._fetches.remove(f)
            # DelayedFetch.onComplete: read again (the HW may have moved), with no new
            # update of the follower's state.
            resp, effects = p.reread_for_replica(*f.args)
            self._apply(f.key, effects)
            self._out.append(Respond(f.rid, resp))

    # -- the controller session ----------------------------------------------------------

    def _pump_session(self, now: float) -> None:
        s = self._session
        if s.inflight is not None or now < s.next_at:
            return
        msg: dict[str, Any] = {"id": self.node, "incarnation": self.incarnation}
        if s.registered:
            msg["type"] = "heartbeat"
        else:
            # A process registering again (the controller restarted) proves its own
            # epoch; a fresh one shows its clean-shutdown marker, if any (KIP-966).
            previous = (self.broker_epoch if self.broker_epoch >= 0
                        else self.previous_broker_epoch)
            msg.update(type="register", addr=self.advertise, previous_broker_epoch=previous)
        s.inflight = self._send(CONTROLLER, "session", msg, HEARTBEAT_TIMEOUT_MS,
                                ("session", None))

    def _on_session_answer(self, resp: dict[str, Any] | None, now: float) -> None:
        s = self._session
        s.inflight = None
        s.next_at = now + self.config.heartbeat_interval_ms
        if resp is None:
            return
        err = resp.get("error")
        if err == "UNKNOWN_BROKER":
            # The session ended (or the controller restarted): register at once.
            s.registered = False
            s.next_at = now
        elif err in ("NODE_EXISTS", "DUPLICATE_BROKER_REGISTRATION"):
            pass  # our previous incarnation's session is still alive: wait it out
        elif err is None:
            if not s.registered and "broker_epoch" in resp:
                self.broker_epoch = int(resp["broker_epoch"])
            s.registered = True
            self._apply_metadata(resp, now)

    def _apply_metadata(self, resp: dict[str, Any], now: float) -> None:
        self.peers.update(resp.get("brokers", {}))
        self.cluster_states = resp["partitions"]
        for st in resp["partitions"]:
            self._leader_and_isr((st["topic"], st["partition"]), st, now)

    def _leader_and_isr(self, key: Key, st: dict[str, Any], now: float) -> None:
        p = self.partitions.get(key)
        if p is None:
            return
        self._apply(key, p.apply_leader_and_isr(st["leader"], st["leader_epoch"], st["isr"],
                                                st["partition_epoch"], st["replicas"], now))

    def _alter_partition(self, key: Key, eff: ProposeIsr) -> None:
        msg = {"type": "alter-partition", "id": self.node, "topic": key[0], "partition": key[1],
               "leader_epoch": eff.leader_epoch, "partition_epoch": eff.partition_epoch,
               "isr": list(eff.isr), "broker_epochs": dict(eff.broker_epochs)}
        # Its own channel: ISR changes must not wait on heartbeats (Kafka's
        # AlterPartitionManager, KIP-497).
        self._send(CONTROLLER, "alter-partition", msg, ALTER_PARTITION_TIMEOUT_MS,
                   ("alter-partition", key))

    def _on_alter_partition_answer(self, key: Key, resp: dict[str, Any] | None,
                                   now: float) -> None:
        p = self.partitions[key]
        if resp is None or resp.get("error"):
            p.isr_proposal_failed(None if resp is None else resp["error"])
        st = (resp or {}).get("state")
        if st:
            self._leader_and_isr(key, st, now)

    # -- the replica fetcher (follower side) ------------------------------------------------

    def _pump_fetchers(self, now: float) -> None:
        for key, p in self.partitions.items():
            if p.role != "follower":
                continue
            f = self._fetchers.get(key)
            if f is None:
                f = self._fetchers[key] = _Fetcher()
            if f.inflight is not None or now < f.not_before:
                continue
            req = p.next_follower_request()
            if req is None or self.peers.get(p.leader or "") is None:
                continue  # looked at again after the next input
            if p.features.alter_partition_broker_epochs:
                req["replica_epoch"] = self.broker_epoch  # KIP-903
            if req["type"] == "offsets-for-leader-epoch":
                self._event("epoch-request-sent", topic=key[0], partition=key[1],
                            leader=p.leader, leader_epoch=p.leader_epoch,
                            requested=req["leader_epoch_request"])
            timeout = self.config.replica_fetch_wait_max_ms + FETCH_TIMEOUT_SLACK_MS
            f.inflight = self._send(p.leader or "", f"fetch {key[0]}-{key[1]}", req, timeout,
                                    ("fetch", (key, req["generation"], req["type"])))

    def _on_fetch_answer(self, detail: tuple[Key, int, str], tag: int,
                         resp: dict[str, Any] | None, now: float) -> None:
        key, gen, rtype = detail
        f = self._fetchers[key]
        if f.inflight == tag:
            f.inflight = None
        p = self.partitions[key]
        if resp is None:
            f.not_before = now + self.config.replica_fetch_backoff_ms
            return
        if rtype == "offsets-for-leader-epoch":
            effects = p.on_offsets_for_leader_epoch_response(gen, resp, now)
        else:
            effects = p.on_fetch_response(gen, resp, now)
        self._apply(key, effects)
        if resp.get("error"):
            f.not_before = now + self.config.replica_fetch_backoff_ms

    def _shutdown_done(self, clean: bool) -> None:
        self.flush()
        self.checkpoint_hw()
        if clean and self.broker_epoch >= 0:
            self._out.append(WriteCleanShutdown(self.broker_epoch))
        self._out.append(ShutdownDone(clean))


_LATER = object()  # a request answered later (a Respond when its delayed op completes)
