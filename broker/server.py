"""The broker process: an asyncio shell around the sans-IO Partition objects.

    python -m broker.server --id ID --listen HOST:PORT --data-dir DIR \
        --controller HOST:PORT --config FILE

The shell owns sockets, files and timers; every protocol decision is made by
`Partition` (replication) and the controller. The shell carries out the effects
a Partition returns, in order: file writes first, then events.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any

from .config import BrokerConfig
from .epoch_cache import LeaderEpochCache
from .log import Log
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
from .process import (
    CLOSE_CONNECTION,
    EventLog,
    NetBlock,
    common_args,
    load_cluster_config,
    run_main,
    serve,
)
from .storage import BrokerStore
from .wire import AsyncConnection, WireError

log = logging.getLogger("broker")
TICK_S = 0.05
Key = tuple[str, int]


def _now() -> float:
    return time.monotonic() * 1000


class Broker:
    def __init__(self, node: str, advertise: str, data_dir: Path, controller: str,
                 cluster: dict[str, Any]) -> None:
        self.node = node
        self.advertise = advertise
        self.protocol = cluster["protocol"]
        self.config = BrokerConfig.from_dict(cluster.get("broker"))
        self.peers: dict[str, str] = dict(cluster["brokers"])
        self.incarnation = os.urandom(6).hex()
        self.broker_epoch = -1  # given by the controller at registration
        self.halt: asyncio.Event | None = None  # set by amain; HaltBroker sets it
        self.exit_status = 0
        self.events = EventLog(node)
        self.net = NetBlock()
        self.net.on_event = self.events.add
        self.store = BrokerStore(data_dir)
        # KIP-966: the epoch a clean shutdown left behind, used once (a later crash
        # must not look clean).
        marker = self.store.clean_shutdown.value
        self.previous_broker_epoch = int(marker) if isinstance(marker, int) else -1
        if marker is not None:
            self.store.clean_shutdown.write(None)
        self.ctl = AsyncConnection(controller)
        self.ctl_alter = AsyncConnection(controller)  # ISR changes must not wait on heartbeats
        self.cluster_states: list[dict[str, Any]] = []
        self.partitions: dict[Key, Partition] = {}
        self.hw_checkpointed: dict[Key, int] = {}
        self.fetchers: dict[Key, asyncio.Task] = {}
        self.appends_since_flush: dict[Key, int] = {}
        self._waiters: list[asyncio.Future] = []
        self._tasks: set[asyncio.Task] = set()
        for t in cluster["topics"]:
            for p, replicas in enumerate(t["replicas"]):
                if node in replicas:
                    self._load_partition((t["name"], p))
        self.events.add("started", incarnation=self.incarnation, protocol=self.protocol,
                        partitions=[p.status() for p in self.partitions.values()])

    def _load_partition(self, key: Key) -> None:
        ps = self.store.partition(*key)
        log_ = Log(ps.records)
        cache = LeaderEpochCache(ps.epoch_entries)
        if cache.truncate_from_end(log_.leo):
            # A power cut may have taken records the (fsynced) epoch checkpoint names.
            ps.write_epochs(cache.entries)
        hw = self.store.checkpointed_hw(*key)
        self.hw_checkpointed[key] = hw
        self.partitions[key] = Partition(key[0], key[1], self.node, self.protocol, self.config,
                                         log_, cache, hw)

    # -- effects and change notification ----------------------------------------------

    def _notify(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    async def _wait_changed(self, timeout: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await asyncio.wait_for(fut, max(timeout, 0))
        except TimeoutError:
            pass

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def apply(self, key: Key, effects: list[Effect]) -> None:
        store = self.store.partition(*key)
        for eff in effects:
            if isinstance(eff, AppendRecords):
                store.append(eff.records)
                self._maybe_flush(key, len(eff.records))
            elif isinstance(eff, TruncateLog):
                store.truncate(eff.offset)
            elif isinstance(eff, WriteEpochCache):
                store.write_epochs(eff.entries)
            elif isinstance(eff, ProposeIsr):
                self._spawn(self._alter_partition(key, eff))
            elif isinstance(eff, Event):
                self.events.add(eff.type, **eff.fields)
            elif isinstance(eff, HaltBroker):
                # Kafka's fatal + exit: shutdown hooks run (a controlled shutdown).
                log.critical("exiting: %s", eff.reason)
                self.exit_status = 1
                if self.halt is not None:
                    self.halt.set()
        if effects:
            self._notify()
        p = self.partitions[key]
        if p.role == "follower" and (key not in self.fetchers or self.fetchers[key].done()):
            self.fetchers[key] = asyncio.create_task(self._fetcher(key))

    def _maybe_flush(self, key: Key, n: int) -> None:
        every = self.config.flush_messages
        if every is None:
            return
        self.appends_since_flush[key] = self.appends_since_flush.get(key, 0) + n
        if self.appends_since_flush[key] >= every:
            self.store.partition(*key).flush()
            self.appends_since_flush[key] = 0

    def checkpoint_hw(self) -> None:
        hws = {key: p.hw for key, p in self.partitions.items()}
        self.store.write_hw_checkpoint(hws)
        self.hw_checkpointed = hws
        for (topic, part), hw in hws.items():
            self.events.add("hw-checkpoint", topic=topic, partition=part, hw=hw)

    def flush(self) -> None:
        self.store.flush()
        for (topic, part), p in self.partitions.items():
            self.events.add("flush", topic=topic, partition=part, leo=p.log.leo)

    # -- controller --------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        registered = False
        interval = self.config.heartbeat_interval_ms / 1000
        while True:
            if "controller" in self.net.peers:
                await asyncio.sleep(interval)
                continue
            msg = {"id": self.node, "incarnation": self.incarnation}
            if registered:
                msg["type"] = "heartbeat"
            else:
                # A process registering again (the controller restarted) proves its
                # own epoch; a fresh one shows its clean-shutdown marker, if any.
                previous = (self.broker_epoch if self.broker_epoch >= 0
                            else self.previous_broker_epoch)
                msg.update(type="register", addr=self.advertise,
                           previous_broker_epoch=previous)
            try:
                resp = await self.ctl.request(msg, timeout=1.0)
            except WireError as e:
                log.debug("controller unreachable: %s", e)
                await asyncio.sleep(interval)
                continue
            if resp.get("error") == "UNKNOWN_BROKER":
                registered = False
                continue
            if resp.get("error") in ("NODE_EXISTS", "DUPLICATE_BROKER_REGISTRATION"):
                # Our previous incarnation's session is still alive: wait it out.
                log.debug("registration refused (%s)", resp["error"])
            elif resp.get("error"):
                log.warning("controller answered %s", resp)
            else:
                if not registered and "broker_epoch" in resp:
                    self.broker_epoch = int(resp["broker_epoch"])
                registered = True
                self._apply_metadata(resp)
            await asyncio.sleep(interval)

    def _apply_metadata(self, resp: dict[str, Any]) -> None:
        self.peers.update(resp.get("brokers", {}))
        self.cluster_states = resp["partitions"]
        now = _now()
        for st in resp["partitions"]:
            key = (st["topic"], st["partition"])
            p = self.partitions.get(key)
            if p is None:
                continue
            self.apply(key, p.apply_leader_and_isr(st["leader"], st["leader_epoch"], st["isr"],
                                                   st["partition_epoch"], st["replicas"], now))

    async def _alter_partition(self, key: Key, eff: ProposeIsr) -> None:
        p = self.partitions[key]
        msg = {"type": "alter-partition", "id": self.node, "topic": key[0], "partition": key[1],
               "leader_epoch": eff.leader_epoch, "partition_epoch": eff.partition_epoch,
               "isr": list(eff.isr), "broker_epochs": dict(eff.broker_epochs)}
        try:
            if "controller" in self.net.peers:
                await asyncio.sleep(2.0)
                raise WireError("controller unreachable (network partition)")
            resp = await self.ctl_alter.request(msg, timeout=2.0)
        except WireError:
            p.isr_proposal_failed()
            return
        if resp.get("error"):
            p.isr_proposal_failed()
        st = resp.get("state")
        if st:
            self.apply(key, p.apply_leader_and_isr(st["leader"], st["leader_epoch"], st["isr"],
                                                   st["partition_epoch"], st["replicas"], _now()))

    # -- replica fetcher (follower side) --------------------------------------------------

    async def _fetcher(self, key: Key) -> None:
        p = self.partitions[key]
        conn: AsyncConnection | None = None
        backoff = self.config.replica_fetch_backoff_ms / 1000
        timeout = self.config.replica_fetch_wait_max_ms / 1000 + 1.0
        try:
            while p.role == "follower":
                req = p.next_follower_request()
                addr = self.peers.get(p.leader or "")
                if req is None or addr is None:
                    await self._wait_changed(0.1)
                    continue
                if conn is None or conn.addr != addr:
                    if conn is not None:
                        conn.close()
                    conn = AsyncConnection(addr)
                gen = req["generation"]
                if p.features.alter_partition_broker_epochs:
                    req["replica_epoch"] = self.broker_epoch  # KIP-903
                if req["type"] == "offsets-for-leader-epoch":
                    self.events.add("epoch-request-sent", topic=key[0], partition=key[1],
                                    leader=p.leader, leader_epoch=p.leader_epoch,
                                    requested=req["leader_epoch_request"])
                try:
                    if p.leader in self.net.peers:
                        await asyncio.sleep(timeout)
                        raise WireError("leader unreachable (network partition)")
                    resp = await conn.request(req, timeout)
                    if p.leader in self.net.peers:
                        raise WireError("answer lost to a network partition")
                except WireError:
                    await asyncio.sleep(backoff)
                    continue
                if req["type"] == "offsets-for-leader-epoch":
                    effects = p.on_offsets_for_leader_epoch_response(gen, resp, _now())
                else:
                    effects = p.on_fetch_response(gen, resp, _now())
                self.apply(key, effects)
                if resp.get("error"):
                    await asyncio.sleep(backoff)
        finally:
            if conn is not None:
                conn.close()

    # -- requests ------------------------------------------------------------------------

    def _partition(self, msg: dict[str, Any]) -> tuple[Key, Partition | None]:
        key = (msg["topic"], int(msg["partition"]))
        return key, self.partitions.get(key)

    async def handle(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        resp = await self.net.deliver(msg, self._handle)
        if msg.get("type") == "produce" and msg.get("acks") == 0:
            # Kafka's KafkaApis.handleProduceRequest (0.10.2.0; the close since
            # KAFKA-955, 0.8.1): no answer to acks 0;
            # on an error the broker closes the connection instead, so the producer
            # learns something failed and refreshes its metadata.
            return CLOSE_CONNECTION if resp.get("error") else None
        return resp

    async def _handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        t = msg["type"]
        if t == "net-block":
            self.events.add("net-block", peers=sorted(msg["peers"]))
            return self.net.set(msg["peers"])
        if t == "net-delay":
            self.events.add("net-delay", rules=msg["rules"])
            return self.net.set_delays(msg["rules"])
        if t == "status":
            return self.status()
        if t == "events":
            return self.events.since(int(msg.get("since", 0)))
        if t == "metadata":
            return {"error": None, "brokers": self.peers, "partitions": self.cluster_states}
        if t == "flush":
            self.flush()
            return {"error": None}
        if t == "checkpoint-hw":
            self.checkpoint_hw()
            return {"error": None}
        key, p = self._partition(msg)
        if p is None:
            return {"error": "UNKNOWN_TOPIC_OR_PARTITION"}
        if t == "produce":
            return await self._produce(key, p, msg)
        if t == "fetch":
            return p.fetch_for_consumer(int(msg["offset"]), int(msg.get("max_records", 500)))
        if t == "replica-fetch":
            return await self._replica_fetch(key, p, msg)
        if t == "offsets-for-leader-epoch":
            resp, effects = p.offsets_for_leader_epoch(msg["leader_epoch_request"],
                                                       msg.get("current_leader_epoch"))
            self.apply(key, effects)
            return resp
        if t == "dump-log":
            return {"error": None, "records": [list(r) for r in p.log.records]}
        return {"error": "INVALID_REQUEST", "message": f"unknown request type {t!r}"}

    async def _produce(self, key: Key, p: Partition, msg: dict[str, Any]) -> dict[str, Any]:
        acks = msg.get("acks", "all")
        # `values`: a producer's batch (linger + batch size), appended atomically
        # and acknowledged as one; `offset` is then its base offset.
        batch = msg.get("values")
        values = batch if batch is not None else [msg.get("value")]
        if not isinstance(values, list) or not values or any(
                not isinstance(v, int) or isinstance(v, bool) for v in values):
            return {"error": "INVALID_REQUEST",
                    "message": "value must be an integer, values a non-empty list of them"}
        err, offset, effects = p.append_batch_as_leader(values, acks, _now())
        self.apply(key, effects)
        if err:
            return {"error": err, "offset": None, "appended": False}
        if acks not in ("all", -1):
            return {"error": None, "offset": offset, "appended": True}
        assert offset is not None
        last = offset + len(values) - 1  # acked once the HW passes the whole batch
        epoch = p.leader_epoch
        timeout_ms = min(int(msg.get("timeout_ms", self.config.request_timeout_ms)),
                         self.config.request_timeout_ms)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            outcome = p.produce_outcome(last, epoch)
            if outcome == "ok":
                return {"error": None, "offset": offset, "appended": True}
            if outcome is not None:
                return {"error": outcome, "offset": offset, "appended": True}
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {"error": "REQUEST_TIMED_OUT", "offset": offset, "appended": True}
            await self._wait_changed(remaining)

    async def _replica_fetch(self, key: Key, p: Partition, msg: dict[str, Any]) -> dict[str, Any]:
        args = (msg["replica_id"], int(msg["offset"]), msg.get("last_fetched_epoch"),
                msg.get("current_leader_epoch"), int(msg.get("max_records", 500)))
        resp, effects = p.fetch_for_replica(*args, _now(), msg.get("replica_epoch"))
        self.apply(key, effects)
        if resp.get("error") or resp.get("records") or resp.get("diverging_epoch"):
            return resp
        # Long poll: nothing new yet, so hold the answer until data arrives or
        # replica.fetch.wait.max.ms passes (Kafka's DelayedFetch).
        deadline = time.monotonic() + self.config.replica_fetch_wait_max_ms / 1000
        while p.role == "leader" and p.log.leo <= args[1]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await self._wait_changed(remaining)
        # DelayedFetch.onComplete: read again (the HW may have moved), no new update.
        resp, effects = p.reread_for_replica(*args)
        self.apply(key, effects)
        return resp

    def status(self) -> dict[str, Any]:
        parts = []
        for key, p in self.partitions.items():
            st = p.status()
            st["hw_checkpoint"] = self.hw_checkpointed.get(key, 0)
            st["fsynced_leo"] = self.store.partition(*key).fsynced_leo
            parts.append(st)
        return {"error": None, "node": self.node, "incarnation": self.incarnation,
                "protocol": self.protocol, "blocked": sorted(self.net.peers), "partitions": parts}

    # -- timers ----------------------------------------------------------------------------

    async def tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            now = _now()
            for key, p in self.partitions.items():
                self.apply(key, p.tick(now))

    async def hw_checkpoint_loop(self) -> None:
        interval = self.config.replica_high_watermark_checkpoint_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            self.checkpoint_hw()

    async def shutdown(self) -> None:
        """Kafka's controlled shutdown, then flush and checkpoint."""
        clean = False
        try:
            resp = await self.ctl.request({"type": "shutdown", "id": self.node,
                                           "incarnation": self.incarnation}, timeout=2.0)
            clean = not resp.get("error")
        except WireError:
            pass
        self.flush()
        self.checkpoint_hw()
        if clean and self.broker_epoch >= 0:
            self.store.clean_shutdown.write(self.broker_epoch)
        self.store.close()


async def amain(args: Any, stop: asyncio.Event) -> None:
    cluster = load_cluster_config(args.config)
    broker = Broker(args.id, args.advertise or args.listen, args.data_dir, args.controller,
                    cluster)
    server = await serve(args.listen, broker.handle)
    broker.halt = stop
    loops = [asyncio.create_task(c) for c in
             (broker.heartbeat_loop(), broker.tick_loop(), broker.hw_checkpoint_loop())]
    await stop.wait()
    for task in loops:
        task.cancel()
    for task in broker.fetchers.values():
        task.cancel()
    server.close()
    await broker.shutdown()
    if broker.exit_status:
        raise SystemExit(broker.exit_status)


def main() -> None:
    ap = common_args("isrlab reference broker")
    ap.add_argument("--id", required=True)
    ap.add_argument("--controller", required=True, help="controller HOST:PORT")
    ap.add_argument("--advertise", help="HOST:PORT peers use to reach this broker")
    args = ap.parse_args()
    run_main(f"broker-{args.id}", lambda stop: amain(args, stop))


if __name__ == "__main__":
    main()
