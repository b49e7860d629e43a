"""The broker process: an asyncio shell around the sans-IO BrokerCore.

    python -m broker.server --id ID --listen HOST:PORT --data-dir DIR \
        --controller HOST:PORT --config FILE

The shell owns sockets, files, the event log and the wall clock; every protocol
decision is made by `BrokerCore` (and the `Partition`s in it), which the
deterministic simulator drives too. The shell carries out the effects the core
returns, in order, and feeds it requests, answers and ticks.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from .admin import INCONSISTENT_CLUSTER_ID, AdminRequests
from .broker_core import (
    CONTROLLER,
    STORAGE_EFFECTS,
    BrokerCore,
    BrokerEffect,
    LoadedPartition,
    Respond,
    Send,
    ShutdownDone,
)
from .config import BrokerConfig
from .kafka.apis import Changes, KafkaApis
from .kafka.listener import KafkaListener, kafka_listen_address
from .partition import Event, HaltBroker
from .process import CLOSE_CONNECTION, common_args, load_cluster_config, now_ms, run_main
from .storage import BrokerStore
from .wire import AsyncConnection, WireError

log = logging.getLogger("broker")
TICK_S = 0.05  # the longest the shell sleeps between ticks of the core


class Broker:
    def __init__(self, node: str, advertise: str, data_dir: Path, controller: str,
                 cluster: dict[str, Any]) -> None:
        self.node = node
        self.controller = controller
        self.halt: asyncio.Event | None = None  # set by amain; HaltBroker sets it
        self.exit_status = 0
        incarnation = os.urandom(6).hex()
        self.cluster_id: str | None = cluster.get("cluster_id")
        self.admin = AdminRequests(node, incarnation, self.status, self._request,
                                   self.cluster_id)
        self.store = BrokerStore(data_dir)
        marker = self.store.clean_shutdown.value
        loaded = {}
        for t in cluster["topics"]:
            for p, replicas in enumerate(t["replicas"]):
                if node in replicas:
                    ps = self.store.partition(t["name"], p)
                    loaded[(t["name"], p)] = LoadedPartition(
                        list(ps.records), ps.epoch_entries,
                        self.store.checkpointed_hw(t["name"], p))
        self.core = BrokerCore(
            node, advertise, cluster["protocol"],
            BrokerConfig.from_dict(cluster.get("broker"), cluster["protocol"]),
            dict(cluster["brokers"]), incarnation, loaded,
            previous_broker_epoch=int(marker) if isinstance(marker, int) else -1,
            clean_marker_present=marker is not None)
        self._next_rid = 0
        self._replies: dict[int, asyncio.Future] = {}
        self._conns: dict[tuple[str, str], AsyncConnection] = {}
        self._tasks: set[asyncio.Task] = set()
        self._shutdown: asyncio.Future | None = None
        # The Kafka-protocol listener (own port: PROTOCOL.md) onto the same core.
        self.changes = Changes()
        self.kafka = KafkaApis(node, cluster["protocol"], list(cluster["brokers"]),
                               cluster["topics"], self._request, self.changes,
                               cluster.get("kafka_advertised"), controller, self.cluster_id)
        self.kafka_listener = KafkaListener(self.kafka.handle_frame)
        self.perform(self.core.start(now_ms()))

    # -- carrying out the core's effects -------------------------------------------------

    def perform(self, effects: list[BrokerEffect]) -> None:
        if effects:
            self.changes.notify()  # a long-polling Kafka Fetch looks again
        for eff in effects:
            if isinstance(eff, STORAGE_EFFECTS):
                self.store.perform(eff)
            elif isinstance(eff, Event):
                self.admin.events.add(eff.type, **eff.fields)
            elif isinstance(eff, Send):
                self._spawn(self._send(eff))
            elif isinstance(eff, Respond):
                fut = self._replies.pop(eff.rid, None)
                if fut is not None and not fut.done():
                    fut.set_result(eff)
            elif isinstance(eff, HaltBroker):
                # Kafka's fatal + exit: shutdown hooks run (a controlled shutdown).
                log.critical("exiting: %s", eff.reason)
                self.exit_status = 1
                if self.halt is not None:
                    self.halt.set()
            elif isinstance(eff, ShutdownDone):
                if self._shutdown is not None and not self._shutdown.done():
                    self._shutdown.set_result(eff.clean)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, eff: Send) -> None:
        """One request to a peer over the channel's connection; a peer this process
        is cut off from (a network partition) never answers."""
        addr = self.controller if eff.to == CONTROLLER else self.core.address_of(eff.to)
        timeout = eff.timeout_ms / 1000
        resp: dict[str, Any] | None = None
        conn = self._conns.get((eff.to, eff.channel))
        if addr is not None and (conn is None or conn.addr != addr):
            if conn is not None:
                conn.close()
            conn = self._conns[(eff.to, eff.channel)] = AsyncConnection(addr)
        try:
            if conn is None or eff.to in self.admin.net.peers:
                await asyncio.sleep(timeout)
                raise WireError(f"{eff.to} unreachable")
            msg = eff.msg if self.cluster_id is None else {**eff.msg,
                                                             "cluster_id": self.cluster_id}
            resp = await conn.request(msg, timeout)
            if eff.to in self.admin.net.peers:
                raise WireError("answer lost to a network partition")
            if resp.get("error") == INCONSISTENT_CLUSTER_ID:
                # Kafka's broker refuses to run against another cluster
                # (InconsistentClusterIdException): it exits.
                log.critical("exiting: %s at %s belongs to another cluster: %s", eff.to, addr,
                             resp.get("message"))
                self.exit_status = 1
                if self.halt is not None:
                    self.halt.set()
                resp = None
        except WireError as e:
            log.debug("%s: %s", eff.msg.get("type"), e)
            resp = None
        self.perform(self.core.on_answer(eff.tag, resp, now_ms()))

    # -- requests ------------------------------------------------------------------------

    async def _request(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """A request for the core (admin.AdminRequests answers the shell's own)."""
        rid = self._next_rid
        self._next_rid += 1
        fut = asyncio.get_running_loop().create_future()
        self._replies[rid] = fut
        self.perform(self.core.on_request(rid, msg, now_ms()))
        answer: Respond = await fut
        if answer.close:
            return CLOSE_CONNECTION
        return answer.resp

    def status(self) -> dict[str, Any]:
        st = self.core.status()
        for p in st["partitions"]:
            p["fsynced_leo"] = self.store.partition(p["topic"], p["partition"]).fsynced_leo
        return st

    # -- time ------------------------------------------------------------------------------

    async def tick_loop(self) -> None:
        while True:
            wait = (self.core.next_deadline() - now_ms()) / 1000
            await asyncio.sleep(min(max(wait, 0.001), TICK_S))
            self.perform(self.core.tick(now_ms()))

    async def shutdown(self) -> None:
        """Kafka's controlled shutdown, then flush and checkpoint (the core's)."""
        self._shutdown = asyncio.get_running_loop().create_future()
        self.perform(self.core.begin_shutdown(now_ms()))
        await self._shutdown
        for conn in self._conns.values():
            conn.close()
        if self.kafka.groups is not None:
            self.kafka.groups.pool.close()
        self.store.close()


async def amain(args: Any, stop: asyncio.Event) -> None:
    cluster = load_cluster_config(args.config)
    broker = Broker(args.id, args.advertise or args.listen, args.data_dir, args.controller,
                    cluster)
    await broker.admin.listener.start(args.listen)
    await broker.kafka_listener.start(kafka_listen_address(args.listen))
    broker.halt = stop
    ticker = asyncio.create_task(broker.tick_loop())
    await stop.wait()
    ticker.cancel()
    # No request is taken from here on; what the shutdown logs after it (a halted
    # broker's flush and checkpoints) reaches the harness from the process's log.
    broker.admin.listener.close()
    broker.kafka_listener.close()
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
