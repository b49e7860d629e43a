"""Where clients and the harness get time, connections and concurrency.

`REAL` is the wall clock, TCP connections and OS threads. The sim backend gives
its own runtime (virtual time, the simulated network, greenlets), so the same
producer, consumer, workload and scenario-step code runs deterministically in a
simulator; nothing above this module reads a clock, opens a socket or starts a
thread on its own.

A request distinguishes "never sent" from "lost" (the history needs it): a
refused connection raises NotSent, the request certainly did not leave; a
timeout or a dropped connection after sending raises WireError, it may have.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
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

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def request(self, addr: str, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One request on a fresh connection. Raises NotSent if it could not
        connect, WireError if the answer was lost."""
        conn = ClientConnection(addr, timeout=min(timeout, 2.0))
        try:
            conn.connect()
            return conn.request(msg, timeout=timeout)
        finally:
            conn.close()

    def send_only(self, addr: str, msg: dict[str, Any], timeout: float) -> None:
        """One request that gets no answer (a produce with acks 0) on a fresh
        connection: returns once it is written. Raises NotSent if it could not connect."""
        conn = ClientConnection(addr, timeout=min(timeout, 2.0))
        try:
            conn.connect()
            try:
                conn.send(msg)
            except OSError as e:
                raise WireError(f"{addr}: {type(e).__name__}: {e}") from e
        finally:
            conn.close()

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
