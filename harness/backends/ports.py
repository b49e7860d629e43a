"""Addresses on this host: valid ports, free addresses, and the "address in use"
error, which names the isrlab container holding the port if one does (a leftover
of a crashed Docker run: `isrlab docker clean`)."""

from __future__ import annotations

import socket

from harness.backends.docker_engine import port_holder
from harness.errors import UsageError

MAX_PORT = 65535


def check_port_range(backend: str, first: int, count: int) -> None:
    """Raise UsageError unless ports first..first+count-1 are all valid TCP ports."""
    last = first + count - 1
    if first < 1 or last > MAX_PORT:
        what = f"port {first}" if count == 1 else f"ports {first}..{last}"
        fix = f"; give --port 1..{MAX_PORT - count + 1}" if MAX_PORT - count + 1 >= 1 else ""
        raise UsageError(f"the {backend} backend needs {what}, outside 1..{MAX_PORT}{fix}")


def address_free(addr: str) -> bool:
    """True if a listening socket could bind addr. SO_REUSEADDR as asyncio's
    servers use it, so TIME_WAIT leftovers of a previous run do not count as busy."""
    host, _, port = addr.rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(port)))
            s.listen(1)
        except OSError:
            return False
    return True


def address_in_use(addr: str, node: str) -> UsageError:
    """The "address in use" error for `node`'s address `addr`."""
    holder = port_holder(int(addr.rpartition(":")[2]))
    return UsageError(f"address in use: {addr} (needed by {node}); "
                      f"{holder or 'try another --port'}")


def check_free(addresses: list[tuple[str, str]]) -> None:
    """Raise the "address in use" UsageError for the first (node, address) whose
    address is taken."""
    for node, addr in addresses:
        if not address_free(addr):
            raise address_in_use(addr, node)
