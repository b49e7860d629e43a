"""What the broker and controller processes share: serving, event log, start-up."""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .config import ConfigError
from .netdelay import DelayRules, parse_rules
from .protocol import features
from .wire import MAX_LINE, decode, encode, parse_addr

# A handler's answer; None for a request that gets none, CLOSE_CONNECTION to close
# the connection instead of answering (a produce with acks 0, server.py).
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]
CLOSE_CONNECTION: dict[str, Any] = {"close": True}  # never sent: compared by identity
MAX_EVENTS_PER_ANSWER = 2000
# How long a `net-delay` answer waits for the messages it releases to leave (they
# leave within a polling interval; the bound keeps a stuck link from stalling it).
RELEASE_WAIT_MS = 1000
# The process log's format (run_main) and its two kinds of event lines (EventLog).
LOG_LEVEL = "INFO"
INCARNATION_LINE = "incarnation "
EVENT_LINE = "event "


def now_ms() -> float:
    """The processes' clock for their cores and delay rules: monotonic, in ms."""
    return time.monotonic() * 1000


class EventLog:
    """Protocol events of one process incarnation, readable by a `since` cursor.

    Every event is also one line of the process's log (stderr), after one line
    naming the incarnation: what a reader that comes too late for `events` -- the
    process has exited -- reads instead (`logged_events`)."""

    def __init__(self, node: str, incarnation: str) -> None:
        self.node = node
        self.incarnation = incarnation
        self.events: list[dict[str, Any]] = []
        self.log = logging.getLogger(node)
        self.log.info("%s%s", INCARNATION_LINE, incarnation)

    def add(self, type_: str, **fields: Any) -> None:
        ev = {"seq": len(self.events), "time": time.time_ns(), "node": self.node,
              "type": type_, **fields}
        self.events.append(ev)
        self.log.info("%s%s", EVENT_LINE, json.dumps(ev, separators=(",", ":")))

    def since(self, n: int) -> dict[str, Any]:
        batch = self.events[n:n + MAX_EVENTS_PER_ANSWER]
        return {"error": None, "events": batch, "next": n + len(batch)}


def logged_events(log: str, incarnation: str) -> list[dict[str, Any]] | None:
    """The events incarnation `incarnation` wrote to `log` (a process log, every
    incarnation's appended, as run_main formats it), in order; None if the log
    does not name that incarnation. A line that is not whole JSON (cut off by a
    crash) is skipped."""
    found: list[dict[str, Any]] | None = None
    for line in log.splitlines():
        message = line.partition(f" {LOG_LEVEL} ")[2]
        if message.startswith(INCARNATION_LINE):
            if found is not None:
                break  # the next incarnation's
            if message[len(INCARNATION_LINE):].strip() == incarnation:
                found = []
        elif found is not None and message.startswith(EVENT_LINE):
            try:
                ev = json.loads(message[len(EVENT_LINE):])
            except ValueError:
                continue
            if isinstance(ev, dict):
                found.append(ev)
    return found


def sender(msg: dict[str, Any]) -> str | None:
    """The peer process a request comes from (a follower's fetch names itself
    `replica_id`, a broker's request to the controller `id`); None for a client's
    or the harness's."""
    return msg.get("replica_id") or msg.get("id")


class NetBlock:
    """A partition made by the process's own transport (the local backend's nemesis).

    A request from a blocked peer is never answered, as if its packets were
    dropped; the peer's own timeout ends it. Requests to a blocked peer are not
    sent. Admin requests (no sender) always pass, so the harness keeps its view.
    """

    def __init__(self) -> None:
        self.peers: set[str] = set()
        # The `delay` nemesis (broker/netdelay.py): held links, one FIFO per link.
        self.delays = DelayRules()
        self._links: dict[tuple[str, str], asyncio.Lock] = {}
        self._held: list[tuple[str, str, str]] = []  # (peer, direction, type) held now
        self.on_event: Callable[..., None] | None = None  # the process's EventLog.add

    def set(self, peers: list[str]) -> dict[str, Any]:
        self.peers = set(peers)
        return {"error": None, "blocked": sorted(self.peers)}

    async def set_delays(self, raw: list[dict[str, Any]]) -> dict[str, Any]:
        """The `net-delay` admin request: replace the delay rules ([] delivers
        everything held, in order). The answer waits until every message the new
        rules release has left (its `delay-delivered` event written), so a
        `deliver` step that returned has delivered -- a run that ends right after
        it still collects those events."""
        try:
            rules = parse_rules(raw, now_ms())
        except ValueError as e:
            return {"error": "INVALID_REQUEST", "message": str(e)}
        self.delays.set(rules)
        deadline = now_ms() + RELEASE_WAIT_MS
        while now_ms() < deadline and any(
                self.delays.release_at(*held, now_ms()) is None for held in self._held):
            await asyncio.sleep(0.005)
        return {"error": None, "delays": len(rules)}

    async def deliver(self, msg: dict[str, Any], handler: Handler) -> dict[str, Any]:
        """Answer ``msg`` unless its sender is blocked -- before or after handling it:
        a long-polling fetch that started before the partition must not carry
        records across it. A delayed link holds the request before it is handled
        and the answer after."""
        await self.hold(msg, "in")
        await self.drop_if_blocked(msg)
        resp = await handler(msg)
        await self.drop_if_blocked(msg)
        await self.hold(msg, "out")
        return resp

    async def hold(self, msg: dict[str, Any], direction: str) -> None:
        """Wait while a delay rule holds this message; messages held on one link
        leave in the order they came (asyncio.Lock wakes its waiters in order).
        Every held message is a `delay-held` event when it arrives, also one queued
        behind another on its link, as in the simulator (sim_cluster)."""
        peer = sender(msg)
        rtype = str(msg.get("type", ""))
        if peer is None or self.delays.release_at(peer, direction, rtype, now_ms()) is None:
            return
        self._event("delay-held", peer=peer, direction=direction, request=rtype)
        link = self._links.setdefault((peer, direction), asyncio.Lock())
        held = (peer, direction, rtype)
        self._held.append(held)
        try:
            async with link:
                while self.delays.release_at(peer, direction, rtype, now_ms()) is not None:
                    await asyncio.sleep(0.01)
                self._event("delay-delivered", peer=peer, direction=direction, request=rtype)
        finally:
            self._held.remove(held)

    def _event(self, type_: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(type_, **fields)

    async def drop_if_blocked(self, msg: dict[str, Any]) -> None:
        peer = sender(msg)
        if peer is None or peer not in self.peers:
            return
        while peer in self.peers:
            await asyncio.sleep(0.05)
        # Healed, but this request was "lost": close without an answer.
        raise ConnectionResetError("dropped by a network partition")


class Listener:
    """A process's listening socket and the connections it accepted.

    A connection carries any number of requests, one at a time (a client keeps
    one per node). `close` stops the process taking requests from clients and the
    harness as a closed listen socket alone did when each of their requests came
    on a new connection: it also closes each of their connections that waits for
    its next request, and one that is busy once its answer is written. A peer
    process's connection (its requests name their sender) is served until the
    process exits, as before."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.accepted = 0  # connections accepted so far (status: connections_accepted)
        self.closing = False
        self._idle: set[asyncio.StreamWriter] = set()  # clients' and the harness's
        self._server: asyncio.base_events.Server | None = None

    async def start(self, listen: str) -> None:
        host, port = parse_addr(listen)
        self._server = await asyncio.start_server(self._on_conn, host, port, limit=MAX_LINE,
                                                  reuse_address=True)

    def close(self) -> None:
        self.closing = True
        if self._server is not None:
            self._server.close()
        for writer in list(self._idle):
            writer.close()  # its readline ends at EOF
        self._idle.clear()

    async def _on_conn(self, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        peer = False  # a peer process's connection
        try:
            while peer or not self.closing:
                if not peer:
                    self._idle.add(writer)
                try:
                    line = await reader.readline()
                finally:
                    self._idle.discard(writer)
                if not line:
                    break
                try:
                    msg = decode(line)
                    peer = peer or sender(msg) is not None
                    resp = await self.handler(msg)
                except (ValueError, KeyError, TypeError) as e:
                    resp = {"error": "INVALID_REQUEST", "message": f"{type(e).__name__}: {e}"}
                if resp is CLOSE_CONNECTION:
                    break
                if resp is None:
                    continue
                writer.write(encode(resp))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # peer gone, or the process is stopping
        finally:
            writer.close()


def common_args(description: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--listen", required=True, help="HOST:PORT to serve on")
    ap.add_argument("--data-dir", required=True, type=Path)
    ap.add_argument("--config", required=True, type=Path, help="the run's cluster config (JSON)")
    return ap


def load_cluster_config(path: Path) -> dict[str, Any]:
    try:
        cfg = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such file") from e
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from e
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    for key in ("protocol", "brokers", "topics"):
        if key not in cfg:
            raise ConfigError(f"{path}: missing key {key!r}")
    features(cfg["protocol"])  # ConfigError on an unknown version
    return cfg


def run_main(name: str, main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run a process's main coroutine: SIGTERM/SIGINT stop it cleanly; exit codes as documented."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s {name} %(levelname)s %(message)s")

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    try:
        asyncio.run(runner())
    except ConfigError as e:
        print(f"{name}: configuration error: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            print(f"{name}: address in use: {e}", file=sys.stderr)
            sys.exit(3)
        raise
