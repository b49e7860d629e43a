"""Figure assertions of a scenario (`assert:` in docs/scenarios.md), judged after
the check: the checker's figures come from check/summary.json, the harness's own
from the run's history and events. The checker's Spark code is not involved; the
result goes to check/assertions.json next to the checker's summary.

A failed assertion makes the run's verdict `invalid`, as an unexpected anomaly
does; a run that did not finish (or the checker could not read) keeps its verdict
and its assertions are not judged. What judge reads is read by contract.rundir:
a run.json `assertions` that is not as the harness writes it, or a summary.json
that is not UTF-8 JSON, is a RunDirError naming the file and line (the CLI sets
that one run aside as `error`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contract import ASSERTIONS_JSON, CHECK, CONTROLLER, EVENTS, HISTORY, RUN_JSON, SUMMARY_JSON
from contract.rundir import RunDirError, RunWriteError, read_events, read_history, read_json

# The checker's verdict names (checker.verdict; the harness does not import the
# checker outside the CLI modules, tests/test_layering.py).
INVALID, INCOMPLETE, ERROR = "invalid", "incomplete", "error"
_OPS = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}
_SYMBOL = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def harness_figures(run_dir: Path) -> dict[str, Any]:
    """hw_stall_ms, unavailable_ms, offline_ms, isr_rejoins of one run
    (RunDirError for a record without the fields they are computed from)."""
    history = read_history(run_dir)
    events = read_events(run_dir)
    _check_fields(run_dir, history, events)
    return {"hw_stall_ms": _hw_stall_ms(history, events),
            "unavailable_ms": _unavailable_ms(history),
            "offline_ms": _offline_ms(events),
            "isr_rejoins": _isr_rejoins(events)}


def _check_fields(run_dir: Path, history: list[dict[str, Any]],
                  events: list[dict[str, Any]]) -> None:
    """The fields the figures read, where the checker does not require them: a
    send's `time`; an event's `time`, a hw-advance's `new`, an ISR change's
    `old`/`new` broker lists. RunDirError at the first record without them."""
    def names(v: Any) -> bool:
        return v is None or isinstance(v, list) and all(isinstance(b, str) for b in v)

    for n, op in enumerate(history):
        if op.get("f") == "send" and not _number(op.get("time")):
            raise _bad_record(run_dir, HISTORY, n, "a send op without a numeric 'time'")
        if op.get("f") == "send" and op.get("offset") is not None and not _number(op["offset"]):
            raise _bad_record(run_dir, HISTORY, n, "a send op whose 'offset' is not a number")
    for n, e in enumerate(events):
        t = e.get("type")
        if t in _FIGURE_EVENTS and not _number(e.get("time")):
            raise _bad_record(run_dir, EVENTS, n, f"a {t} event without a numeric 'time'")
        if t == "hw-advance" and not _number(e.get("new")):
            raise _bad_record(run_dir, EVENTS, n, "a hw-advance event without a numeric 'new'")
        if t in ("isr-shrink", "isr-expand") and not (names(e.get("old")) and names(e.get("new"))):
            raise _bad_record(run_dir, EVENTS, n, f"an {t} event whose 'old' or 'new' is not a "
                                                  "list of brokers")


_FIGURE_EVENTS = ("hw-advance", "leader-offline", "leader-elected")


def _bad_record(run_dir: Path, rel: str, n: int, message: str) -> RunDirError:
    """RunDirError at the line of read_jsonl's n-th (0-based) record, blank lines
    skipped (error path only: the file is read again to count them)."""
    with (run_dir / rel).open("rb") as fh:
        lines = (i for i, raw in enumerate(fh, 1) if raw.strip())
        line = next(itertools.islice(lines, n, None), None)
    return RunDirError(run_dir, rel, message, line)


def _key(record: dict[str, Any], *fields: str) -> Any:
    """The record's fields as a dict key: a value the checker reads as text but
    JSON may hold as a list or object (a process, a topic) by its JSON text."""
    values = tuple(v if v is None or isinstance(v, str | int | float) else
                   json.dumps(v, sort_keys=True) for v in map(record.get, fields))
    return values[0] if len(values) == 1 else values


def _ms(ns: float) -> float:
    return round(ns / 1e6, 1)


def _send_completions(history: list[dict[str, Any]]
                      ) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """Each send's completion with the time of its invoke (None if not recorded)."""
    invokes: dict[Any, int] = {}
    for op in history:
        if op.get("f") != "send":
            continue
        if op.get("type") == "invoke":
            invokes[_key(op, "process")] = op["time"]
        else:
            yield invokes.pop(_key(op, "process"), None), op


def _hw_stall_ms(history: list[dict[str, Any]], events: list[dict[str, Any]]) -> float:
    """The longest a record acknowledged with an offset waited, from its send, for
    the first HW advance past it on any replica (the leader's comes first): while
    an ISR member does not fetch, the HW stands still and this grows."""
    advances: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for e in events:
        if e.get("type") == "hw-advance":
            advances.setdefault(_key(e, "topic", "partition"), []).append(
                (e["time"], e["new"]))
    worst = 0
    for start, op in _send_completions(history):
        if op.get("type") != "ok" or start is None or op.get("offset") is None:
            continue
        for t, new in advances.get(_key(op, "topic", "partition"), []):
            if t >= start and new > op["offset"]:
                worst = max(worst, t - start)
                break
    return _ms(worst)


def _unavailable_ms(history: list[dict[str, Any]]) -> float:
    """The longest span in which sends were tried and none succeeded: from the
    first failed or indefinite send after an ok one (its invoke) to the next ok
    completion (or the last send's completion)."""
    since: int | None = None
    last = 0
    worst = 0
    for start, op in _send_completions(history):
        start = op["time"] if start is None else start
        last = op["time"]
        if op.get("type") == "ok":
            if since is not None:
                worst = max(worst, op["time"] - since)
                since = None
        elif since is None:
            since = start
    if since is not None:
        worst = max(worst, last - since)
    return _ms(worst)


def _offline_ms(events: list[dict[str, Any]]) -> float:
    """The longest a partition had no leader: the controller's leader-offline to
    its next leader-elected."""
    down: dict[tuple[Any, Any], int] = {}
    worst = 0
    for e in events:
        if e.get("node") != CONTROLLER:
            continue
        key = _key(e, "topic", "partition")
        if e.get("type") == "leader-offline":
            down.setdefault(key, e["time"])
        elif e.get("type") == "leader-elected" and key in down:
            worst = max(worst, e["time"] - down.pop(key))
    return _ms(worst)


def _isr_rejoins(events: list[dict[str, Any]]) -> int:
    """Replicas that left the ISR and came back (leader isr-shrink, then isr-expand
    naming them), counted once per return."""
    out: set[tuple[Any, Any, str]] = set()
    n = 0
    for e in events:
        # The leader's events (old/new); the controller's name the new ISR `isr`.
        if e.get("type") not in ("isr-shrink", "isr-expand") or e.get("node") == CONTROLLER:
            continue
        key = _key(e, "topic", "partition")
        old, new = set(e.get("old") or []), set(e.get("new") or [])
        if e.get("type") == "isr-shrink":
            out |= {(*key, r) for r in old - new}
        elif e.get("type") == "isr-expand":
            for r in new - old:
                if (*key, r) in out:
                    out.discard((*key, r))
                    n += 1
    return n


def describe(a: dict[str, Any]) -> str:
    ops = " and ".join(f"{_SYMBOL[op]} {a[op]:g}" for op in _OPS if op in a)
    return f"{a['figure']} {ops}"


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _assertions(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """run.json and its `assertions`, each checked for the shape the harness writes
    ({figure, one or more of eq..ge with a number}): RunDirError otherwise."""
    meta, text = read_json(run_dir, RUN_JSON)
    if not isinstance(meta, dict):
        raise RunDirError(run_dir, RUN_JSON, "expected a JSON object", 1)
    raw = meta.get("assertions") or []
    at = text.find('"assertions"')
    line = text.count("\n", 0, at) + 1 if at >= 0 else None
    if not isinstance(raw, list):
        raise RunDirError(run_dir, RUN_JSON, "assertions: expected a list", line)
    for i, a in enumerate(raw):
        if not (isinstance(a, dict) and isinstance(a.get("figure"), str)
                and any(op in a for op in _OPS) and all(_number(a[op]) for op in _OPS if op in a)):
            raise RunDirError(run_dir, RUN_JSON, f"assertions[{i}]: expected a figure's name and "
                              f"a number for one or more of {', '.join(_OPS)}", line)
    return meta, raw


def _summary(run_dir: Path) -> dict[str, Any]:
    """The checker's check/summary.json ({} if there is none)."""
    rel = f"{CHECK}/{SUMMARY_JSON}"
    if not (run_dir / rel).exists():
        return {}
    summary, _ = read_json(run_dir, rel)
    if not isinstance(summary, dict) or not isinstance(summary.get("figures") or {}, dict):
        raise RunDirError(run_dir, rel, "expected a JSON object with an object 'figures'", 1)
    return summary


def judge(run_dir: Path, verdict: str) -> tuple[str, list[str]]:
    """(the verdict with the run's assertions, messages of the failed ones), and
    check/assertions.json written. Reads run.json `assertions` and the checker's
    check/summary.json; a run without assertions keeps its verdict. Every command
    that checks a run judges it before rendering its report, which shows the
    assertions when assertions.json belongs to the same check (`checked_at`).
    RunDirError: run.json or summary.json cannot be read or is not as written."""
    out = run_dir / CHECK / ASSERTIONS_JSON
    out.unlink(missing_ok=True)  # an earlier check's judgement no longer holds
    meta, assertions = _assertions(run_dir)
    if not assertions or verdict in (INCOMPLETE, ERROR):
        return verdict, []
    summary = _summary(run_dir)
    figures: dict[str, Any] = dict(summary.get("figures") or {})
    own = harness_figures(run_dir)
    figures.update(own)
    where = meta.get("scenario_file", "scenario")
    results, failed = [], []
    for a in assertions:
        have = figures.get(a["figure"], 0)
        if not _number(have):
            raise RunDirError(run_dir, f"{CHECK}/{SUMMARY_JSON}",
                              f"figures.{a['figure']}: expected a number, got {have!r}")
        ok = all(_OPS[op](have, a[op]) for op in _OPS if op in a)
        results.append({**a, "value": have, "ok": ok, "text": describe(a)})
        if not ok:
            failed.append(f"assertion failed ({where}:{a.get('line')}): {describe(a)}, "
                          f"was {have:g}" + (f" -- {a['note']}" if a.get("note") else ""))
    judged = INVALID if failed else verdict
    text = json.dumps({"checked_at": summary.get("checked_at"),
                       "verdict_before": verdict, "verdict": judged,
                       "assertions": results, "failed": failed,
                       "figures": own},
                      indent=1, default=str)
    try:
        out.parent.mkdir(exist_ok=True)
        out.write_text(text)
    except OSError as e:  # a full disk: as the checker's own results (exit 2)
        raise RunWriteError(out, "the check's results", e, exit_code=2) from None
    return judged, failed
