"""Wire framing shared by brokers, the controller and clients.

One JSON object per line over TCP. A connection carries one request at a time:
the client writes a request line and reads exactly one response line. Keeping the
framing this plain means a human can talk to a broker with `nc`.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

MAX_LINE = 64 * 1024 * 1024


class WireError(Exception):
    """The peer went away or sent something that is not a response."""


def encode(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    msg = json.loads(line)
    if not isinstance(msg, dict):
        raise WireError(f"expected a JSON object, got {type(msg).__name__}")
    return msg


def parse_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


class AsyncConnection:
    """A persistent request/response connection (asyncio)."""

    def __init__(self, addr: str, connect_timeout: float = 1.0) -> None:
        self.addr = addr
        self.connect_timeout = connect_timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()

    async def _connect(self) -> None:
        host, port = parse_addr(self.addr)
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=MAX_LINE), self.connect_timeout
        )

    async def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        async with self._lock:
            try:
                if self._writer is None:
                    await self._connect()
                assert self._reader is not None and self._writer is not None
                self._writer.write(encode(msg))
                await self._writer.drain()
                line = await asyncio.wait_for(self._reader.readline(), timeout)
                if not line:
                    raise WireError(f"{self.addr} closed the connection")
                return decode(line)
            except (TimeoutError, OSError, ValueError, WireError) as e:
                # A request whose answer we did not read leaves the stream out of
                # step, so the connection is dropped whatever went wrong.
                self.close()
                if isinstance(e, WireError):
                    raise
                raise WireError(f"{self.addr}: {type(e).__name__}: {e}") from e

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


class Connection:
    """A persistent request/response connection (blocking), for clients and the harness."""

    def __init__(self, addr: str, timeout: float = 5.0) -> None:
        self.addr = addr
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._file: Any = None

    def request(self, msg: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        try:
            if self._sock is None:
                host, port = parse_addr(self.addr)
                self._sock = socket.create_connection((host, port), timeout=self.timeout)
                self._file = self._sock.makefile("rb")
            self._sock.settimeout(timeout if timeout is not None else self.timeout)
            self._sock.sendall(encode(msg))
            line = self._file.readline(MAX_LINE)
            if not line:
                raise WireError(f"{self.addr} closed the connection")
            return decode(line)
        except (OSError, ValueError, WireError) as e:
            self.close()
            if isinstance(e, WireError):
                raise
            raise WireError(f"{self.addr}: {type(e).__name__}: {e}") from e

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._file.close()
                self._sock.close()
            except OSError:
                pass
        self._sock = self._file = None

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
