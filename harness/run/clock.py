"""The run clock: the one time axis of a run, ns since the run started.

The run owns it (the runner starts it with the run and writes its origin to
run.json as start_unix_ns); the history stamps ops with it and the events
collector converts the brokers' unix-ns event times onto it, so ops and events
share one axis. Wall clock, because broker events carry wall-clock times.
"""

from __future__ import annotations

import time


class RunClock:
    """ns since the run started; converts the brokers' unix-ns event times."""

    def __init__(self, start_unix_ns: int | None = None) -> None:
        self.start_unix_ns = time.time_ns() if start_unix_ns is None else start_unix_ns

    def now(self) -> int:
        return time.time_ns() - self.start_unix_ns

    def from_unix(self, unix_ns: int) -> int:
        return unix_ns - self.start_unix_ns
