"""The runtime a run's steps wait on: the backend's, except that its sleeps end
at once once a write of the run directory has failed.

A full disk or a read-only mount is found by whichever writer writes first: a
producer or consumer thread (the history), the events collector, the
simulator's event loop (events, trace). None of them raises into its own
thread; each reports to the run's RunWrites, which sets this runtime's flag. The
steps' waits (a `sleep` step, every `wait_for` poll) sleep on that flag, so the
run's own thread wakes and raises the first write error within one poll, and
the runner closes the run as for any error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contract.rundir import RunWrites
from workloads.runtime import Flag, Runtime, Task


class HaltingRuntime(Runtime):
    def __init__(self, inner: Runtime, writes: RunWrites) -> None:
        self.inner = inner
        self.writes = writes
        self._halt = inner.flag()
        writes.on_failure(self._halt.set)

    def sleep(self, seconds: float) -> None:
        """Sleep; RunWriteError, at once, if a write of the run has failed."""
        if self._halt.wait(max(seconds, 0.0)):
            self.writes.check()

    def monotonic(self) -> float:
        return self.inner.monotonic()

    def request(self, addr: str, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self.inner.request(addr, msg, timeout)

    def send_only(self, addr: str, msg: dict[str, Any], timeout: float) -> None:
        self.inner.send_only(addr, msg, timeout)

    def spawn(self, target: Callable[[], None], name: str) -> Task:
        return self.inner.spawn(target, name)

    def flag(self) -> Flag:
        return self.inner.flag()

    def lock(self) -> Any:
        return self.inner.lock()
