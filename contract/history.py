"""The Jepsen history recorder: history.jsonl, one operation per line.

Every op is written and flushed the moment it happens, so a run that crashes
still leaves a checkable prefix (docs/run-directory.md). The first write that
fails (a full disk, a read-only mount) raises contract.rundir.RunWriteError, is
reported to the run's RunWrites, and ends the history: every later append
raises it again and writes nothing, so the file stays a prefix. Times are ns since the run started,
read from the run's clock (the harness's RunClock, on the wall clock, because
broker events in events.jsonl carry wall-clock times and both must share one axis).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol

import orjson

from contract import OP_TYPES
from contract.rundir import RunFile, RunWrites

INVOKE, OK, FAIL, INFO = OP_TYPES


class Clock(Protocol):
    """What the history needs of a clock: ns since the run started (the harness's
    RunClock, or any stand-in)."""

    def now(self) -> int: ...


def _line(op: dict[str, Any]) -> bytes:
    """One op as a history line: the bytes json.dumps(op, separators=(",", ":"))
    writes for the history's values (non-str keys as strings too), at a fifth of
    its cost -- the simulator writes ~1,700 lines a run."""
    return orjson.dumps(op, option=orjson.OPT_NON_STR_KEYS)


class History:
    """Thread-safe append-only recorder; the file is the record (read it back
    with contract.rundir.read_history)."""

    WHAT = "the history"

    def __init__(self, path: Path, clock: Clock, writes: RunWrites | None = None) -> None:
        self.path = path
        self.clock = clock
        self.writes = writes or RunWrites()
        self._lock = threading.Lock()
        self._file = RunFile(path, self.WHAT, self.writes)  # closed by close()
        self._index = 0

    def append(
        self, process: int | str, type: str, f: str, value: Any = None, **fields: Any
    ) -> dict[str, Any]:
        if type not in OP_TYPES:
            raise ValueError(f"op type must be one of {OP_TYPES}, got {type!r}")
        with self._lock:
            op = {
                "index": self._index,
                "time": self.clock.now(),
                "process": process,
                "type": type,
                "f": f,
                "value": value,
                **fields,
            }
            self._file.write(_line(op) + b"\n")
            self._index += 1
            return op

    def append_many(self, ops: list[tuple[int | str, str, str, Any, dict[str, Any]]]
                    ) -> list[dict[str, Any]]:
        """Several ops (process, type, f, value, fields) at one time, in order, with one
        write and one flush: a producer's batch is one invoke or completion per record."""
        if not ops:
            return []
        with self._lock:
            now = self.clock.now()
            out, lines = [], []
            for process, type, f, value, fields in ops:
                if type not in OP_TYPES:
                    raise ValueError(f"op type must be one of {OP_TYPES}, got {type!r}")
                op = {"index": self._index, "time": now, "process": process, "type": type,
                      "f": f, "value": value, **fields}
                self._index += 1
                out.append(op)
                lines.append(_line(op))
            self._file.write(b"\n".join(lines) + b"\n")
            return out

    def invoke(self, process: int | str, f: str, value: Any = None, **fields: Any) -> dict:
        return self.append(process, INVOKE, f, value, **fields)

    def complete(
        self, invocation: dict[str, Any], type: str, value: Any = None, **fields: Any
    ) -> dict[str, Any]:
        """The completion of `invocation`: same process and f, the invoke's extra
        fields carried over (topic, partition, acks, ...) unless overridden."""
        carried = {
            k: v
            for k, v in invocation.items()
            if k not in ("index", "time", "process", "type", "f", "value")
        }
        carried.update(fields)
        if value is None:
            value = invocation.get("value")
        return self.append(invocation["process"], type, invocation["f"], value, **carried)

    def close(self) -> None:
        with self._lock:
            self._file.close()
