"""A whole cluster in one process on a virtual clock: the simulator's shell.

The controller (`ControllerCore`) and every broker (`BrokerCore`) are the same
sans-IO code the processes run; this module only plays their shells: it keeps
each broker's files in memory (`MemoryStore`, written and fsynced bytes told
apart), carries messages between nodes with seeded latencies, drops them across
a network partition, holds them for a `delay`, loses or duplicates them at the
rates it is given (`Network`), and fires each node's timers.
Everything happens in one event queue ordered by (virtual time, sequence), and
every random choice comes from one seeded generator, so a seed and a config give
the same run every time.

Faults keep their meaning: kill (the process dies, written bytes stay), stop
(controlled shutdown), pause (inputs wait until resume), power cycle (kill and
lose what was not fsynced), partitions as the local backend makes them (a node
neither answers nor sends to the peers it is cut from).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .broker_core import (
    CONTROLLER,
    STORAGE_EFFECTS,
    BrokerCore,
    BrokerEffect,
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
from .config import BrokerConfig, ControllerConfig
from .controller_core import ControllerCore, ControllerEffect, WriteControllerState
from .log import Record
from .netdelay import FOREVER, DelayRules, parse_rules
from .partition import AppendRecords, Event, HaltBroker, TruncateLog, WriteEpochCache

Key = tuple[str, int]
INF = float("inf")
# One-way latency of a message between two nodes, ms (uniform); a loopback hop.
DEFAULT_LATENCY_MS = (0.05, 0.5)
# What a Kafka client sends; the harness's own requests (status, admin, events) ride a
# control channel no network fault touches, as Jepsen's control connection does.
CLIENT_REQUESTS = frozenset({"produce", "fetch", "metadata"})


@dataclass(frozen=True)
class Network:
    """Message faults, per message (a probability each, 0 <= p < 1).

    ``loss``: a request or its answer is lost -- in TCP terms the connection broke
    with it in flight -- and the sender times out, as behind a partition.
    ``duplicate``: a request is handled twice (the second answer is dropped): what a
    client's resend does when its first attempt went through but the answer did not
    come back; a produce appends twice (no idempotent producer, KIP-98, is modelled).
    Between nodes and on the clients' produce, fetch and metadata requests. At 0 (the
    default) no random number is drawn for them, so a seed's run is what it was.
    """

    loss: float = 0.0
    duplicate: float = 0.0

    def __post_init__(self) -> None:
        for name in ("loss", "duplicate"):
            v = getattr(self, name)
            if not 0 <= v < 1:
                raise ValueError(f"network {name} must be a probability in [0, 1), got {v!r}")

    @property
    def faulty(self) -> bool:
        return self.loss > 0 or self.duplicate > 0

    def as_dict(self) -> dict[str, float]:
        return {"loss": self.loss, "duplicate": self.duplicate}


class SimDeadlock(RuntimeError):
    """Nothing is left to happen while something waits."""


# -- storage --------------------------------------------------------------------


@dataclass
class _PartitionFiles:
    records: list[Record] = field(default_factory=list)
    synced: int = 0  # records durable (the log file's fsynced length)
    epochs: list[tuple[int, int]] = field(default_factory=list)


class MemoryStore:
    """A broker's files in memory, with broker_core's durability contract: records
    are durable once flushed; checkpoints and the clean-shutdown marker when written."""

    def __init__(self) -> None:
        self.partitions: dict[Key, _PartitionFiles] = {}
        self.hw_checkpoint: dict[Key, int] = {}
        self.clean_shutdown: int | None = None

    def part(self, key: Key) -> _PartitionFiles:
        return self.partitions.setdefault(key, _PartitionFiles())

    def loaded(self, key: Key) -> LoadedPartition:
        p = self.part(key)
        return LoadedPartition(list(p.records), list(p.epochs), self.hw_checkpoint.get(key, 0))

    def perform(self, eff: BrokerEffect) -> None:
        if isinstance(eff, StoreEffect):
            p, e = self.part(eff.key), eff.effect
            if isinstance(e, AppendRecords):
                p.records.extend(e.records)
            elif isinstance(e, TruncateLog):
                del p.records[e.offset:]
                p.synced = min(p.synced, len(p.records))
            elif isinstance(e, WriteEpochCache):
                p.epochs = [tuple(x) for x in e.entries]  # type: ignore[misc]
        elif isinstance(eff, FlushPartition):
            self.part(eff.key).synced = len(self.part(eff.key).records)
        elif isinstance(eff, FlushAll):
            for p in self.partitions.values():
                p.synced = len(p.records)
        elif isinstance(eff, WriteHwCheckpoint):
            self.hw_checkpoint = dict(eff.hws)
        elif isinstance(eff, WriteCleanShutdown):
            self.clean_shutdown = eff.broker_epoch

    def fsynced_leo(self, key: Key) -> int:
        return self.part(key).synced

    def power_loss(self) -> dict[str, int]:
        """What a power cut takes: every record not fsynced. Returns records dropped
        per partition ("topic-partition")."""
        dropped = {}
        for (topic, part), p in sorted(self.partitions.items()):
            if len(p.records) > p.synced:
                dropped[f"{topic}-{part}"] = len(p.records) - p.synced
                del p.records[p.synced:]
        return dropped


# -- nodes ----------------------------------------------------------------------


@dataclass
class SimNode:
    name: str
    up: bool = False
    paused: bool = False
    incarnation: int = 0  # bumped by every start
    incarnation_id: str = ""
    core: Any = None  # BrokerCore | ControllerCore while up
    store: MemoryStore = field(default_factory=MemoryStore)
    saved: dict[str, Any] | None = None  # the controller's persisted state
    inbox: list[Callable[[float], list]] = field(default_factory=list)  # while paused
    tick_at: float = INF
    event_seq: int = 0
    replies: dict[int, Callable[[dict[str, Any] | None], None]] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)  # peers it is cut off from
    delays: DelayRules = field(default_factory=DelayRules)
    held: dict[tuple[str, str], list[tuple[str, Callable[[], None]]]] = field(
        default_factory=dict)
    exit_status: int | None = None

    @property
    def reachable(self) -> bool:
        return self.up and not self.paused


EventSink = Callable[[str, str, dict[str, Any]], None]  # (node, incarnation id, event)
# (follower, its request, the answer or None): called once the follower's core has
# taken the answer to a fetch or an OffsetsForLeaderEpoch -- one fetch round.
FetchHook = Callable[[str, dict[str, Any], dict[str, Any] | None], None]
FETCHES = ("replica-fetch", "offsets-for-leader-epoch")


class SimCluster:
    """One cluster on one virtual clock (`now`, ms since the run started)."""

    def __init__(self, config: dict[str, Any], seed: int,
                 latency_ms: tuple[float, float] = DEFAULT_LATENCY_MS,
                 on_event: EventSink | None = None, network: Network | None = None) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.latency_ms = latency_ms
        self.network = network or Network()
        self._lossy = self.network.faulty  # read per message: kept, not recomputed
        self.on_event = on_event
        self.on_fetch_round: FetchHook | None = None
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._next_rid = 0
        self.broker_config = BrokerConfig.from_dict(config.get("broker"), config["protocol"])
        self.controller_config = ControllerConfig.from_dict(config.get("controller"),
                                                            config["protocol"])
        self.brokers = list(config["brokers"])
        self.nodes = {n: SimNode(n) for n in [CONTROLLER, *self.brokers]}

    # -- the event queue --------------------------------------------------------------

    def at(self, when: float, fn: Callable[[], None]) -> None:
        if when < self.now:
            when = self.now
        heapq.heappush(self._queue, (when, self._seq, fn))
        self._seq += 1

    def next_time(self) -> float:
        return self._queue[0][0] if self._queue else INF

    def run_one(self) -> None:
        """Carry out the next event (SimDeadlock if there is none)."""
        if not self._queue:
            raise SimDeadlock(f"nothing left to happen at {self.now:.1f} ms")
        when, _, fn = heapq.heappop(self._queue)
        self.now = when
        fn()

    def _latency(self) -> float:
        lo, hi = self.latency_ms
        return lo + (hi - lo) * self.rng.random()  # random.uniform's draw, inlined

    def _chance(self, p: float) -> bool:
        """A seeded coin with heads at probability p; no draw at all when p is 0."""
        return p > 0 and self.rng.random() < p

    # -- processes ----------------------------------------------------------------------

    def start(self, name: str) -> None:
        node = self.nodes[name]
        if node.up:
            raise RuntimeError(f"{name} is already running")
        node.up, node.paused, node.exit_status = True, False, None
        node.incarnation += 1
        node.incarnation_id = f"{self.rng.getrandbits(48):012x}"
        node.event_seq, node.inbox, node.replies, node.held = 0, [], {}, {}
        node.tick_at = INF
        if name == CONTROLLER:
            node.core = ControllerCore(
                self.config["topics"], self.controller_config.broker_session_timeout_ms,
                self.broker_config.unclean_leader_election_enable, node.saved, self.now,
                protocol=self.config["protocol"],
                min_insync_replicas=self.broker_config.min_insync_replicas,
                elr=self.controller_config.eligible_leader_replicas_version >= 1)
            self._perform(node, node.core.start(self.now))
            return
        store = node.store
        loaded = {(t["name"], p): store.loaded((t["name"], p))
                  for t in self.config["topics"]
                  for p, replicas in enumerate(t["replicas"]) if name in replicas}
        marker = store.clean_shutdown
        node.core = BrokerCore(
            name, f"sim:{name}", self.config["protocol"], self.broker_config,
            dict(self.config["brokers"]), node.incarnation_id, loaded,
            previous_broker_epoch=marker if marker is not None else -1,
            clean_marker_present=marker is not None)
        self._perform(node, node.core.start(self.now))

    def stop(self, name: str) -> None:
        """SIGTERM: the broker's controlled shutdown begins; it is down when it ends."""
        node = self.nodes[name]
        if not node.up:
            return
        node.paused = False
        self._flush_inbox(node)
        if name == CONTROLLER:
            self._down(node, 0)
        elif node.up:
            self._perform(node, node.core.begin_shutdown(self.now))

    def kill(self, name: str) -> None:
        """SIGKILL: gone at once; written bytes stay."""
        node = self.nodes[name]
        if node.up:
            self._down(node, -9)

    def power_cycle(self, name: str) -> dict[str, int]:
        self.kill(name)
        return self.nodes[name].store.power_loss()

    def pause(self, name: str) -> None:
        self.nodes[name].paused = True

    def resume(self, name: str) -> None:
        node = self.nodes[name]
        if node.up and node.paused:
            node.paused = False
            self._flush_inbox(node)
            self._schedule_tick(node)

    def _down(self, node: SimNode, status: int) -> None:
        node.up, node.paused, node.core = False, False, None
        node.exit_status = status
        node.inbox, node.replies, node.held = [], {}, {}
        node.tick_at = INF

    # -- network faults ---------------------------------------------------------------

    def block(self, name: str, peers: list[str]) -> None:
        """The node stops answering and sending to `peers` (process.NetBlock)."""
        node = self.nodes[name]
        node.blocked = set(peers)
        if node.up:
            self._emit(node, "net-block", {"peers": sorted(peers)})

    def set_delays(self, name: str, raw: list[dict[str, Any]]) -> None:
        """The `net-delay` rules of a node (broker/netdelay.py); [] delivers all held."""
        node = self.nodes[name]
        node.delays.set(parse_rules(raw, self.now))
        if node.up:
            self._emit(node, "net-delay", {"rules": raw})
        self._release_held(node)

    def _held(self, node: SimNode, peer: str | None, direction: str, rtype: str,
              go: Callable[[], None]) -> None:
        """Pass `go` on now, or hold it while a delay rule holds this link (in order)."""
        if node.delays.release_at(peer, direction, rtype, self.now) is None:
            go()  # no rule holds it (others held on the link do not hold it up)
            return
        self._emit(node, "delay-held", {"peer": peer, "direction": direction,
                                        "request": rtype})
        node.held.setdefault((peer, direction), []).append((rtype, go))
        self._release_held(node)

    def _release_held(self, node: SimNode) -> None:
        inc = node.incarnation
        for (peer, direction), queue in list(node.held.items()):
            while queue:
                rtype, go = queue[0]
                until = node.delays.release_at(peer, direction, rtype, self.now)
                if until is not None:
                    if until != FOREVER:
                        self.at(until, lambda n=node, i=inc: n.incarnation == i
                                and self._release_held(n))
                    break
                queue.pop(0)
                self._emit(node, "delay-delivered", {"peer": peer, "direction": direction,
                                                     "request": rtype})
                go()
            if not queue:
                node.held.pop((peer, direction), None)

    # -- inputs and effects ---------------------------------------------------------------

    def _input(self, node: SimNode, incarnation: int,
               fn: Callable[[float], list]) -> None:
        """Give an input to the node's core now (queued while it is paused)."""
        if not node.up or node.incarnation != incarnation:
            return
        if node.paused:
            node.inbox.append(fn)
            return
        self._run_input(node, fn)

    def _run_input(self, node: SimNode, fn: Callable[[float], list]) -> None:
        self._perform(node, fn(self.now))

    def _flush_inbox(self, node: SimNode) -> None:
        while node.inbox and node.up and not node.paused:
            self._run_input(node, node.inbox.pop(0))

    def _perform(self, node: SimNode, effects: list[BrokerEffect] | list[ControllerEffect]
                 ) -> None:
        """Carry out a core's effects (a broker's or the controller's)."""
        halt = False
        for eff in effects:
            # The commonest first: answers, sends, events, then storage.
            if isinstance(eff, Respond):
                reply = node.replies.pop(eff.rid, None)
                if reply is not None:
                    reply(eff.resp)
            elif isinstance(eff, Send):
                self._send(node, eff)
            elif isinstance(eff, Event):
                self._emit(node, eff.type, eff.fields)
            elif isinstance(eff, STORAGE_EFFECTS):
                node.store.perform(eff)
            elif isinstance(eff, WriteControllerState):
                node.saved = eff.state
            elif isinstance(eff, HaltBroker):
                halt = True  # Kafka's fatal + exit: a controlled shutdown, status 1
                node.exit_status = 1
            elif isinstance(eff, ShutdownDone):
                self._down(node, node.exit_status or 0)
                return
        if halt:
            self._perform(node, node.core.begin_shutdown(self.now))
            return
        self._schedule_tick(node)

    def _schedule_tick(self, node: SimNode) -> None:
        if not node.up or node.core is None:
            return
        due = node.core.next_deadline()
        if due >= node.tick_at and node.tick_at > self.now:
            return
        node.tick_at = due
        if due == INF:
            return
        inc = node.incarnation

        def tick() -> None:
            if node.incarnation != inc or not node.up or node.tick_at != due:
                return
            node.tick_at = INF
            self._input(node, inc, lambda now: node.core.tick(now))

        self.at(due, tick)

    def _emit(self, node: SimNode, type_: str, fields: dict[str, Any]) -> None:
        ev = {"seq": node.event_seq, "time": round(self.now * 1_000_000), "node": node.name,
              "type": type_, **fields}
        node.event_seq += 1
        if self.on_event is not None:
            self.on_event(node.name, node.incarnation_id, ev)

    # -- messages -------------------------------------------------------------------------

    def _send(self, node: SimNode, eff: Send) -> None:
        """A request from a broker; its answer (None: lost, refused, timed out) comes
        back as an input, once."""
        inc = node.incarnation
        state = {"done": False}

        def answer(resp: dict[str, Any] | None) -> None:
            if state["done"]:
                return
            state["done"] = True

            def take(now: float) -> list:
                effects = node.core.on_answer(eff.tag, resp, now)
                if self.on_fetch_round is not None and eff.msg.get("type") in FETCHES:
                    self.on_fetch_round(node.name, eff.msg, resp)
                return effects

            self._input(node, inc, take)

        self.at(self.now + eff.timeout_ms, lambda: answer(None))
        if eff.to in node.blocked:
            return  # dropped by the partition: it times out
        self._transmit(node.name, eff.to, eff.msg, answer)

    def request(self, dst: str, msg: dict[str, Any], timeout_ms: float,
                on_answer: Callable[[dict[str, Any] | str | None], None]) -> None:
        """A client's request (clients and the harness are cut from nobody):
        on_answer gets the answer, "refused" (nothing was sent) or None (lost)."""
        state = {"done": False}

        def answer(resp: dict[str, Any] | str | None) -> None:
            if not state["done"]:
                state["done"] = True
                on_answer(resp)

        if not self.nodes[dst].up:
            self.at(self.now + self._latency(), lambda: answer("refused"))
            return
        self.at(self.now + timeout_ms, lambda: answer(None))
        self._transmit(None, dst, msg, answer)

    def _transmit(self, src: str | None, dst: str, msg: dict[str, Any],
                  answer: Callable[[Any], None]) -> None:
        d = self.nodes[dst]
        back = self._latency()
        if not d.up:
            self.at(self.now + back, lambda: answer(None))  # connection refused
            return
        inc = d.incarnation
        rtype = str(msg.get("type", ""))
        net = (self.network if self._lossy
               and (src is not None or rtype in CLIENT_REQUESTS) else None)
        about: dict[str, Any] = {}
        if net is not None:
            about = {"peer": src if src is not None else "client", "request": rtype}
            if rtype == "produce":  # which records (reports/story/facts.py)
                about.update(topic=msg.get("topic"), partition=msg.get("partition"),
                             values=msg["values"] if "values" in msg else [msg.get("value")])

        def reply(resp: dict[str, Any] | None) -> None:
            if resp is None or (src is not None and src in d.blocked):
                return  # no answer (acks 0), or dropped after handling

            def out() -> None:
                if src is not None and src in d.blocked:
                    return
                if net is not None and self._chance(net.loss):
                    self._emit(d, "net-lost", {**about, "direction": "out"})
                    return  # the sender times out
                self.at(self.now + back, lambda: answer(resp))

            self._held(d, src, "out", rtype, out)

        def handle(now: float) -> list:
            if src is not None and src in d.blocked:
                return []  # never answered: the sender times out
            rid = self._next_rid
            self._next_rid += 1
            d.replies[rid] = reply
            return d.core.on_request(rid, msg, now)

        def arrive() -> None:
            if not d.up or d.incarnation != inc:
                self.at(self.now + back, lambda: answer(None))  # reset by the restart
                return
            self._held(d, src, "in", rtype, lambda: self._input(d, inc, handle))

        if net is not None and self._chance(net.loss):
            self._emit(d, "net-lost", {**about, "direction": "in"})
            return  # the sender times out
        self.at(self.now + self._latency(), arrive)
        if net is not None and self._chance(net.duplicate):
            def again() -> None:
                if d.up and d.incarnation == inc:
                    self._emit(d, "net-duplicated", about)
                arrive()

            self.at(self.now + self._latency(), again)

    # -- the harness's view -----------------------------------------------------------------

    def status(self, name: str) -> dict[str, Any] | None:
        """A reachable node's status, as its `status` request answers."""
        node = self.nodes[name]
        if not node.reachable:
            return None
        if name == CONTROLLER:
            st = node.core.status()
        else:
            st = node.core.status()
            for p in st["partitions"]:
                p["fsynced_leo"] = node.store.fsynced_leo((p["topic"], p["partition"]))
        st["blocked"] = sorted(node.blocked)
        return st

    def records(self, name: str, key: Key) -> list[Record]:
        """The replica's log: in memory while up, else what its files hold."""
        node = self.nodes[name]
        if node.up:
            return list(node.core.partitions[key].log.records)
        return list(node.store.part(key).records)
