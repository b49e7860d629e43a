"""Writing check/anomalies.json and check/summary.json (atomically, so a report or
a trend job never reads half a file). A write that fails (a full disk, a
read-only mount) is a CheckerError naming the file: one line, exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from checker.errors import CheckerError
from contract import ANOMALIES_JSON, CHECK, SUMMARY_JSON


def write_json(path: Path, data: Any, indent: int | None = 2) -> None:
    """``indent=None``: compact (one line without spaces)."""
    tmp = path.with_name(path.name + ".tmp")
    seps = None if indent is not None else (",", ":")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=indent, sort_keys=False, default=str,
                                  separators=seps) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise CheckerError(f"cannot write {path} (the check's results): "
                           f"{e.strerror or e}") from None


def write_check(run_dir: Path, anomalies: list[dict[str, Any]], summary: dict[str, Any]) -> Path:
    out = Path(run_dir) / CHECK
    write_json(out / ANOMALIES_JSON, anomalies)
    write_json(out / SUMMARY_JSON, summary)
    return out
