"""Progress lines for a human watching a run (steps, fault windows)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


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
