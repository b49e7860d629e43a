"""Run-directory discovery and the small, Python-side part of reading one.

run.json and replicas/*/state.json are small and read here with precise error
locations. The big JSON-lines files are read by Spark (checker.load); here we only
check that they exist and whether their last line was cut short by an interrupted
run, which needs a byte-level look Spark cannot give.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checker.errors import RunDirError
from contract import (
    ANOMALY_KINDS,
    EVENTS,
    HISTORY,
    LOG,
    PROTOCOLS,
    REPLICAS,
    ROLES,
    RUN_JSON,
    RUN_STATUSES,
    STATE,
)

# Lines longer than this at the end of a file are read in full anyway; it only
# bounds the first read of the tail.
_TAIL_BYTES = 1 << 16


@dataclass
class Truncation:
    """A last line without its newline that is not valid JSON: an interrupted write."""

    file: str  # relative to the run directory
    line: int  # 1-based
    text: str  # the partial line as found

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "partial_text": self.text[:200]}


@dataclass
class RunDir:
    """What the checker knows about one run before Spark reads its logs."""

    path: Path  # resolved; also the join key Spark derives from file paths
    meta: dict[str, Any]
    brokers: list[str]
    states: list[dict[str, Any]]  # one per (broker, partition), flattened
    has_events: bool
    truncations: list[Truncation] = field(default_factory=list)

    @property
    def key(self) -> str:
        return str(self.path)

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def expect(self) -> list[str]:
        return list(self.meta.get("expect") or [])

    @property
    def scenario(self) -> str | None:
        return self.meta.get("scenario")

    @property
    def protocol(self) -> str:
        return str(self.meta.get("protocol"))

    @property
    def status(self) -> str | None:
        """run.json ``status`` (contract.RUN_STATUSES; None if absent, as in a
        synthetic run)."""
        return self.meta.get("status")

    @property
    def history_bytes(self) -> int:
        p = self.path / HISTORY
        return p.stat().st_size if p.is_file() else 0

    def truncation_for(self, rel: str) -> Truncation | None:
        return next((t for t in self.truncations if t.file == rel), None)


def discover(paths: list[Path]) -> list[Path]:
    """Expand the given paths into run directories (a dir holding run.json).

    A path that is itself a run directory is taken as is; any other directory is
    searched recursively, so a nightly tree of hundreds of runs is one argument.
    """
    found: list[Path] = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise RunDirError(p, None, "no such run directory")
        if (p / RUN_JSON).is_file():
            found.append(p.resolve())
            continue
        if not p.is_dir():
            raise RunDirError(p, None, "not a run directory (no run.json)")
        runs = sorted(q.parent.resolve() for q in p.rglob(RUN_JSON))
        # A run's own check/ output never holds run.json, but skip nested copies.
        runs = [r for r in runs if not any(a in runs for a in r.parents)]
        if not runs:
            raise RunDirError(p, None, "no run directories (no run.json) under this path")
        found.extend(runs)
    seen: set[Path] = set()
    return [r for r in found if not (r in seen or seen.add(r))]


def _line_of(text: str, needle: str) -> int | None:
    """1-based line of the first occurrence of needle (for error messages)."""
    pos = text.find(needle)
    return None if pos < 0 else text.count("\n", 0, pos) + 1


def _load_json(run: Path, rel: str) -> tuple[Any, str]:
    path = run / rel
    if not path.is_file():
        raise RunDirError(run, rel, "missing file")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        return json.loads(text), text
    except json.JSONDecodeError as e:
        raise RunDirError(run, rel, f"not valid JSON: {e.msg}", e.lineno) from None


def _validate_meta(run: Path, meta: Any, text: str) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise RunDirError(run, RUN_JSON, "expected a JSON object", 1)

    def bad(key: str, msg: str) -> RunDirError:
        return RunDirError(run, RUN_JSON, f"{key}: {msg}", _line_of(text, f'"{key}"'))

    for key in ("protocol", "expect"):
        if key not in meta:
            raise RunDirError(run, RUN_JSON, f"missing field {key!r}")
    if meta["protocol"] not in PROTOCOLS:
        raise bad(
            "protocol", f"unknown protocol {meta['protocol']!r} (known: {', '.join(PROTOCOLS)})"
        )
    expect = meta["expect"]
    if not isinstance(expect, list) or not all(isinstance(k, str) for k in expect):
        raise bad("expect", "must be a list of anomaly kinds")
    for kind in expect:
        if kind not in ANOMALY_KINDS:
            raise bad("expect", f"unknown anomaly kind {kind!r}")
    scenario = meta.get("scenario")
    if scenario is not None and not isinstance(scenario, str):
        raise bad("scenario", "must be a name or null")
    status = meta.get("status")
    if status is not None and status not in RUN_STATUSES:
        raise bad("status", f"unknown run status {status!r} (known: {', '.join(RUN_STATUSES)})")
    return meta


_STATE_INT_FIELDS = ("partition", "leo", "hw")


def _validate_state(run: Path, broker: str, state: Any, text: str) -> list[dict[str, Any]]:
    rel = f"{REPLICAS}/{broker}/{STATE}"
    if not isinstance(state, dict) or not isinstance(state.get("partitions"), list):
        raise RunDirError(run, rel, "expected an object with a 'partitions' list", 1)
    rows = []
    for i, p in enumerate(state["partitions"]):
        if not isinstance(p, dict):
            raise RunDirError(run, rel, f"partitions[{i}]: expected an object")
        for key in ("topic", *_STATE_INT_FIELDS, "role"):
            if p.get(key) is None:
                raise RunDirError(run, rel, f"partitions[{i}]: missing field {key!r}")
        for key in _STATE_INT_FIELDS:
            if not isinstance(p[key], int):
                raise RunDirError(run, rel, f"partitions[{i}].{key}: expected an integer")
        if p["role"] not in ROLES:
            raise RunDirError(
                run,
                rel,
                f"partitions[{i}].role: unknown role {p['role']!r}",
                _line_of(text, json.dumps(p["role"])),
            )
        rows.append(
            {
                "broker": broker,
                "topic": str(p["topic"]),
                "partition": int(p["partition"]),
                "role": p["role"],
                "leader": None if p.get("leader") is None else str(p["leader"]),
                "leader_epoch": p.get("leader_epoch"),
                "leo": int(p["leo"]),
                "hw": int(p["hw"]),
                "hw_checkpoint": p.get("hw_checkpoint"),
                "isr": [str(b) for b in (p.get("isr") or [])],
                "epoch_cache": [[int(e), int(o)] for e, o in (p.get("epoch_cache") or [])],
            }
        )
    return rows


def _check_tail(run: Path, rel: str) -> Truncation | None:
    """Detect a truncated last line: no trailing newline and not parseable JSON."""
    path = run / rel
    size = path.stat().st_size
    if size == 0:
        return None
    with path.open("rb") as fh:
        fh.seek(max(0, size - _TAIL_BYTES))
        tail = fh.read()
        if tail.endswith(b"\n"):
            return None
        if b"\n" not in tail and size > _TAIL_BYTES:
            fh.seek(0)
            tail = fh.read()
    last = tail.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
    try:
        json.loads(last)
        return None  # complete record, only the newline is missing
    except json.JSONDecodeError:
        pass
    with path.open("rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return Truncation(rel, lines + 1, last)


def read_rundir(run: Path) -> RunDir:
    """Validate the small files of one run and look at the tails of the big ones."""
    run = Path(run).resolve()
    meta, text = _load_json(run, RUN_JSON)
    meta = _validate_meta(run, meta, text)
    if not (run / HISTORY).is_file():
        raise RunDirError(run, HISTORY, "missing file")
    rep = run / REPLICAS
    brokers = sorted(p.name for p in rep.iterdir() if p.is_dir()) if rep.is_dir() else []
    if not brokers:
        raise RunDirError(run, REPLICAS, "missing: no replicas/<broker>/ directories")
    states: list[dict[str, Any]] = []
    for b in brokers:
        for name in (LOG, STATE):
            if not (rep / b / name).is_file():
                raise RunDirError(run, f"{REPLICAS}/{b}/{name}", "missing file")
        state, stext = _load_json(run, f"{REPLICAS}/{b}/{STATE}")
        states.extend(_validate_state(run, b, state, stext))
    has_events = (run / EVENTS).is_file()
    rd = RunDir(run, meta, brokers, states, has_events)
    jsonl = [HISTORY] + [f"{REPLICAS}/{b}/{LOG}" for b in brokers]
    if has_events:
        jsonl.append(EVENTS)
    for rel in jsonl:
        t = _check_tail(run, rel)
        if t is not None:
            rd.truncations.append(t)
    return rd


def find_line(run: Path, rel: str, raw: str) -> int | None:
    """1-based line number of the first line equal to raw (error path only)."""
    with (Path(run) / rel).open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if line.rstrip("\r\n") == raw:
                return n
    return None
