"""`isrlab nightly CONFIG.yaml --results DIR`: a configured chaos matrix, one night.

The config (docs/nightly.md, sample: nightly/sample.yaml) is a list of rows;
each row is a matrix -- versions x fault mixes x acks x config sets x backends
-- with its runs, time limit and the anomaly kinds it allows. Every cell runs
`runs` chaos runs (harness.chaos.runs, as `isrlab chaos` does), then the whole night
is checked in ONE Spark batch (harness.cli.batchcheck.check_batch: reports, the night's
index page, JUnit XML, rows appended to DIR's Parquet results table). Then
the trend page over every night in DIR is rendered from that table
(reports/trend.py), joined with each night's `night.json` (cell, fault mix,
detection time and throughput per run, which the table does not hold).

Layout: DIR/results/ (the Parquet table), DIR/trend.html, and per night
DIR/nights/<UTC time>/ with night.json, index.html, junit.xml and one
directory per cell holding its run directories.

Bad config: `FILE:LINE: what`, exit 2, nothing started. Exit 1 if any run has
an anomaly its row does not allow; else 3 if a run did not complete or could
not be checked; else 0.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contract import ANOMALIES_JSON, ANOMALY_KINDS, CHECK, PROTOCOLS
from contract.rundir import read_events, read_json
from harness.backends import BACKENDS
from harness.chaos.runs import ChaosConfig, parse_sets
from harness.duration import DurationError, parse_duration
from harness.errors import UsageError
from harness.validate import LIMITS, Validator
from harness.yamlloc import LocMap, LocSeq, load
from nemesis.schedule import FaultSpecError, parse_faults
from workloads.kafka_clients import CLIENTS, ClientConfigError, require_client

ROW_KEYS = ("name", "versions", "faults", "acks", "sets", "backends", "runs", "time_limit",
            "allow", "rate", "interval", "duration", "overlap", "producers", "partitions",
            "client", "client_config")
TOP_KEYS = ("seed", "defaults", "matrix")
ACKS = {"0": 0, "1": 1, "-1": -1, "all": "all"}
DETECTED = ("lost-write", "divergence")  # the kinds whose detection time is reported
# Cells a config may have: a 6 KB file of lists could otherwise ask for hundreds
# of thousands (minutes and hundreds of MB before anything runs).
MAX_CELLS = 10_000


@dataclass
class Cell:
    """One point of a row's matrix: `runs` chaos runs of one configuration."""

    row: str
    protocol: str
    faults: str
    acks: int | str
    set_name: str
    sets: list[str]
    backend: str
    runs: int
    config: ChaosConfig
    allow: list[str]

    @property
    def name(self) -> str:
        acks = "all" if self.acks == "all" else str(self.acks)
        return (f"{self.row}-{self.protocol}-{self.faults.replace(',', '+')}-acks{acks}-"
                f"{self.set_name}-{self.backend}")


@dataclass
class NightConfig:
    path: Path
    cells: list[Cell]
    seed: int | None = None
    rows: list[str] = field(default_factory=list)


def _list(v: Validator, raw: Any, line: int, what: str) -> list[Any]:
    if isinstance(raw, LocSeq):
        if not raw:
            raise v.err(line, f"{what} must not be empty")
        return list(raw)
    if isinstance(raw, LocMap):
        raise v.err(line, f"{what} must be a value or a list of values")
    return [raw]


def load_config(path: Path) -> NightConfig:
    """Parse and check a nightly config; ScenarioError (`FILE:LINE: what`) if wrong."""
    v = Validator(path)
    doc = v.mapping(load(path), 1, "the nightly config")
    v.keys(doc, TOP_KEYS, "the nightly config", required=("matrix",))
    seed = None
    if "seed" in doc:
        seed = v.integer(doc["seed"], doc.line_of("seed"), "seed")
    defaults: LocMap = LocMap()
    if "defaults" in doc:
        defaults = v.mapping(doc["defaults"], doc.line_of("defaults"), "defaults")
        v.keys(defaults, tuple(k for k in ROW_KEYS if k != "name"), "defaults")
    rows = v.seq(doc["matrix"], doc.line_of("matrix"), "matrix")
    if not rows:
        raise v.err(doc.line_of("matrix"), "matrix must list at least one row")
    cells: list[Cell] = []
    names: list[str] = []
    for i, raw in enumerate(rows):
        row = v.mapping(raw, rows.line_of(i), f"matrix row {i + 1}")
        v.keys(row, ROW_KEYS, f"matrix row {i + 1}")
        name = v.string(row.get("name", f"row{i + 1}"), row.line_of("name"), "name")
        if name in names:
            raise v.err(row.line_of("name"), f"row name {name!r} is used twice")
        names.append(name)
        cells.extend(_row_cells(v, name, row, defaults))
        if len(cells) > MAX_CELLS:
            raise v.err(row.line, f"the matrix has {len(cells)} cells up to row {name!r}; "
                                  f"a night has at most {MAX_CELLS}")
    return NightConfig(path=path, cells=cells, seed=seed, rows=names)


def _row_cells(v: Validator, name: str, row: LocMap, defaults: LocMap) -> list[Cell]:
    def get(key: str, default: Any) -> tuple[Any, int]:
        if key in row:
            return row[key], row.line_of(key)
        if key in defaults:
            return defaults[key], defaults.line_of(key)
        return default, row.line

    raw, line = get("versions", None)
    if raw is None:
        raise v.err(row.line, f"row {name!r} is missing 'versions'")
    versions = _distinct(v, [str(x) for x in _list(v, raw, line, "versions")], line, "versions")
    for x in versions:
        if x not in PROTOCOLS:
            raise v.err(line, f"unknown version {x!r}; known: {', '.join(PROTOCOLS)}")
    raw, line = get("faults", "kill")
    mixes = _distinct(v, [str(x) for x in _list(v, raw, line, "faults")], line, "faults")
    for m in mixes:
        try:
            parse_faults(m)
        except FaultSpecError as e:
            raise v.err(line, str(e)) from None
    raw, line = get("acks", "all")
    acks_list = []
    for a in _list(v, raw, line, "acks"):
        if str(a) not in ACKS:
            raise v.err(line, f"acks must be 0, 1, -1 or all, got {a!r}")
        acks_list.append(ACKS[str(a)])
    _distinct(v, acks_list, line, "acks")
    raw, line = get("sets", None)
    sets: dict[str, list[str]] = {"default": []}
    if raw is not None:
        m = v.mapping(raw, line, "sets")
        sets = {}
        for set_name, conf in m.items():
            at = m.line_of(set_name)
            if conf is None:
                conf = LocMap()
            c = v.mapping(conf, at, f"config set {set_name!r}")
            items = [f"{k}={_value_text(val)}" for k, val in c.items()]
            try:
                parse_sets(items)
            except UsageError as e:
                raise v.err(at, f"config set {set_name!r}: {e}") from None
            sets[str(set_name)] = items
    raw, line = get("backends", "local")
    backends = _distinct(v, [str(x) for x in _list(v, raw, line, "backends")], line, "backends")
    for b in backends:
        if b not in BACKENDS:
            raise v.err(line, f"unknown backend {b!r}; known: {', '.join(sorted(BACKENDS))}")
    raw, line = get("runs", 1)
    runs = v.integer(raw, line, "runs", minimum=1)
    raw, line = get("time_limit", "60s")
    try:
        time_limit = parse_duration(str(raw), "time limit")
    except DurationError as e:
        raise v.err(line, str(e)) from None
    raw, line = get("allow", [])
    allow = _allow(v, raw, line, versions)
    numbers: dict[str, Any] = {}
    for key, minimum in (("rate", 0.0), ("interval", 0.0), ("duration", 0.0),
                         ("overlap", -1.0), ("producers", 0), ("partitions", 0)):
        raw, line = get(key, None)
        if raw is None:
            continue
        if isinstance(minimum, int) and not isinstance(minimum, float):
            numbers[key] = v.integer(raw, line, key, 1,
                                     LIMITS["clients" if key == "producers" else "partitions"])
            continue
        if key in ("interval", "duration"):  # durations: the one grammar (`3`, `2s`)
            try:
                numbers[key] = parse_duration(raw, key)
            except DurationError as e:
                raise v.err(line, str(e)) from None
            continue
        if key == "rate":
            numbers[key] = v.rate(raw, line, key)
            continue
        try:
            x = float(raw)
        except (TypeError, ValueError):
            x = math.nan
        if not (x > minimum) or (key == "overlap" and not 0 <= x <= 1):
            raise v.err(line, f"{key} must be a number "
                              f"{'in 0..1' if key == 'overlap' else '> 0'}, got {raw!r}")
        numbers[key] = x
    client, client_config = _client(v, get, backends, acks_list)
    count = len(versions) * len(mixes) * len(acks_list) * len(sets) * len(backends)
    if count > MAX_CELLS:
        raise v.err(row.line, f"row {name!r} has {count} cells (versions x faults x acks x "
                              f"sets x backends); a night has at most {MAX_CELLS}")
    cells = []
    for protocol, mix, acks, (set_name, items), backend in itertools.product(
            versions, mixes, acks_list, sets.items(), backends):
        broker_cfg, controller_cfg = parse_sets(items)
        partitions = numbers.get("partitions", 3)
        cfg = ChaosConfig(protocol=protocol, time_limit=time_limit, faults=parse_faults(mix),
                          acks=acks, broker_config=broker_cfg,
                          controller_config=controller_cfg, consumers=partitions,
                          client=client, client_config=dict(client_config), **numbers)
        cells.append(Cell(row=name, protocol=protocol, faults=mix, acks=acks,
                          set_name=set_name, sets=items, backend=backend, runs=runs,
                          config=cfg, allow=allow.get(protocol, [])))
    return cells


def _client(v: Validator, get: Any, backends: list[str],
            acks_list: list[int | str]) -> tuple[str | None, dict[str, Any]]:
    """The row's real Kafka client and its settings (as `isrlab chaos --client
    --client-config`): known, not on the simulator, its settings the client's own
    check accepts -- all before the night starts."""
    raw, line = get("client", None)
    if raw is None:
        raw, line = get("client_config", None)
        if raw is not None:
            raise v.err(line, "client_config needs a client (confluent-kafka, kafka-python "
                              "or kcat)")
        return None, {}
    client = v.string(raw, line, "client")
    if client not in CLIENTS:
        raise v.err(line, f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    if "sim" in backends:
        raise v.err(line, f"client {client}: a real Kafka client needs real brokers; not on "
                          "the sim backend")
    config: dict[str, Any] = {}
    raw, cline = get("client_config", None)
    if raw is not None:
        m = v.mapping(raw, cline, "client_config")
        config = {str(k): val for k, val in m.items()}
    try:
        for acks in acks_list:  # each cell's producer is built with its acks
            require_client(client, config, acks)
    except ClientConfigError as e:
        raise v.err(cline if raw is not None else line, str(e)) from None
    return client, config


def _distinct(v: Validator, values: list[Any], line: int, what: str) -> list[Any]:
    """values, unless one is listed twice: its cells would have one name (and one
    directory)."""
    for i, x in enumerate(values):
        if x in values[:i]:
            raise v.err(line, f"{what} lists {x!r} twice")
    return values


def _value_text(val: Any) -> str:
    if isinstance(val, bool):
        return "true" if val else "false"
    return "null" if val is None else str(val)


def _allow(v: Validator, raw: Any, line: int, versions: list[str]) -> dict[str, list[str]]:
    """`allow: [kinds]` for every version of the row, or `{version: [kinds]}`."""
    def kinds(x: Any, at: int) -> list[str]:
        out = [str(k) for k in (x if isinstance(x, list) else [x])] if x is not None else []
        for k in out:
            if k not in ANOMALY_KINDS:
                raise v.err(at, f"unknown anomaly kind {k!r}; known: {', '.join(ANOMALY_KINDS)}")
        return out

    if isinstance(raw, LocMap):
        out = {}
        for ver, x in raw.items():
            if str(ver) not in versions:
                raise v.err(raw.line_of(ver), f"allow names version {ver!r}, not one of the "
                                              f"row's versions: {', '.join(versions)}")
            out[str(ver)] = kinds(x, raw.line_of(ver))
        return out
    same = kinds(raw, line)
    return {ver: same for ver in versions}


# -- per-run figures -----------------------------------------------------------


def truncation_events(run_dir: Path) -> list[dict[str, Any]]:
    out = [ev for ev in read_events(run_dir)
           if ev.get("type") == "truncate" and ev.get("from", 0) > ev.get("to", 0)]
    return sorted(out, key=lambda e: e["time"])


def loss_time(anomaly: dict[str, Any], truncations: list[dict[str, Any]]) -> float | None:
    """Seconds after the run started when an anomaly's record was lost: the first
    truncation after its acknowledgement, on any replica, that removed its
    offset; without one, the acknowledgement's time (a lower bound)."""
    w = anomaly.get("witness") or {}
    op = w.get("op") or {}
    acked = op.get("time")
    offset = next((w[k] for k in ("acked_offset", "offset") if isinstance(w.get(k), int)), None)
    where = (anomaly.get("topic", w.get("topic")), anomaly.get("partition", w.get("partition")))
    if offset is not None:
        for ev in truncations:
            if acked is not None and ev["time"] < acked:
                continue
            if (ev.get("topic"), ev.get("partition")) == where and \
                    ev["to"] <= offset < ev["from"]:
                return ev["time"] / 1e9
    return acked / 1e9 if isinstance(acked, int) else None


def detection_times(run_dir: Path, kinds: tuple[str, ...] = DETECTED) -> dict[str, float | None]:
    """kind -> seconds to the run's first anomaly of that kind (None: none found),
    from its check/anomalies.json and events.jsonl."""
    rel = f"{CHECK}/{ANOMALIES_JSON}"
    anomalies = read_json(run_dir, rel)[0] if (run_dir / rel).exists() else []
    truncations = truncation_events(run_dir) if anomalies else []
    out: dict[str, float | None] = {k: None for k in kinds}
    for a in anomalies:
        k = a.get("kind")
        if k not in out:
            continue
        t = loss_time(a, truncations)
        prev = out[k]
        if t is not None and (prev is None or t < prev):
            out[k] = round(t, 2)
    return out


def throughput(summary: dict[str, Any]) -> float | None:
    """Acknowledged records per second over the run (the checker's figures)."""
    fig = summary.get("figures") or {}
    ns, ok = fig.get("duration_ns"), fig.get("sends_ok")
    if not ns or ok is None:
        return None
    return round(ok / (ns / 1e9), 1)


def night_id(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
