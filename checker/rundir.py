"""What the checker requires of a run directory before Spark reads it.

run.json and replicas/*/state.json are read (contract.rundir) and checked here
for the fields the checker needs, with precise error locations. The big JSON-lines
files are read by Spark (checker.load); here we only check that they exist, that
they are UTF-8 and whether their last line was torn by an interrupted run
(contract.rundir.check_utf8, torn_tail): byte-level looks Spark cannot give.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checker.historyonly import is_history_only
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
from contract.rundir import RunDirError, TornTail, check_utf8, read_json, torn_tail


@dataclass
class RunDir:
    """What the checker knows about one run before Spark reads its logs."""

    path: Path  # resolved; also the join key Spark derives from file paths
    meta: dict[str, Any]
    brokers: list[str]
    states: list[dict[str, Any]]  # one per (broker, partition), flattened
    has_events: bool
    torn: list[TornTail] = field(default_factory=list)

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

    def torn_tail(self, rel: str) -> TornTail | None:
        return next((t for t in self.torn if t.file == rel), None)


def _line_of(text: str, needle: str) -> int | None:
    """1-based line of the first occurrence of needle (for error messages)."""
    pos = text.find(needle)
    return None if pos < 0 else text.count("\n", 0, pos) + 1


# The shape of each run.json field the checker and the reports read beyond the
# ones checked value by value (docs/run-directory.md): a field of another shape is
# the run's error, one line, never a traceback halfway through a check.
_SHAPES: dict[str, tuple[tuple[type, ...], str]] = {
    "cluster": ((dict,), "an object"),
    "workload": ((dict,), "an object"),
    "broker_config": ((dict,), "an object"),
    "controller_config": ((dict,), "an object"),
    "chaos": ((dict,), "an object"),
    "swarm": ((dict,), "an object"),
    "labels": ((dict,), "an object"),
    "fault_windows": ((list,), "a list"),
    "nemesis": ((list,), "a list"),
    "seed": ((int,), "an integer"),
    "run_id": ((str,), "a string"),
    "description": ((str,), "a string"),
    "error": ((str,), "a string"),
}


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
    for key, (kinds, shape) in _SHAPES.items():
        if meta.get(key) is not None and not isinstance(meta[key], kinds):
            raise bad(key, f"must be {shape}, got {type(meta[key]).__name__}")
    brokers = (meta.get("cluster") or {}).get("brokers")
    if brokers is not None and not (isinstance(brokers, list)
                                    and all(isinstance(b, str) for b in brokers)):
        raise bad("cluster", "brokers must be a list of broker names")
    status = meta.get("status")
    if status is not None and status not in RUN_STATUSES:
        raise bad("status", f"unknown run status {status!r} (known: {', '.join(RUN_STATUSES)})")
    return meta


_STATE_INT_FIELDS = ("partition", "leo", "hw")


def _int(v: Any, bits: int = 64) -> bool:
    """An integer that fits the states' Spark column (64-bit; partition 32-bit)."""
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << (bits - 1)) <= v < \
        1 << (bits - 1)


def _pairs(v: Any) -> bool:
    """An epoch cache: [[epoch, start offset], ...]."""
    return isinstance(v, list) and all(isinstance(e, list) and len(e) == 2 and all(map(_int, e))
                                       for e in v)


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
            if not _int(p[key], 32 if key == "partition" else 64):
                raise RunDirError(run, rel, f"partitions[{i}].{key}: expected an integer")
        for key in ("leader_epoch", "hw_checkpoint"):
            if p.get(key) is not None and not _int(p[key]):
                raise RunDirError(run, rel, f"partitions[{i}].{key}: expected an integer or null")
        if not isinstance(p.get("isr") or [], list):
            raise RunDirError(run, rel, f"partitions[{i}].isr: expected a list of brokers")
        if not _pairs(p.get("epoch_cache") or []):
            raise RunDirError(run, rel, f"partitions[{i}].epoch_cache: expected "
                                        "[[epoch, start offset], ...]")
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


def _named_brokers(meta: dict[str, Any]) -> list[str]:
    """The brokers run.json's ``cluster.brokers`` names (none if it names none)."""
    named = (meta.get("cluster") or {}).get("brokers") if isinstance(meta.get("cluster"),
                                                                     dict) else None
    return [str(b) for b in named] if isinstance(named, list) else []


def read_rundir(run: Path) -> RunDir:
    """Validate the small files of one run and look at the tails of the big ones."""
    run = Path(run).resolve()
    meta, text = read_json(run, RUN_JSON)
    meta = _validate_meta(run, meta, text)
    if not (run / HISTORY).is_file():
        raise RunDirError(run, HISTORY, "missing file")
    rep = run / REPLICAS
    brokers = sorted(p.name for p in rep.iterdir() if p.is_dir()) if rep.is_dir() else []
    # A run on an existing Kafka cluster has no replica to read (checker.
    # historyonly: the kinds that leaves unchecked); any other run must have them.
    if not brokers and not is_history_only(meta):
        raise RunDirError(run, REPLICAS, "missing: no replicas/<broker>/ directories")
    # Every broker run.json names has its directory: a broker that never started
    # gets an empty log (harness.run.collect), so a missing one was lost, and a
    # verdict computed without it could hide a divergence its log held.
    if not is_history_only(meta):
        for b in _named_brokers(meta):
            if b not in brokers:
                raise RunDirError(run, f"{REPLICAS}/{b}/", f"missing: broker {b} is named in "
                                  f"{RUN_JSON} (cluster.brokers) but its replica directory "
                                  "is gone")
    states: list[dict[str, Any]] = []
    for b in brokers:
        for name in (LOG, STATE):
            if not (rep / b / name).is_file():
                raise RunDirError(run, f"{REPLICAS}/{b}/{name}", "missing file")
        state, stext = read_json(run, f"{REPLICAS}/{b}/{STATE}")
        states.extend(_validate_state(run, b, state, stext))
    has_events = (run / EVENTS).is_file()
    rd = RunDir(run, meta, brokers, states, has_events)
    jsonl = [HISTORY] + [f"{REPLICAS}/{b}/{LOG}" for b in brokers]
    if has_events:
        jsonl.append(EVENTS)
    for rel in jsonl:
        check_utf8(run, rel)
        t = torn_tail(run, rel)
        if t is not None:
            rd.torn.append(t)
    return rd
