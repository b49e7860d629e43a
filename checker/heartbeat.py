"""A progress line every few seconds through a long silent stretch (a Spark job,
a wait on a busy checker server), so that a person watching knows what the time
goes to: `still checking 9 anomaly kinds (12s)`."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

FIRST_S = 2.0  # a stretch shorter than this says nothing more
EVERY_S = 10.0


@contextmanager
def heartbeat(say: Callable[[str], None], what: str, first: float = FIRST_S,
              every: float = EVERY_S) -> Iterator[threading.Event]:
    """Say `what (Ns)` after `first` seconds and every `every` seconds after, until
    the block ends or the yielded event is set (the awaited thing arrived)."""
    done = threading.Event()
    t0 = time.monotonic()

    def tick() -> None:
        wait = first
        while not done.wait(wait):
            try:
                say(f"{what} ({time.monotonic() - t0:.0f}s)")
            except Exception:  # noqa: BLE001 - the caller's next line meets it too
                return
            wait = every

    t = threading.Thread(target=tick, name="isrlab-heartbeat", daemon=True)
    t.start()
    try:
        yield done
    finally:
        done.set()
        t.join()


class Phases:
    """A progress callback whose every line starts a phase: while a phase lasts
    over `first` seconds, `still <line> (Ns)` follows every `every` seconds, until
    the next line or close(). Lines already indented by a caller stay so."""

    def __init__(self, say: Callable[[str], None], first: float = FIRST_S,
                 every: float = EVERY_S) -> None:
        self.say = say
        self.first = first
        self.every = every
        self._beat: contextlib.AbstractContextManager[threading.Event] | None = None

    def __call__(self, line: str) -> None:
        self.close()
        self.say(line)
        what = line.strip()
        if what.startswith("still "):
            return
        self._beat = heartbeat(self.say, f"still {what.rstrip('. ')}", self.first, self.every)
        self._beat.__enter__()

    def close(self) -> None:
        if self._beat is not None:
            self._beat.__exit__(None, None, None)
            self._beat = None

    def __enter__(self) -> Phases:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
