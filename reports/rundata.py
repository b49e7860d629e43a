"""Read what a report needs from a run directory (after the checker wrote check/)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from checker.errors import RunDirError
from contract import (
    ANOMALIES_JSON,
    ASSERTIONS_JSON,
    CHECK,
    EVENTS,
    HISTORY,
    LOG,
    REPLICAS,
    RUN_JSON,
    STATE,
    SUMMARY_JSON,
)

DATA_DIR = "data-dir"  # state.json "source" of a broker that was down (harness/run/collect.py)


@dataclass
class Replica:
    """What a broker's replicas/<broker>/ says about the broker as a whole."""

    broker: str
    # "status" (it answered at the end of the run), "data-dir" (it was down: its
    # files were read as its next start would find them), None when unknown
    source: str | None = None
    has_state: bool = True  # False: no readable state.json (its log alone is shown)
    partitions: int = 0  # partitions its state.json lists

    @property
    def down(self) -> bool:
        return self.source == DATA_DIR


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
    # broker → its source and state.json presence, every broker under replicas/
    replicas: dict[str, Replica] = field(default_factory=dict)
    # check/assertions.json when it judged this check: the scenario's figure
    # assertions, each with its measured value and result (harness.run.assertions)
    assertions: list[dict[str, Any]] = field(default_factory=list)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """Parse JSON lines, skipping the lines the checker already reported (a
    truncated last line); the checker has validated everything else."""
    out = []
    if not path.is_file():
        return out
    with path.open("rb") as fh:
        for line in fh:
            if line.strip():
                try:
                    out.append(orjson.loads(line))
                except orjson.JSONDecodeError:
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
    judged = _state(check / ASSERTIONS_JSON)
    asserted: list[dict[str, Any]] = []
    if judged is not None and judged.get("checked_at") == summary.get("checked_at"):
        # The verdict with the figure assertions is the run's verdict.
        summary = {**summary, "verdict": judged.get("verdict", summary.get("verdict"))}
        asserted = [a for a in judged.get("assertions") or [] if isinstance(a, dict)]
    anomalies = json.loads((check / ANOMALIES_JSON).read_text())
    logs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    states: dict[str, dict[str, dict[str, Any]]] = {}
    replicas: dict[str, Replica] = {}
    rep = run_dir / REPLICAS
    for b in sorted(p.name for p in rep.iterdir() if p.is_dir()) if rep.is_dir() else []:
        by_part: dict[str, list[dict[str, Any]]] = {}
        for r in _jsonl(rep / b / LOG):
            by_part.setdefault(pkey(r.get("topic"), r.get("partition")), []).append(r)
        logs[b] = by_part
        state = _state(rep / b / STATE)
        parts = [p for p in (state or {}).get("partitions") or [] if isinstance(p, dict)]
        states[b] = {pkey(p.get("topic"), p.get("partition")): p for p in parts}
        source = (state or {}).get("source")
        if state is not None and source is None and (
            state.get("running") is False or any(p.get("offline") for p in parts)
        ):
            source = DATA_DIR  # an older collector: no "source", but "running"/"offline"
        replicas[b] = Replica(b, source, state is not None, len(parts))
    return RunData(
        run_dir,
        meta,
        summary,
        anomalies,
        logs,
        states,
        _jsonl(run_dir / HISTORY),
        _jsonl(run_dir / EVENTS),
        replicas,
        asserted,
    )


def _state(path: Path) -> dict[str, Any] | None:
    """A JSON object file (a broker's state.json, check/assertions.json), or None
    when it is missing or unreadable (the report then goes without it)."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None
