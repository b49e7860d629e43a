"""The run directory (docs/run-directory.md, format version 1): the one module that
reads and writes it.

The harness writes a run through RunDirWriter and write_jsonl; the harness's own
readers (collect, export, the figure assertions), the checker and the reports read
it through the functions below. So this is the one place that decides what a
file of a run directory means when it is not as written:

- run.json and replicas/<broker>/state.json are UTF-8 JSON: a byte that is not
  UTF-8, text that is not JSON, or a missing file is a RunDirError naming the
  run, the file and the line.
- history.jsonl, events.jsonl and replicas/<broker>/log.jsonl are appended line
  by line, so a run that was interrupted may leave its last line cut short (no
  newline, not valid JSON): a TornTail, the lines before it a checkable prefix.
  Any other line that is not UTF-8 or not a JSON object is a RunDirError.

Standard library only: every layer of isrlab may import it (tests/test_layering.py).
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contract import (
    CLIENT_FS,
    EVENTS,
    FORMAT_VERSION,
    HISTORY,
    LOG,
    LOGS,
    NEMESIS_FS,
    NEMESIS_PROCESS,
    OP_TYPES,
    REPLICAS,
    RESERVE,
    RUN_JSON,
    STATE,
    utf8,
)

__all__ = [
    "RunDirError", "RunDirWriter", "RunFile", "RunWriteError", "RunWrites", "TornTail",
    "check_utf8", "count_ops", "discover", "find_line", "new_run_id", "op_problem",
    "read_checked_history", "read_events", "read_history", "read_json", "read_jsonl",
    "read_jsonl_numbered", "read_log", "read_meta", "read_state", "readable_meta",
    "require_writable", "run_status", "torn_tail", "utc_at", "utc_now", "write_json",
    "write_jsonl",
]

# Lines longer than this at the end of a file are read in full anyway; it only
# bounds the first read of a big file's tail.
_TAIL_BYTES = 1 << 16
# Kept free in a running run's directory (RESERVE) so that a full disk still lets
# the run be closed: placeholder replicas and run.json, a few pages each.
_RESERVE_BYTES = 256 << 10


class RunDirError(Exception):
    """A run directory that cannot be read: a missing file, a byte that is not
    UTF-8, bad JSON, an unknown value. One line naming the run, the file and (when
    known) the line; a user error (exit 2, docs/exit-codes.md)."""

    exit_code = 2

    def __init__(self, run: str | Path, file: str | Path | None, message: str,
                 line: int | None = None) -> None:
        self.run = str(run)
        self.file = str(file) if file is not None else None
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"run {self.run}"
        if self.file:
            where += f": {self.file}"
            if self.line is not None:
                where += f" line {self.line}"
        # Keep the whole thing on one line whatever the message or a path contains.
        return " ".join(f"{where}: {self.message}".split())


class RunWriteError(Exception):
    """A file of a run directory could not be written (a full disk, a read-only
    mount, no permission): one line naming the path and what was being written.
    Exit 3 when it ends a run (the run incomplete); the one who raises it before
    anything was started or changed gives 2 (docs/exit-codes.md)."""

    def __init__(self, path: str | Path, what: str, error: OSError, exit_code: int = 3) -> None:
        self.path = str(path)
        self.what = what
        self.reason = error.strerror or " ".join(str(error).split()) or type(error).__name__
        self.exit_code = exit_code
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"cannot write {self.path} ({self.what}): {self.reason}"


class RunWrites:
    """The first write error of one run's directory. Every writer of the run reports
    its failure here (`failed`); the first one is kept and whoever listens
    (`on_failure`: the runner, which stops the run) is told once. Thread-safe:
    producer, consumer and events threads all write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.error: RunWriteError | None = None
        self._listeners: list[Callable[[], None]] = []

    def on_failure(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)

    def failed(self, path: str | Path, what: str, error: OSError) -> RunWriteError:
        """Record a failed write; returns the error to raise (this one's: each
        writer names its own file)."""
        err = RunWriteError(path, what, error)
        with self._lock:
            first = self.error is None
            if first:
                self.error = err
        if first:
            for fn in self._listeners:
                fn()
        return err

    def check(self) -> None:
        """Raise the run's first write error, if a write has failed."""
        if self.error is not None:
            raise self.error


class RunFile:
    """An append-only file of a run: the history, the events, the sim's trace.

    Its first write that fails is reported to the run's RunWrites and ends the
    file: that write's bytes not on disk are dropped, and every later write or
    flush raises the same RunWriteError and writes nothing -- what is on disk
    stays a prefix, its last line perhaps cut. Bytes are kept in memory up to
    `buffer` bytes (0: each write goes to disk at once) and on `flush`."""

    def __init__(self, path: Path, what: str, writes: RunWrites, *, truncate: bool = False,
                 buffer: int = 0) -> None:
        self.path = path
        self.what = what
        self.writes = writes
        self.error: RunWriteError | None = None
        self._buffer = buffer
        self._pending = bytearray()
        try:
            self._raw = open(path, "wb" if truncate else "ab", buffering=0)  # noqa: SIM115
        except OSError as e:
            raise writes.failed(path, what, e) from None

    def write(self, data: bytes) -> None:
        if self.error is not None:
            raise self.error
        self._pending += data
        if len(self._pending) > self._buffer:
            self.flush()

    def flush(self) -> None:
        if self.error is not None:
            raise self.error
        data = memoryview(bytes(self._pending))
        self._pending.clear()
        try:
            while data:
                data = data[self._raw.write(data):]
        except OSError as e:
            self.error = self.writes.failed(self.path, self.what, e)
            raise self.error from None

    def close(self) -> None:
        """Flush and close; a failed flush is reported (to RunWrites), not raised:
        closing is part of ending a run, which must go on."""
        if self._raw.closed:
            return
        try:
            if self.error is None:
                self.flush()
        except RunWriteError:
            pass
        finally:
            self._raw.close()

    @property
    def closed(self) -> bool:
        return self._raw.closed


@dataclass(frozen=True)
class TornTail:
    """The last line of an append-only JSON-lines file cut short by an interrupted
    write: no newline, and not valid JSON. The lines before it are the record."""

    file: str  # relative to the run directory
    line: int  # 1-based
    text: str  # the partial line as found

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "partial_text": self.text[:200]}


# -- names and times the harness writes ------------------------------------------


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_at(unix_s: float) -> str:
    """A Unix time as utc_now() writes times."""
    return datetime.fromtimestamp(unix_s, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def new_run_id(scenario: str | None, protocol: str) -> str:
    """`<UTC time>-<scenario>-<protocol>-<6 hex digits>`."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{scenario or 'run'}-{protocol}-{secrets.token_hex(3)}"


# -- writing ----------------------------------------------------------------------


class RunDirWriter:
    """Creates one run's directory, names where each of its files goes, and keeps
    its run.json up to date.

    run.json is written when the run starts (status "running", with its owner)
    and rewritten atomically whenever it changes, so a crashed run is
    recognisable: "running", and its owner gone.

    A write that fails (a full disk, a read-only mount) raises RunWriteError and
    is reported to `writes`. A new run's directory holds RESERVE, room kept free
    so that the run can still be closed on a full disk (`release_reserve`)."""

    def __init__(self, root: Path, run_id: str, *, existing: bool = False,
                 writes: RunWrites | None = None) -> None:
        self.run_id = run_id
        self.path = root / run_id
        self.writes = writes or RunWrites()
        self._meta: dict[str, Any] = {}
        if existing:
            self._meta = read_meta(self.path)
            self.run_id = str(self._meta.get("run_id") or run_id)  # if the dir was renamed
            for d in (self.logs, self.replicas):
                if not d.is_dir():  # a read-only run that has them is only read
                    self._guard(d, "the run directory", lambda d=d: d.mkdir(exist_ok=True))
            return

        def create() -> None:
            self.path.mkdir(parents=True, exist_ok=False)
            self.logs.mkdir()
            self.replicas.mkdir()

        self._guard(self.path, "the run directory", create)
        reserve = self.path / RESERVE
        self._guard(reserve, "room kept to close the run",
                    lambda: reserve.write_bytes(bytes(_RESERVE_BYTES)))

    def _guard(self, path: Path, what: str, write: Callable[[], Any]) -> None:
        try:
            write()
        except OSError as e:
            raise self.writes.failed(path, what, e) from None

    def release_reserve(self) -> None:
        """Free the room kept to close the run (before its last writes)."""
        try:
            (self.path / RESERVE).unlink(missing_ok=True)
        except OSError:
            pass  # a read-only mount: nothing can be written anyway

    @classmethod
    def reopen(cls, path: Path) -> RunDirWriter:
        """The writer of an existing run directory, its run.json as found
        (RunDirError if there is none or it cannot be read)."""
        return cls(path.parent, path.name, existing=True)

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

    def write_replica(self, node: str, rows: list[dict[str, Any]],
                      state: dict[str, Any]) -> None:
        """replicas/<node>/log.jsonl and state.json."""
        what = f"the replicas of {node}"
        out = self.replicas / node
        self._guard(out, what, lambda: out.mkdir(parents=True, exist_ok=True))
        self._guard(out / LOG, what, lambda: write_jsonl(out / LOG, rows))
        self._guard(out / STATE, what, lambda: write_json(out / STATE, state))

    def write_meta(self, **fields: Any) -> None:
        """Merge fields into run.json and rewrite it atomically (RunWriteError if it
        cannot be: the run.json before stays as it was)."""
        self._meta.update(fields)
        self._meta.setdefault("run_id", self.run_id)
        self._meta.setdefault("format_version", FORMAT_VERSION)
        tmp = self.run_json.with_suffix(".json.tmp")
        text = json.dumps(self._meta, indent=2, default=str, ensure_ascii=False) + "\n"
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self.run_json)
        except OSError as e:
            try:
                tmp.unlink(missing_ok=True)  # no half-written run.json.tmp left behind
            except OSError:
                pass
            raise self.writes.failed(self.run_json, RUN_JSON, e) from None

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self._meta)


def require_writable(directory: Path, what: str) -> None:
    """RunWriteError, exit 2 (nothing has been changed yet), unless a file can be
    made in `directory`, or, while it does not exist, in its nearest existing
    ancestor (nothing is created: a refused command leaves no trace): a read-only
    mount or a directory without permission is found before any work. (A full
    disk is found only by the writes themselves.)"""
    probe = directory
    try:
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        fd, name = tempfile.mkstemp(prefix=".write-test-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise RunWriteError(directory, what, e, exit_code=2) from None


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """A JSON-lines file written whole (a replica's log), one compact object a line."""
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")


def write_json(path: Path, obj: Any) -> None:
    """A small JSON file (a replica's state.json), indented."""
    path.write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")


# -- finding run directories -------------------------------------------------------


def discover(paths: Iterable[Path]) -> list[Path]:
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


# -- reading ------------------------------------------------------------------------


def _decode(run: Path, rel: str, raw: bytes, first_line: int = 1, offset: int = 0) -> str:
    """raw as UTF-8 (contract.utf8); a RunDirError at the line of its first byte
    that is not. ``first_line``, ``offset``: where raw starts in the file."""
    try:
        return utf8.decode(raw, first_line=first_line, offset=offset)
    except utf8.NotUTF8 as e:
        raise RunDirError(run, rel, str(e), e.line) from None


def read_json(run: Path, rel: str) -> tuple[Any, str]:
    """A small JSON file of the run (run.json, a state.json): (its value, its text,
    for locating a bad value's line). RunDirError if it is missing, not UTF-8 or
    not JSON."""
    path = Path(run) / rel
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RunDirError(run, rel, "missing file") from None
    except OSError as e:
        raise RunDirError(run, rel, f"cannot be read: {e.strerror or e}") from None
    text = _decode(run, rel, raw)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as e:
        raise RunDirError(run, rel, f"not valid JSON: {e.msg}", e.lineno) from None


def read_meta(run: Path) -> dict[str, Any]:
    """run.json of `run` as a dict; RunDirError if there is none or it is not a
    UTF-8 JSON object."""
    # os.path's test: a name too long for a file is no run (pathlib's raises).
    if not os.path.isfile(Path(run) / RUN_JSON):
        raise RunDirError(run, None, f"not a run directory (no {RUN_JSON})")
    meta, _ = read_json(run, RUN_JSON)
    if not isinstance(meta, dict):
        raise RunDirError(run, RUN_JSON, "expected a JSON object", 1)
    return meta


def readable_meta(run: Path) -> dict[str, Any]:
    """run.json as far as it can be read: {} where read_meta raises (for naming a
    run that cannot be checked, or telling whether it is still running)."""
    try:
        return read_meta(run)
    except RunDirError:
        return {}


def run_status(run: Path) -> str | None:
    """run.json's status, or None if there is no readable run.json."""
    status = readable_meta(run).get("status")
    return status if isinstance(status, str) else None


def read_state(run: Path, broker: str) -> dict[str, Any]:
    """replicas/<broker>/state.json as a dict (RunDirError if it cannot be read)."""
    rel = f"{REPLICAS}/{broker}/{STATE}"
    state, _ = read_json(run, rel)
    if not isinstance(state, dict):
        raise RunDirError(run, rel, "expected a JSON object", 1)
    return state


def _is_torn(last: bytes) -> bool:
    """Whether a last line without its newline is cut short: it does not parse, or
    the cut fell inside a multi-byte character. (A byte that is not UTF-8 anywhere
    else in it is no cut: the caller's decoding names it.)"""
    try:
        json.loads(last.decode("utf-8"))
    except UnicodeDecodeError as e:
        return e.reason == "unexpected end of data"
    except json.JSONDecodeError:
        return True
    return False  # a complete record, only the newline is missing


def torn_tail(run: Path, rel: str) -> TornTail | None:
    """The torn last line of an append-only JSON-lines file, if it has one. Looks
    at the file's tail only: the checker's Spark job reads the rest."""
    path = Path(run) / rel
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
    last = tail.rsplit(b"\n", 1)[-1]
    if not _is_torn(last):
        return None
    with path.open("rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return TornTail(rel, lines + 1, last.decode("utf-8", errors="replace"))


def check_utf8(run: Path, rel: str) -> None:
    """RunDirError at the first byte that is not UTF-8 in a JSON-lines file of the
    run, a torn last line aside: for the checker, whose Spark scan would take such
    a byte for U+FFFD where read_jsonl refuses it. Reads the file in blocks of
    whole lines. An ASCII block (nearly every one) is only tested as such, and
    lines are counted only to name a bad one: decoding and counting every block
    took ~4x as long (12 s of Python for a 10M-operation history on a busy
    machine, before Spark starts)."""
    path = Path(run) / rel
    offset = 0
    with path.open("rb") as fh:
        while block := fh.read(1 << 20) + fh.readline():
            if not block.isascii():
                try:
                    block.decode("utf-8")
                except UnicodeDecodeError as e:
                    last = block.rfind(b"\n") + 1  # where the block's last line starts
                    at_end = not block.endswith(b"\n")  # only the file's end has no newline
                    if not (at_end and e.start >= last and _is_torn(block[last:])):
                        # Raises, naming the line.
                        _decode(run, rel, block, _lines_before(path, offset) + 1, offset)
            offset += len(block)


def _lines_before(path: Path, offset: int) -> int:
    """How many lines of the file end before byte ``offset``."""
    lines = 0
    with path.open("rb") as fh:
        while offset > 0 and (block := fh.read(min(1 << 20, offset))):
            lines += block.count(b"\n")
            offset -= len(block)
    return lines


def read_jsonl(run: Path, rel: str) -> list[dict[str, Any]]:
    """Every record of an append-only JSON-lines file of the run, in file order:
    [] if it is missing, its torn last line (torn_tail) left out, blank lines
    skipped. RunDirError at the first other line that is not UTF-8 or not a JSON
    object."""
    return [row for _, row in read_jsonl_numbered(run, rel)]


def read_jsonl_numbered(run: Path, rel: str) -> list[tuple[int, dict[str, Any]]]:
    """read_jsonl's records, each with its 1-based line number."""
    path = Path(run) / rel
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:  # a directory in its place, no permission
        raise RunDirError(run, rel, f"cannot be read: {e.strerror or e}") from None
    lines = raw.split(b"\n")
    if lines[-1] and _is_torn(lines[-1]):
        lines.pop()
    text = _decode(run, rel, b"\n".join(lines))
    out: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        # In the checker's words (checker/load.py _describe_corrupt).
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise RunDirError(run, rel, f"not JSON ({e.msg}): {line[:80]!r}", n) from None
        if not isinstance(row, dict):
            raise RunDirError(run, rel, f"not a JSON object: {line[:80]!r}", n)
        out.append((n, row))
    return out


def read_history(run: Path) -> list[dict[str, Any]]:
    """history.jsonl's ops (read_jsonl's rules)."""
    return read_jsonl(run, HISTORY)


# The history fields that have one JSON type (checker/schemas.py HISTORY, PY_TYPES).
_OP_FIELD_TYPES: dict[str, type] = {"index": int, "time": int, "topic": str, "partition": int,
                                    "offset": int, "records": list, "hw": int, "epoch": int}


def _json_text(v: Any) -> str:
    """A value as the checker quotes it: JSON text, a non-string as its JSON string."""
    return json.dumps(v if isinstance(v, str) else json.dumps(v))


def op_problem(op: dict[str, Any]) -> str | None:
    """What makes a history op bad, in the checker's words -- the checks, in their
    order, of checker/load.py (_history_checks, _describe_corrupt), which set such
    a run aside as `error` --, or None. For readers that act on a history without
    the checker (`isrlab export`): they refuse the line check refuses."""
    for name, want in _OP_FIELD_TYPES.items():
        v = op.get(name)
        if v is not None and (not isinstance(v, want) or isinstance(v, bool)):
            return f"field {name!r} must be {want.__name__}, got {v!r}"
    typ, f, proc = op.get("type"), op.get("f"), op.get("process")
    for name in ("index", "process", "type"):
        if op.get(name) is None:
            return f"missing field {name!r}"
    if typ not in OP_TYPES:
        return f"unknown op type {_json_text(typ)}"
    if f is None:
        return "missing field 'f'"
    if proc == NEMESIS_PROCESS and f not in NEMESIS_FS:
        return f"unknown nemesis op f={_json_text(f)}"
    if proc != NEMESIS_PROCESS and f not in CLIENT_FS:
        return f"unknown op f={_json_text(f)}"
    if f in CLIENT_FS:
        for name in ("topic", "partition"):
            if op.get(name) is None:
                return f"{f} op without {name!r}"
    if f == "send":
        v = op.get("value")
        if isinstance(v, bool) or not isinstance(v, int):
            return f"send value must be an integer, got {_json_text(v)}"
        if typ == "ok" and op.get("offset") is None:
            return "ok send without 'offset'"
    if f == "poll" and typ == "ok":
        records = op.get("records")
        if records is None:
            return "ok poll without 'records'"
        if not all(isinstance(r, list) and len(r) == 2 and None not in r for r in records):
            return "poll record is not [offset, value]"
    return None


def read_checked_history(run: Path) -> list[dict[str, Any]]:
    """history.jsonl's ops (read_jsonl's rules), each also checked as the checker
    checks it (op_problem): RunDirError naming the first bad line, as `check`
    reports the run."""
    ops = []
    for n, op in read_jsonl_numbered(run, HISTORY):
        problem = op_problem(op)
        if problem is not None:
            raise RunDirError(run, HISTORY, problem, n)
        ops.append(op)
    return ops


def read_events(run: Path) -> list[dict[str, Any]]:
    """events.jsonl's protocol events (read_jsonl's rules; [] without the file)."""
    return read_jsonl(run, EVENTS)


def read_log(run: Path, broker: str) -> list[dict[str, Any]]:
    """replicas/<broker>/log.jsonl's records (read_jsonl's rules)."""
    return read_jsonl(run, f"{REPLICAS}/{broker}/{LOG}")


def count_ops(run: Path) -> int:
    """Operations in the run's history: its invocations (each completed, or left
    open by a crash), counted without parsing the lines."""
    with open(Path(run) / HISTORY, "rb") as f:
        return sum(1 for line in f if b'"type":"invoke"' in line)


def find_line(run: Path, rel: str, raw: str) -> int | None:
    """1-based line number of the first line equal to raw (error path only: the
    line Spark found bad, located for the message)."""
    with (Path(run) / rel).open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if line.rstrip("\r\n") == raw:
                return n
    return None
