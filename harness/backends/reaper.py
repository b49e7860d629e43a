"""Last-resort cleanup of child process groups.

Backends stop what they started in their own `teardown()` (the normal finally
path). This module is the safety net behind it: every process group a backend
starts is registered here, and an atexit hook SIGKILLs whatever is still
registered, so an exception escaping teardown, or a second Ctrl-C during it,
still leaves no broker behind. Signal handlers turn SIGTERM/SIGHUP into an
exception so the finally paths run exactly as for Ctrl-C.

While a run's directory is being opened or closed (run.json written, replicas
collected, cluster torn down), an exception there would leave it half done -- a
run marked "running" by a harness that exited. The runner `hold()`s signals
over those stretches: the first one is then only noted, and `release()` raises
it once the run directory is consistent.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from harness.errors import Interrupted

_lock = threading.Lock()
_groups: set[int] = set()
_installed = False


def register(pgid: int) -> None:
    with _lock:
        _groups.add(pgid)


def unregister(pgid: int) -> None:
    with _lock:
        _groups.discard(pgid)


def kill_group(pgid: int) -> None:
    """SIGCONT then SIGKILL a whole group; a stopped process must be able to die."""
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return


def kill_all() -> None:
    with _lock:
        groups = list(_groups)
        _groups.clear()
    for pgid in groups:
        kill_group(pgid)


atexit.register(kill_all)

_signalled = False
_holding = False
_held: int | None = None  # the signal that arrived while holding


def _interrupt(signum: int, what: str = "; run incomplete") -> BaseException:
    if signum == signal.SIGINT:
        return KeyboardInterrupt()
    return Interrupted(f"interrupted by {signal.Signals(signum).name}{what}")


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _signalled, _held
    # Only the first signal raises: a second one during teardown must not
    # interrupt the cleanup it would otherwise be asking for.
    if _signalled:
        return
    _signalled = True
    if _holding:
        _held = signum
        return
    raise _interrupt(signum)


def hold() -> None:
    """From now on a signal is noted instead of raised, until `release()`."""
    global _holding
    _holding = True


def release(what: str = "; run incomplete") -> None:
    """Stop holding signals; raise the interrupt of one that arrived meanwhile
    (KeyboardInterrupt for SIGINT, else Interrupted "interrupted by SIG...`what`")."""
    global _holding, _held
    _holding = False
    signum, _held = _held, None
    if signum is not None:
        raise _interrupt(signum, what)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Signals held over a stretch that must not be cut in two -- an object being
    created in the Docker engine, whose id the harness must learn to remove it: an
    interrupt there would abort the request while the engine goes on creating it,
    after the teardown looked. The interrupt is raised once the stretch is done
    (release); inside a hold already taken, it waits for that one's release."""
    if _holding:
        yield
        return
    hold()
    try:
        yield
    finally:
        release()


def install_signal_handlers() -> None:
    """Route SIGINT/SIGTERM/SIGHUP into exceptions (main thread only)."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    _installed = True
