"""Writing the run directory (docs/run-directory.md, format version 1): layout and run.json.

run.json is written when the run starts (ended_at null, status "running", and the
`owner`: the harness process, harness.run.owner) and rewritten atomically when it ends,
so a crashed run is recognisable as such: "running" and its owner gone.
`isrlab collect` (harness.run.collect.collect_crashed) then reopens it and marks it
"crashed". The checker reads run directories with its own reader (checker/rundir.py).
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# run.json "status" (docs/run-directory.md): the names are the contract's, re-exported
# here for the harness modules that write or read it.
from contract import (
    COMPLETE,
    CRASHED,
    EVENTS,
    FORMAT_VERSION,
    HISTORY,
    INCOMPLETE,
    LOGS,
    REPLICAS,
    RUN_JSON,
    RUN_STATUSES,
    RUNNING,
)
from harness.errors import UsageError

__all__ = [
    "COMPLETE", "CRASHED", "INCOMPLETE", "RUNNING", "RUN_STATUSES", "RunDirWriter",
    "new_run_id", "read_meta", "run_status", "utc_at", "utc_now", "write_jsonl",
]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_at(unix_s: float) -> str:
    """A Unix time as utc_now() writes times."""
    return datetime.fromtimestamp(unix_s, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def new_run_id(scenario: str | None, protocol: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{scenario or 'run'}-{protocol}-{secrets.token_hex(3)}"


class RunDirWriter:
    """Creates one run's directory, names where each of its files goes, and keeps
    its run.json up to date."""

    def __init__(self, root: Path, run_id: str, *, existing: bool = False) -> None:
        self.run_id = run_id
        self.path = root / run_id
        self._meta: dict[str, Any] = {}
        if existing:
            self._meta = read_meta(self.path)
            self.run_id = str(self._meta.get("run_id") or run_id)  # if the dir was renamed
            self.logs.mkdir(exist_ok=True)
            self.replicas.mkdir(exist_ok=True)
            return
        self.path.mkdir(parents=True, exist_ok=False)
        self.logs.mkdir()
        self.replicas.mkdir()

    @classmethod
    def reopen(cls, path: Path) -> RunDirWriter:
        """The writer of an existing run directory, its run.json as found
        (UsageError if there is none or it is garbled)."""
        return cls(path.parent, path.name, existing=True)

    @property
    def run_json(self) -> Path:
        return self.path / RUN_JSON

    @property
    def history(self) -> Path:
        return self.path / HISTORY

    @property
    def events(self) -> Path:
        return self.path / EVENTS

    @property
    def logs(self) -> Path:
        return self.path / LOGS

    @property
    def replicas(self) -> Path:
        return self.path / REPLICAS

    def replica_dir(self, node: str) -> Path:
        d = self.replicas / node
        d.mkdir(parents=True, exist_ok=True)
        return d

    def write_meta(self, **fields: Any) -> None:
        """Merge fields into run.json and rewrite it atomically."""
        self._meta.update(fields)
        self._meta.setdefault("run_id", self.run_id)
        self._meta.setdefault("format_version", FORMAT_VERSION)
        tmp = self.run_json.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self._meta, indent=2, default=str, ensure_ascii=False) + "\n",
                       encoding="utf-8")
        os.replace(tmp, self.run_json)

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self._meta)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")


def read_meta(run_dir: Path) -> dict[str, Any]:
    """run.json of `run_dir` as a dict; UsageError (one line, exit 2) if it is
    missing or is not a JSON object."""
    path = run_dir / RUN_JSON
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{run_dir} is not a run directory (no {RUN_JSON})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot be read: {e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    if not isinstance(meta, dict):
        raise UsageError(f"{path}:1: expected a JSON object")
    return meta


def run_status(run_dir: Path) -> str | None:
    """run.json's status, or None if there is no readable run.json."""
    try:
        status = read_meta(run_dir).get("status")
    except UsageError:
        return None
    return status if isinstance(status, str) else None
