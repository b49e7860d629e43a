"""Where clients and the harness get time, connections and concurrency.

`REAL` is the wall clock, TCP connections and OS threads. The sim backend gives
its own runtime (virtual time, the simulated network, greenlets), so the same
producer, consumer, workload and scenario-step code runs deterministically in a
simulator; nothing above this module reads a clock, opens a socket or starts a
thread on its own.

A request distinguishes "never sent" from "lost" (the history needs it): a
refused connection raises NotSent, the request certainly did not leave; a
timeout or a dropped connection after sending raises WireError, it may have.

Connections persist: a request takes an idle connection to its address (opened
by an earlier request of any client) or opens one, and gives it back once the
answer is read whole, so the clients keep about one connection per client and
node instead of one per request (which left ~19,000 sockets in TIME_WAIT after a
2 x 20 s chaos run, on ports that later `--port` choices and Docker port
mappings need). A connection whose request failed -- a timeout may leave half an
answer unread -- is closed, never reused. An idle connection whose peer has
closed it (the process died or stopped taking requests) is dropped before use,
so a request to a process that is gone still raises NotSent.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from broker.wire import Connection, WireError, encode, parse_addr


class NotSent(WireError):
    """The connection could not be opened: the request never left the client."""


class ClientConnection(Connection):
    """`Connection` with an explicit connect step (see module doc)."""

    def send(self, msg: dict[str, Any]) -> None:
        """Write a request whose answer is not awaited."""
        assert self._sock is not None
        self._sock.sendall(encode(msg))

    def reusable(self) -> bool:
        """Open, and nothing waits on it: the peer has neither closed it nor sent
        anything unasked (a look without blocking)."""
        if self._sock is None:
            return False
        # Non-blocking for the look: with a timeout set, recv would first wait for
        # the socket to become readable, however it is called.
        timeout = self._sock.gettimeout()
        self._sock.setblocking(False)
        try:
            self._sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True  # open, nothing to read
        except OSError:
            return False
        finally:
            self._sock.settimeout(timeout)
        return False  # b"": closed by the peer; a byte: nobody's answer

    def connect(self) -> None:
        if self._sock is not None:
            return
        host, port = parse_addr(self.addr)
        try:
            self._sock = socket.create_connection((host, port), timeout=self.timeout)
            self._file = self._sock.makefile("rb")
        except OSError as e:
            self.close()
            raise NotSent(f"{self.addr}: {type(e).__name__}: {e}") from e


class ConnectionPool:
    """Idle connections per address, shared by every thread of the process."""

    MAX_IDLE = 32  # per address: more are closed when given back

    def __init__(self) -> None:
        self._idle: dict[str, list[ClientConnection]] = {}
        self._lock = threading.Lock()

    def take(self, addr: str, connect_timeout: float) -> ClientConnection:
        """An idle live connection to `addr`, else a new one (NotSent if it cannot
        connect)."""
        while True:
            with self._lock:
                idle = self._idle.get(addr)
                conn = idle.pop() if idle else None
            if conn is None:
                break
            if conn.reusable():
                return conn
            conn.close()
        conn = ClientConnection(addr, timeout=connect_timeout)
        conn.connect()
        return conn

    def give(self, conn: ClientConnection) -> None:
        """Back after a request whose answer was read whole (or that gets none)."""
        with self._lock:
            idle = self._idle.setdefault(conn.addr, [])
            if len(idle) < self.MAX_IDLE:
                idle.append(conn)
                return
        conn.close()

    def close(self, addrs: Iterable[str] | None = None) -> None:
        """Close the idle connections (to `addrs`, or all)."""
        with self._lock:
            keys = list(self._idle) if addrs is None else [a for a in addrs if a in self._idle]
            conns = [c for a in keys for c in self._idle.pop(a)]
        for conn in conns:
            conn.close()


class Task(Protocol):
    def join(self, timeout: float | None = None) -> None: ...

    def is_alive(self) -> bool: ...


class Flag(Protocol):
    """threading.Event's interface."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class Runtime:
    """The real runtime: wall clock, TCP, threads."""

    def __init__(self) -> None:
        self._pool = ConnectionPool()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def request(self, addr: str, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One request on a connection of the pool. Raises NotSent if it could not
        connect, WireError if the answer was lost."""
        conn = self._pool.take(addr, connect_timeout=min(timeout, 2.0))
        done = False
        try:
            reply = conn.request(msg, timeout=timeout)
            done = True
            return reply
        finally:
            # Anything short of a whole answer (a timeout, an interrupt) closes it.
            if done:
                self._pool.give(conn)
            else:
                conn.close()

    def send_only(self, addr: str, msg: dict[str, Any], timeout: float) -> None:
        """One request that gets no answer (a produce with acks 0) on a connection of
        the pool: returns once it is written. Raises NotSent if it could not connect."""
        conn = self._pool.take(addr, connect_timeout=min(timeout, 2.0))
        done = False
        try:
            conn.send(msg)
            done = True
        except OSError as e:
            raise WireError(f"{addr}: {type(e).__name__}: {e}") from e
        finally:
            if done:
                self._pool.give(conn)
            else:
                conn.close()

    def close_idle(self, addrs: Iterable[str] | None = None) -> None:
        """Close the idle connections to `addrs` (all: None), e.g. once a run's
        cluster is gone."""
        self._pool.close(addrs)

    def spawn(self, target: Callable[[], None], name: str) -> Task:
        """Run `target` concurrently (a daemon thread)."""
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        return t

    def flag(self) -> Flag:
        return threading.Event()

    def lock(self) -> Any:
        """A re-entrant lock (a context manager)."""
        return threading.RLock()


REAL = Runtime()
