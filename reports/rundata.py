"""What a report needs from a run directory (after the checker wrote check/): the
run's own files read by contract.rundir, and the checker's check/*.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checker.progress import Progress, json_rows, trace_moves
from contract import (
    ANOMALIES_JSON,
    ASSERTIONS_JSON,
    CHECK,
    REPLICAS,
    REPORT_INPUTS_JSON,
    SUMMARY_JSON,
    TRACE,
)
from contract.rundir import (
    RunDirError,
    read_events,
    read_history,
    read_json,
    read_log,
    read_meta,
    read_state,
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


Logs = dict[str, dict[str, list[dict[str, Any]]]]


@dataclass
class RunData:
    path: Path
    meta: dict[str, Any]
    summary: dict[str, Any]
    anomalies: list[dict[str, Any]]
    # broker → partition key "topic/partition" → list of log records (dicts); or
    # the function that reads them, called on first use (RunData.logs)
    _logs: Logs | Callable[[], Logs]
    # broker → partition key → state dict
    states: dict[str, dict[str, dict[str, Any]]]
    # history.jsonl's ops, or the function that reads them (RunData.history)
    _history: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]]
    events: list[dict[str, Any]]
    # broker → its source and state.json presence, every broker under replicas/
    replicas: dict[str, Replica] = field(default_factory=dict)
    # check/assertions.json when it judged this check: the scenario's figure
    # assertions, each with its measured value and result (harness.run.assertions)
    assertions: list[dict[str, Any]] = field(default_factory=list)
    # The client ops as the charts draw them (checker.clientops), from
    # check/report-inputs.json; None: the charts reduce the history themselves.
    client_ops: dict[str, Any] | None = None
    # From check/report-inputs.json too (checker.reportevents), None without:
    # the events the report shows, as [line index, event], and how many it left out
    # (events is then []); the replica progress charts' columns; the trace table.
    events_kept: list[list[Any]] | None = None
    events_left_out: int = 0
    progress: dict[str, Any] | None = None
    trace_table: dict[str, Any] | None = None
    # check/report-inputs.json of this check ({} without one): what the check
    # reduced the history and the replica logs to (docs/run-directory.md)
    inputs: dict[str, Any] = field(default_factory=dict)

    @property
    def logs(self) -> Logs:
        """The replica logs, read when first asked for: a report from the check's
        inputs never is."""
        if callable(self._logs):
            self._logs = self._logs()
        return self._logs

    @property
    def history(self) -> list[dict[str, Any]]:
        """history.jsonl, read when first asked for (as RunData.logs)."""
        if callable(self._history):
            self._history = self._history()
        return self._history


def pkey(topic: Any, partition: Any) -> str:
    return f"{topic}/{partition}"


def load(run_dir: Path) -> RunData:
    run_dir = Path(run_dir).resolve()
    check = run_dir / CHECK
    if not (check / SUMMARY_JSON).is_file() or not (check / ANOMALIES_JSON).is_file():
        raise RunDirError(run_dir, f"{CHECK}/{SUMMARY_JSON}", "missing: check the run first")
    meta = read_meta(run_dir)
    summary, _ = read_json(run_dir, f"{CHECK}/{SUMMARY_JSON}")
    judged = _check_object(check / ASSERTIONS_JSON)
    asserted: list[dict[str, Any]] = []
    if judged is not None and judged.get("checked_at") == summary.get("checked_at"):
        # The verdict with the figure assertions is the run's verdict.
        summary = {**summary, "verdict": judged.get("verdict", summary.get("verdict"))}
        asserted = [a for a in judged.get("assertions") or [] if isinstance(a, dict)]
    anomalies, _ = read_json(run_dir, f"{CHECK}/{ANOMALIES_JSON}")
    states: dict[str, dict[str, dict[str, Any]]] = {}
    replicas: dict[str, Replica] = {}
    rep = run_dir / REPLICAS
    for b in sorted(p.name for p in rep.iterdir() if p.is_dir()) if rep.is_dir() else []:
        state = _state(run_dir, b)
        parts = [p for p in (state or {}).get("partitions") or [] if isinstance(p, dict)]
        states[b] = {pkey(p.get("topic"), p.get("partition")): p for p in parts}
        source = (state or {}).get("source")
        if state is not None and source is None and (
            state.get("running") is False or any(p.get("offline") for p in parts)
        ):
            source = DATA_DIR  # an older collector: no "source", but "running"/"offline"
        replicas[b] = Replica(b, source, state is not None, len(parts))
    reduced = _check_object(check / REPORT_INPUTS_JSON)
    if reduced is not None and reduced.get("checked_at") != summary.get("checked_at"):
        reduced = None  # another check's: the report reduces the history itself
    evs = (reduced or {}).get("events")
    return RunData(
        run_dir,
        meta,
        summary,
        anomalies,
        lambda: _read_logs(run_dir, list(replicas)),
        states,
        lambda: read_history(run_dir),
        read_events(run_dir) if evs is None else [],
        replicas,
        asserted,
        (reduced or {}).get("client_ops"),
        events_kept=None if evs is None else evs["kept"],
        events_left_out=0 if evs is None else evs["left_out"],
        progress=(reduced or {}).get("progress"),
        trace_table=(reduced or {}).get("trace"),
        inputs=reduced or {},
    )


def _read_logs(run_dir: Path, brokers: list[str]) -> Logs:
    logs: Logs = {}
    for b in brokers:
        by_part: dict[str, list[dict[str, Any]]] = {}
        for r in read_log(run_dir, b):
            by_part.setdefault(pkey(r.get("topic"), r.get("partition")), []).append(r)
        logs[b] = by_part
    return logs


def _state(run_dir: Path, broker: str) -> dict[str, Any] | None:
    """A broker's state.json, or None when it is missing or unreadable (the report
    then shows its log without it)."""
    try:
        return read_state(run_dir, broker)
    except RunDirError:
        return None


def _check_object(path: Path) -> dict[str, Any] | None:
    """A JSON object the checker or the harness wrote in check/ (assertions.json,
    report-inputs.json), or None when it is missing or unreadable (the report then
    goes without it)."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def trace_progress(run_dir: Path) -> Progress:
    """Each replica's LEO and HW after every fetch round that moved them, from a sim
    run's trace.jsonl ({} without one): checker.progress.trace_moves, streamed."""
    try:
        f = open(Path(run_dir) / TRACE, "rb")  # noqa: SIM115 -- closed below
    except OSError:
        return {}
    with f:
        return trace_moves(json_rows(f))
