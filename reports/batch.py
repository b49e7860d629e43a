"""The rows, headline and groups of a batch's index page (render.render_index).

One row per run: what happened to the data (checker.outcome), its scenario or,
for a chaos, swarm or nightly run, its configuration (checker.runconfig), the
anomaly kinds with counts. Chaos runs' kinds are grouped by seed and by
whether their configuration allows them or they are protocol findings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from checker import outcome, runconfig
from checker.verdict import ERROR, INCOMPLETE, NOT_CHECKED
from contract import ANOMALY_KINDS, CHECK, REPORT_HTML
from contract.rundir import readable_meta

# Most alarming first: the headline names these, the rows sort by them.
_ORDER = (outcome.LOST, outcome.DIVERGED, outcome.OTHER, outcome.CLEAN)
_PHRASE = {outcome.LOST: "lost data", outcome.DIVERGED: "ended with diverged replicas",
           outcome.OTHER: "showed another anomaly"}


def row(s: dict[str, Any], out: Path) -> dict[str, Any]:
    """One run's row from its summary.json (and run.json), links relative to `out`."""
    run_dir = Path(s["run_dir"])
    meta = readable_meta(run_dir)
    found = s.get("found") or {}
    report = run_dir / CHECK / REPORT_HTML
    chaos = runconfig.is_chaos(meta)
    swarm = meta.get("swarm") if isinstance(meta.get("swarm"), dict) else None
    kinds = [{"kind": k, "n": n,
              "by": runconfig.attribution(k, meta) if chaos else None}
             for k, n in sorted(found.items(), key=lambda kn: _kind_order(kn[0]))]
    data = outcome.data_words(found) if s["verdict"] != ERROR else NOT_CHECKED
    return {**s, "meta": meta, "data": data,
            "css": outcome.CSS.get(data, "error"),
            "doc": outcome.doc_words(s["verdict"], s.get("scenario"), found),
            "chaos": chaos,
            "config": runconfig.summary(meta) if chaos else None,
            "shape": (f"{swarm['config'].get('brokers')} brokers, "
                      f"{swarm['config'].get('partitions')} partitions")
            if swarm and isinstance(swarm.get("config"), dict) else None,
            "cell": runconfig.settings(meta)["cell"] if chaos else None,
            "permits": runconfig.permits(meta) if chaos else [],
            "kinds": kinds,
            "report": os.path.relpath(report, out.parent) if report.is_file() else None}


def _kind_order(kind: str) -> int:
    return ANOMALY_KINDS.index(kind) if kind in ANOMALY_KINDS else len(ANOMALY_KINDS)


def sort_key(r: dict[str, Any]) -> tuple:
    rank = _ORDER.index(r["data"]) if r["data"] in _ORDER else -1  # not checked: first
    return (rank, str(r.get("seed")) if r["chaos"] else "", str(r.get("run_dir")))


def headline(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """The banner's words and class: what happened to the data, over the batch."""
    n = len(rows)
    counts = {d: sum(r["data"] == d for r in rows) for d in _ORDER}
    bad = [f"{counts[d]} of {n} run{'s' if n != 1 else ''} {_PHRASE[d]}"
           for d in _ORDER[:3] if counts[d]]
    if bad:
        worst = next(d for d in _ORDER if counts[d])
        return "; ".join(bad), outcome.CSS[worst]
    unjudged = sum(r["verdict"] in (INCOMPLETE, ERROR) for r in rows)
    if unjudged:
        return (f"no anomaly in {n - unjudged} of {n} runs; {unjudged} not checked in full",
                "not-reproduced")
    return f"no anomaly in {n} run{'s' if n != 1 else ''}", outcome.CSS[outcome.CLEAN]


def doc_tally(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many runs match their scenario's documentation, and how; a chaos run
    with anomalies counts as a protocol finding if any of its kinds is one, else
    as allowed by the configuration."""
    out: dict[str, int] = {}
    for r in rows:
        word = r["doc"]
        if r["chaos"] and r["kinds"] and not word:
            word = ("protocol finding" if any(k["by"] == runconfig.PROTOCOL for k in r["kinds"])
                    else runconfig.ALLOWED)
        if word:
            out[word] = out.get(word, 0) + 1
    return out


def groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per anomaly kind of the chaos runs: the seeds whose configuration allows it
    (each with why) and the seeds where it is a protocol finding."""
    by: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        for k in r["kinds"]:
            if k["by"] is None:
                continue
            slot = "allowed" if k["by"] == runconfig.ALLOWED else "protocol"
            by.setdefault(k["kind"], {"allowed": [], "protocol": []})[slot].append(
                {"seed": r.get("seed"), "n": k["n"], "why": ", ".join(r["permits"]),
                 "report": r["report"], "run_id": r.get("run_id")})
    return [{"kind": k, **by[k]} for k in sorted(by, key=_kind_order)]
