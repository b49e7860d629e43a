"""Addresses on this host: valid ports, free addresses, the "address in use"
error, which names the isrlab container holding the port if one does (a leftover
of a crashed Docker run: `isrlab docker clean`), and the reservation that keeps
two isrlab runs started at the same instant from sharing an address.

A free-address check alone cannot: both runs pass it before either binds. So a
run reserves every address its nodes will listen on, all at once, under one
machine-wide lock (`reserve`): of runs whose addresses overlap, exactly the first
gets them and the others are refused before they start anything. A reservation
is an flock on a file per address, so it ends with its process, however that
ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

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


RESERVATIONS = Path(tempfile.gettempdir()) / "isrlab-addresses"


class Reservation:
    """The addresses one run holds (reserve); `release` gives them back."""

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds

    def release(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)  # the flock goes with the last descriptor
        self._fds = []


def reserve(addresses: list[tuple[str, str]], holder: str) -> Reservation:
    """Hold every (node, address) for this run (``holder``: the run, for the
    message of a run refused), or raise the "address in use" UsageError naming the
    run that holds one. All or nothing, under one lock: of runs started together
    on overlapping addresses, exactly one gets them."""
    RESERVATIONS.mkdir(mode=0o1777, exist_ok=True)
    with _registry():
        fds: list[int] = []
        try:
            for node, addr in addresses:
                fd = os.open(RESERVATIONS / addr.replace(":", "_"), os.O_RDWR | os.O_CREAT,
                             0o666)
                fds.append(fd)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    other = os.pread(fd, 512, 0).decode(errors="replace").strip()
                    raise UsageError(f"address in use: {addr} (needed by {node}) is held by "
                                     f"another isrlab run{f' ({other})' if other else ''}; "
                                     "try another --port") from None
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{holder}, pid {os.getpid()}".encode(), 0)
        except BaseException:
            Reservation(fds).release()
            raise
    return Reservation(fds)


@contextlib.contextmanager
def _registry() -> Iterator[None]:
    fd = os.open(RESERVATIONS / ".registry", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def check_free(addresses: list[tuple[str, str]]) -> None:
    """Raise the "address in use" UsageError for the first (node, address) whose
    address is taken."""
    for node, addr in addresses:
        if not address_free(addr):
            raise address_in_use(addr, node)
