"""Writing check/anomalies.json and check/summary.json (atomically, so a report or
a trend job never reads half a file)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

CHECK_DIR = "check"
ANOMALIES = "anomalies.json"
SUMMARY = "summary.json"


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def write_check(run_dir: Path, anomalies: list[dict[str, Any]], summary: dict[str, Any]) -> Path:
    out = Path(run_dir) / CHECK_DIR
    write_json(out / ANOMALIES, anomalies)
    write_json(out / SUMMARY, summary)
    return out


def read_check(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    out = Path(run_dir) / CHECK_DIR
    return (
        json.loads((out / ANOMALIES).read_text()),
        json.loads((out / SUMMARY).read_text()),
    )
