"""The events collector: protocol events of every process into events.jsonl.

A background thread asks the controller and every reachable broker for
`events` since its cursor every ~30 ms. Cursors count per process incarnation:
a restart always breaks the collector's connection, and after any broken
connection the collector asks `status` for the incarnation first and starts
from 0 when it changed. Times become ns since the run started, on the history's
axis. Waits in scenario steps read the in-memory copy.

A process that ends -- killed by the nemesis, or exiting by itself (a 0.10-2.0
broker halting on OFFSET_OUT_OF_RANGE) -- no longer answers `events`, and what
it did last (a halt's flush and checkpoints) came after its last answer. Its
log has every event too (broker.process.EventLog), so once the collector sees
an incarnation's process gone, or replaced by the next, it reads the rest of
that incarnation from the log (the backend's `node_log`): every event a process
wrote before it exited reaches events.jsonl, whoever ended it.

A write to events.jsonl that fails (a full disk) is reported to the run's RunWrites,
which stops the run; the file gets nothing more (contract.rundir.RunFile), the
in-memory copy goes on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.process import logged_events
from broker.wire import Connection, WireError
from contract.rundir import RunFile, RunWriteError, RunWrites
from harness.backends.base import Backend
from harness.run.clock import RunClock


@dataclass
class _Cursor:
    conn: Connection | None = None
    incarnation: str | None = None
    since: int = 0
    # The incarnation may have events not read yet: it was seen running and has not
    # been read to the end of its log.
    open: bool = False


class EventsCollector:
    def __init__(self, backend: Backend, clock: RunClock, path: Path,
                 interval: float = 0.03, writes: RunWrites | None = None) -> None:
        self.backend = backend
        self.clock = clock
        self.path = path
        self.interval = interval
        self._file = RunFile(path, "the events", writes or RunWrites())  # closed by stop()
        self._cursors: dict[str, _Cursor] = {}
        self._poll_lock = threading.Lock()  # one poll at a time: thread vs drain()
        self._events: list[dict[str, Any]] = []
        self._events_lock = threading.Condition()
        self._stop_event = threading.Event()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread after one last poll of every reachable node."""
        if self._thread.is_alive():
            self._stop_event.set()
            self._thread.join(timeout=10)
        self.poll_all()
        with self._poll_lock:
            for cur in self._cursors.values():
                if cur.conn is not None:
                    cur.conn.close()
            if not self._file.closed:
                self._file.close()

    def _run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.poll_all()

    # -- polling -----------------------------------------------------------

    def poll_all(self) -> None:
        for node in self.backend.nodes:
            self.drain(node)

    def drain(self, node: str) -> None:
        """Collect everything `node` has now (the nemesis calls this before a kill
        so a process's last events are there before the fault is)."""
        with self._poll_lock:
            if self._file.closed:
                return
            cur = self._cursors.setdefault(node, _Cursor())
            if self.backend.is_reachable(node):
                # A connection kept from earlier may be to an incarnation gone since:
                # then once more on a new one.
                for _ in range(2 if cur.conn is not None else 1):
                    try:
                        self._poll(node, cur)
                        break
                    except WireError:
                        if cur.conn is not None:
                            cur.conn.close()
                        cur.conn = None
            if cur.open and not self.backend.is_running(node):
                if cur.conn is not None:
                    cur.conn.close()
                    cur.conn = None
                self._drain_log(node, cur)

    def _poll(self, node: str, cur: _Cursor) -> None:
        if cur.conn is None:
            cur.conn = Connection(self.backend.address(node), timeout=0.5)
            status = cur.conn.request({"type": "status"})
            incarnation = status.get("incarnation")
            if incarnation != cur.incarnation:
                if cur.open:
                    # Restarted before the collector saw it exit: the rest of the
                    # last incarnation first.
                    self._drain_log(node, cur)
                cur.incarnation, cur.since = incarnation, 0
            cur.open = incarnation is not None
        while True:
            reply = cur.conn.request({"type": "events", "since": cur.since})
            if reply.get("error") is not None:
                raise WireError(f"events on {node}: {reply['error']}")
            if cur.incarnation is None and reply.get("next", cur.since) < cur.since:
                # A process whose status names no incarnation restarted: its event
                # numbering began again (best effort; an incarnation is exact).
                cur.since = 0
                continue
            events = reply.get("events", [])
            if events:
                self._record(node, cur.incarnation, events)
            nxt = reply.get("next", cur.since + len(events))
            if not events or nxt == cur.since:
                return
            cur.since = nxt

    def _drain_log(self, node: str, cur: _Cursor) -> None:
        """Read the events of `cur`'s incarnation after its cursor from the node's
        log, to its end: the process has exited, its log is whole."""
        cur.open = False
        assert cur.incarnation is not None
        log = self.backend.node_log(node)
        events = logged_events(log, cur.incarnation) if log is not None else None
        rest = [ev for ev in events or [] if isinstance(ev.get("seq"), int)
                and ev["seq"] >= cur.since]
        if rest:
            self._record(node, cur.incarnation, rest)
            cur.since = rest[-1]["seq"] + 1

    def _record(self, node: str, incarnation: str | None, events: list[dict]) -> None:
        out = []
        for ev in events:
            ev = dict(ev)
            unix = ev.get("time")
            if isinstance(unix, int):
                ev["unix_ns"] = unix
                ev["time"] = self.clock.from_unix(unix)
            ev["node"] = ev.get("node") or node
            ev["incarnation"] = incarnation
            out.append(ev)
        try:
            self._file.write("".join(json.dumps(ev, separators=(",", ":")) + "\n"
                                     for ev in out).encode())
        except RunWriteError:
            pass  # reported to the run's RunWrites, which stops the run
        with self._events_lock:
            self._events.extend(out)
            self._events_lock.notify_all()

    # -- queries -----------------------------------------------------------

    def events(self, predicate: Callable[[dict[str, Any]], bool] | None = None) -> list[dict]:
        with self._events_lock:
            evs = list(self._events)
        return evs if predicate is None else [e for e in evs if predicate(e)]

    def count(self) -> int:
        with self._events_lock:
            return len(self._events)
