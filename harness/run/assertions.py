"""Figure assertions of a scenario (`assert:` in docs/scenarios.md), judged after
the check: the checker's figures come from check/summary.json, the harness's own
from the run's history and events. The checker's Spark code is not involved; the
result goes to check/assertions.json next to the checker's summary.

A failed assertion makes the run's verdict `invalid`, as an unexpected anomaly
does; a run that did not finish (or the checker could not read) keeps its verdict
and its assertions are not judged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contract import ASSERTIONS_JSON, CHECK, CONTROLLER, SUMMARY_JSON
from contract.rundir import RunWriteError, read_events, read_history, read_meta

# The checker's verdict names (checker.verdict; the harness does not import the
# checker outside the CLI modules, tests/test_layering.py).
INVALID, INCOMPLETE, ERROR = "invalid", "incomplete", "error"
_OPS = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}
_SYMBOL = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def harness_figures(run_dir: Path) -> dict[str, Any]:
    """hw_stall_ms, unavailable_ms, offline_ms, isr_rejoins of one run."""
    history = read_history(run_dir)
    events = read_events(run_dir)
    return {"hw_stall_ms": _hw_stall_ms(history, events),
            "unavailable_ms": _unavailable_ms(history),
            "offline_ms": _offline_ms(events),
            "isr_rejoins": _isr_rejoins(events)}


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
            invokes[op.get("process")] = op["time"]
        else:
            yield invokes.pop(op.get("process"), None), op


def _hw_stall_ms(history: list[dict[str, Any]], events: list[dict[str, Any]]) -> float:
    """The longest a record acknowledged with an offset waited, from its send, for
    the first HW advance past it on any replica (the leader's comes first): while
    an ISR member does not fetch, the HW stands still and this grows."""
    advances: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for e in events:
        if e.get("type") == "hw-advance":
            advances.setdefault((e.get("topic"), e.get("partition")), []).append(
                (e["time"], e["new"]))
    worst = 0
    for start, op in _send_completions(history):
        if op.get("type") != "ok" or start is None or op.get("offset") is None:
            continue
        for t, new in advances.get((op.get("topic"), op.get("partition")), []):
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
        key = (e.get("topic"), e.get("partition"))
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
        key = (e.get("topic"), e.get("partition"))
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


def judge(run_dir: Path, verdict: str) -> tuple[str, list[str]]:
    """(the verdict with the run's assertions, messages of the failed ones), and
    check/assertions.json written. Reads run.json `assertions` and the checker's
    check/summary.json; a run without assertions keeps its verdict. Every command
    that checks a run judges it before rendering its report, which shows the
    assertions when assertions.json belongs to the same check (`checked_at`)."""
    meta = read_meta(run_dir)
    assertions = meta.get("assertions") or []
    out = run_dir / CHECK / ASSERTIONS_JSON
    if not assertions or verdict in (INCOMPLETE, ERROR):
        out.unlink(missing_ok=True)  # an earlier check's judgement no longer holds
        return verdict, []
    summary_path = run_dir / CHECK / SUMMARY_JSON
    summary: dict[str, Any] = {}
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
    figures: dict[str, Any] = dict(summary.get("figures") or {})
    figures.update(harness_figures(run_dir))
    where = meta.get("scenario_file", "scenario")
    results, failed = [], []
    for a in assertions:
        have = figures.get(a["figure"], 0)
        ok = all(_OPS[op](have, a[op]) for op in _OPS if op in a)
        results.append({**a, "value": have, "ok": ok, "text": describe(a)})
        if not ok:
            failed.append(f"assertion failed ({where}:{a.get('line')}): {describe(a)}, "
                          f"was {have:g}" + (f" -- {a['note']}" if a.get("note") else ""))
    judged = INVALID if failed else verdict
    text = json.dumps({"checked_at": summary.get("checked_at"),
                       "verdict_before": verdict, "verdict": judged,
                       "assertions": results, "failed": failed,
                       "figures": {k: figures.get(k) for k in harness_figures(run_dir)}},
                      indent=1, default=str)
    try:
        out.parent.mkdir(exist_ok=True)
        out.write_text(text)
    except OSError as e:  # a full disk: as the checker's own results (exit 2)
        raise RunWriteError(out, "the check's results", e, exit_code=2) from None
    return judged, failed
