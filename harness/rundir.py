"""Writing the run directory (docs/run-directory.md, format version 1): layout and run.json.

run.json is written when the run starts (ended_at null, status "running") and
rewritten atomically when it ends, so a crashed run is recognisable as such.
The checker reads run directories with its own reader (checker/rundir.py).
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contract import EVENTS, FORMAT_VERSION, HISTORY, LOGS, REPLICAS, RUN_JSON


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_run_id(scenario: str | None, protocol: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{scenario or 'run'}-{protocol}-{secrets.token_hex(3)}"


class RunDirWriter:
    """Creates one run's directory, names where each of its files goes, and keeps
    its run.json up to date."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.run_id = run_id
        self.path = root / run_id
        self.path.mkdir(parents=True, exist_ok=False)
        self.logs.mkdir()
        self.replicas.mkdir()
        self._meta: dict[str, Any] = {}

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
