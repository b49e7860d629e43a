"""Read what a report needs from a run directory (after the checker wrote check/)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checker.errors import RunDirError
from contract import (
    ANOMALIES_JSON,
    CHECK,
    EVENTS,
    HISTORY,
    LOG,
    REPLICAS,
    RUN_JSON,
    STATE,
    SUMMARY_JSON,
)


@dataclass
class RunData:
    path: Path
    meta: dict[str, Any]
    summary: dict[str, Any]
    anomalies: list[dict[str, Any]]
    # broker → partition key "topic/partition" → list of log records (dicts)
    logs: dict[str, dict[str, list[dict[str, Any]]]]
    # broker → partition key → state dict
    states: dict[str, dict[str, dict[str, Any]]]
    history: list[dict[str, Any]]
    events: list[dict[str, Any]]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """Parse JSON lines, skipping the lines the checker already reported (a
    truncated last line); the checker has validated everything else."""
    out = []
    if not path.is_file():
        return out
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return out


def pkey(topic: Any, partition: Any) -> str:
    return f"{topic}/{partition}"


def load(run_dir: Path) -> RunData:
    run_dir = Path(run_dir).resolve()
    check = run_dir / CHECK
    if not (check / SUMMARY_JSON).is_file() or not (check / ANOMALIES_JSON).is_file():
        raise RunDirError(run_dir, f"{CHECK}/{SUMMARY_JSON}", "missing: check the run first")
    meta = json.loads((run_dir / RUN_JSON).read_text())
    summary = json.loads((check / SUMMARY_JSON).read_text())
    anomalies = json.loads((check / ANOMALIES_JSON).read_text())
    logs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    states: dict[str, dict[str, dict[str, Any]]] = {}
    rep = run_dir / REPLICAS
    for b in sorted(p.name for p in rep.iterdir() if p.is_dir()) if rep.is_dir() else []:
        by_part: dict[str, list[dict[str, Any]]] = {}
        for r in _jsonl(rep / b / LOG):
            by_part.setdefault(pkey(r.get("topic"), r.get("partition")), []).append(r)
        logs[b] = by_part
        st = rep / b / STATE
        parts = json.loads(st.read_text()).get("partitions", []) if st.is_file() else []
        states[b] = {pkey(p.get("topic"), p.get("partition")): p for p in parts}
    return RunData(
        run_dir,
        meta,
        summary,
        anomalies,
        logs,
        states,
        _jsonl(run_dir / HISTORY),
        _jsonl(run_dir / EVENTS),
    )
