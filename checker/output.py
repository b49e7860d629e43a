"""Writing check/anomalies.json and check/summary.json (atomically, so a report or
a trend job never reads half a file)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from contract import ANOMALIES_JSON, CHECK, SUMMARY_JSON


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def write_check(run_dir: Path, anomalies: list[dict[str, Any]], summary: dict[str, Any]) -> Path:
    out = Path(run_dir) / CHECK
    write_json(out / ANOMALIES_JSON, anomalies)
    write_json(out / SUMMARY_JSON, summary)
    return out
