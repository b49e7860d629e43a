"""Render check/report.html for one run: a single self-contained file.

Everything is inline (CSS, and plotly.js when charts are included) so the file
opens offline and makes no request to any other host.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jinja2

from contract import CHECK, REPORT_HTML
from reports import grid
from reports.rundata import RunData, load

MAX_EVENTS = 2000

_CONFIG_KEYS = (
    "run_id",
    "scenario",
    "protocol",
    "seed",
    "backend",
    "expect",
    "cluster",
    "broker_config",
    "workload",
    "nemesis",
    "started_at",
    "ended_at",
)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
    )
    env.globals["epoch_colour"] = grid.epoch_colour
    env.filters["pretty"] = _pretty
    return env


def _pretty(v: Any) -> str:
    """Compact JSON when it fits on a line, indented otherwise."""
    text = json.dumps(v, default=str)
    return text if len(text) <= 90 else json.dumps(v, indent=2, default=str)


def _verdict_text(s: dict[str, Any]) -> str:
    found = s.get("found") or {}
    parts = [f"{k} ×{n}" for k, n in found.items()]
    text = ("found " + ", ".join(parts)) if parts else "no anomalies found"
    if s.get("unexpected"):
        text += f"; unexpected: {', '.join(s['unexpected'])}"
    if s.get("missing"):
        text += f"; expected but missing: {', '.join(s['missing'])}"
    if s.get("expected"):
        text += f"; this run allows: {', '.join(s['expected'])}"
    return text


def _lost_values(data: RunData) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for a in data.anomalies:
        if a["kind"] == "lost-write":
            out.setdefault(f"{a['topic']}/{a['partition']}", []).append(a["witness"]["value"])
    return out


def _truncated(data: RunData) -> list[dict[str, Any]]:
    """Each file whose last line is a cut-off write (the checker skipped it)."""
    out = []
    for t in data.summary.get("truncated") or []:
        partial = str(t.get("partial_text") or "")
        out.append({
            "file": t.get("file"),
            "line": t.get("line"),
            "partial": partial if len(partial) <= 60 else partial[:60] + "…",
        })
    return out


def _ended(meta: dict[str, Any]) -> str | None:
    """How a run that did not end cleanly ended, from run.json (None if it did)."""
    status = meta.get("status")
    if status == "incomplete":
        return "incomplete" + (f": {meta['error']}" if meta.get("error") else "")
    if status == "running":
        return "still marked running: the harness stopped before recording how it ended"
    return None


def _other_notes(data: RunData) -> list[str]:
    """The checker's notes, less the truncation ones the report states above them (_truncated)."""
    said = [f"{t.get('file')}: last line {t.get('line')} " for t in
            data.summary.get("truncated") or []]
    return [n for n in data.summary.get("notes") or []
            if not any(str(n).startswith(p) for p in said)]


def _replica_notes(data: RunData) -> list[str]:
    """Brokers whose final state is not what a running broker reported."""
    out = []
    for b, r in sorted(data.replicas.items()):
        if not r.has_state:
            out.append(f"{b} has no readable state.json: its log is shown without its "
                       "role, LEO or HW.")
        elif r.down:
            out.append(
                f"{b} was down at the end of the run: its log and HW checkpoint were read "
                "from its data directory, as its next start would find them. It has no "
                "role, leader epoch or ISR to report."
            )
        if r.has_state and r.partitions == 0 and not data.logs.get(b):
            out.append(f"{b} hosts no partition: its state.json lists none.")
    return out


def _config(meta: dict[str, Any]) -> list[tuple[str, Any]]:
    keys = [k for k in _CONFIG_KEYS if k in meta] + sorted(k for k in meta if k not in _CONFIG_KEYS)
    return [(k, _steps(meta[k]) if k == "nemesis" else meta[k]) for k in keys]


def _steps(schedule: Any) -> Any:
    """A scenario's step list as one line per step ("3 (line 33) admin flush ...")."""
    if not (isinstance(schedule, list) and all(isinstance(s, dict) for s in schedule)):
        return schedule
    return "\n".join(
        f"{s.get('step', '?')} (line {s.get('line', '?')}) {s.get('kind', '?')} "
        + json.dumps(s.get("args", {}), separators=(",", ":"))
        for s in schedule)


def _events(data: RunData) -> list[dict[str, Any]]:
    rows = []
    for e in data.events[:MAX_EVENTS]:
        details = {k: v for k, v in e.items() if k not in ("time", "node", "type")}
        t = e.get("time")
        rows.append(
            {
                "time_ms": round(t / 1e6, 3) if isinstance(t, int | float) else t,
                "node": e.get("node"),
                "type": e.get("type"),
                "details": json.dumps(details, separators=(", ", ": ")) if details else "",
            }
        )
    return rows


def _charts(data: RunData) -> tuple[list[dict[str, str]], str | None]:
    """Plotly charts, if the charts module can build any (plotly is optional here)."""
    try:
        from reports import charts
    except ImportError:
        return [], None
    built = charts.build(data)
    return built, (charts.plotly_js() if built else None)


def render_run(run_dir: Path) -> Path:
    """Write ``<run_dir>/check/report.html`` from the run and its check results."""
    data = load(Path(run_dir))
    s = data.summary
    chart_list, plotly_js = _charts(data)
    html = (
        _env()
        .get_template("run.html")
        .render(
            run_id=s.get("run_id") or data.meta.get("run_id"),
            run_dir=str(data.path),
            verdict=s["verdict"],
            verdict_text=_verdict_text(s),
            scenario=data.meta.get("scenario"),
            protocol=data.meta.get("protocol"),
            seed=data.meta.get("seed"),
            lost_values=_lost_values(data),
            truncated=_truncated(data),
            ended=_ended(data.meta),
            notes=_other_notes(data),
            replica_notes=_replica_notes(data),
            anomalies=data.anomalies,
            listed=len(data.anomalies),
            total=s.get("anomaly_count", len(data.anomalies)),
            kinds_checked=s.get("kinds_checked") or [],
            missing=s.get("missing") or [],
            config=_config(data.meta),
            figures=sorted((k, v) for k, v in (s.get("figures") or {}).items()
                           if k != "availability"),
            availability=(s.get("figures") or {}).get("availability") or [],
            final_log=s.get("final_log") or [],
            charts=chart_list,
            plotly_js=plotly_js,
            grids=grid.build(data),
            events=_events(data),
            events_total=len(data.events),
            checked_at=s.get("checked_at"),
            spark_version=(s.get("checker") or {}).get("spark"),
        )
    )
    out = data.path / CHECK / REPORT_HTML
    _write_atomic(out, html)
    return out


INDEX = "index.html"


def render_index(summaries: list[dict[str, Any]], out: Path) -> Path:
    """Write a batch's index page: one row per run, linking each run's report.

    ``summaries`` are the runs' check/summary.json contents (RunResult.summary).
    Links are relative to ``out`` so the tree can be moved or served as is.
    """
    out = Path(out).resolve()
    rows, counts = [], {}
    for s in sorted(summaries, key=lambda s: (s["verdict"] == "valid", str(s.get("run_dir")))):
        report = Path(s["run_dir"]) / CHECK / REPORT_HTML
        rows.append({**s, "report": os.path.relpath(report, out.parent) if report.is_file()
                     else None})
        counts[s["verdict"]] = counts.get(s["verdict"], 0) + 1
    html = _env().get_template("index.html").render(
        runs=rows, counts=counts, bad=sum(n for v, n in counts.items() if v != "valid"),
        checked_at=max((str(s.get("checked_at", "")) for s in summaries), default=None),
    )
    _write_atomic(out, html)
    return out


def _write_atomic(out: Path, text: str) -> None:
    # A reader (a CI artifact upload, a browser) never sees half a page.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
