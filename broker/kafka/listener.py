"""The broker's Kafka-protocol listener: size-prefixed frames over TCP.

Kafka's framing: every request and response is a 4-byte big-endian size and that
many bytes. As Kafka's SocketServer, a connection's requests are answered in the
order they came, one at a time (it mutes a channel while a request is in
flight), so a client's pipelined produce requests reach the partition in order.
A frame larger than `socket.request.max.bytes` (Kafka's default, 100 MiB) or not
a request closes that connection only, as Kafka's InvalidReceiveException and
InvalidRequestException do; the broker and every other connection go on.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable

from ..wire import parse_addr

KAFKA_PORT_OFFSET = 1  # a broker's Kafka port is its own port + 1 (PROTOCOL.md)


def kafka_listen_address(addr: str) -> str:
    """The Kafka listener of the broker whose own (JSON) listener is `addr`."""
    host, port = parse_addr(addr)
    return f"{host}:{port + KAFKA_PORT_OFFSET}"


log = logging.getLogger("broker.kafka")

# socket.request.max.bytes's default (KafkaConfig, 0.10.2.0 to 4.x).
MAX_REQUEST_BYTES = 100 * 1024 * 1024
# A frame handler's answer: the response frame, None for no response (acks 0), or
# CLOSE to close the connection instead.
CLOSE = b""
FrameHandler = Callable[[bytes], Awaitable[bytes | None]]


class KafkaListener:
    """Accepts Kafka clients' connections and hands each frame to `handler`."""

    def __init__(self, handler: FrameHandler, max_request_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.accepted = 0
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, listen: str) -> None:
        host, port = parse_addr(listen)
        self._server = await asyncio.start_server(self._on_conn, host, port,
                                                  reuse_address=True)

    def close(self) -> None:
        """Stop taking connections and close every open one (the broker stops)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _on_conn(self, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.add(writer)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                if size < 0 or size > self.max_request_bytes:
                    log.warning("closing a Kafka connection: frame of %d bytes "
                                "(socket.request.max.bytes is %d)", size,
                                self.max_request_bytes)
                    break
                answer = await self.handler(await reader.readexactly(size))
                if answer == CLOSE:
                    break
                if answer is not None:
                    writer.write(answer)
                    await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the broker is stopping
        finally:
            self._writers.discard(writer)
            writer.close()
