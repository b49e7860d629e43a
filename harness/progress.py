"""Progress lines for a human watching a run (steps, fault windows, status)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Protocol, TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.quiet = quiet
        self.t0 = time.monotonic()

    def line(self, msg: str) -> None:
        if self.quiet:
            return
        elapsed = time.monotonic() - self.t0
        print(f"[{elapsed:7.2f}s] {msg}", file=self.stream, flush=True)


class _Counted(Protocol):
    @property
    def counts(self) -> Any: ...


class _Faulted(Protocol):
    @property
    def windows(self) -> list[Any]: ...


class StatusTicker(threading.Thread):
    """A status line every `every` seconds while a run's steps go: time left (of
    a chaos run's time limit), fault windows opened so far, client ops and their
    rate since the last line. It only reads counters; it never touches the cluster."""

    def __init__(self, progress: Progress, every: float, prefix: str,
                 workload: _Counted | None, nemesis: _Faulted,
                 time_limit: float | None) -> None:
        super().__init__(name="status", daemon=True)
        self.progress = progress
        self.every = every
        self.prefix = prefix
        self.workload = workload
        self.nemesis = nemesis
        self.time_limit = time_limit
        self._stop_event = threading.Event()

    def run(self) -> None:
        t0 = last_t = time.monotonic()
        last_n = 0
        while not self._stop_event.wait(self.every):
            now = time.monotonic()
            parts = [self.prefix] if self.prefix else []
            if self.time_limit is not None:
                parts.append(f"{max(0.0, self.time_limit - (now - t0)):.0f}s left")
            parts.append(f"{len(self.nemesis.windows)} fault window(s)")
            if self.workload is not None:
                c = self.workload.counts
                rate = (c.total - last_n) / max(now - last_t, 1e-9)
                parts.append(f"{c.total} sends ({c.ok} ok, {c.fail} fail, {c.info} info), "
                             f"{rate:.0f} ops/s")
                last_n = c.total
            last_t = now
            self.progress.line("status: " + " · ".join(parts))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)
