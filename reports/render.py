"""Render check/report.html for one run: a single self-contained file.

Everything is inline (CSS, and the charts as SVG) so the file opens offline and
makes no request to any other host; it needs no script. The first screen says
what happened to the data (reports.story: the headline and the causal story),
then the replica logs (reports.grid), then the anomalies, the charts
(reports.charts), the timeline of protocol events, the figures and the
configuration.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jinja2

from checker.verdict import outcome_of
from contract import CHECK, FINAL_PROCESS, REPORT_HTML, TRACE
from contract.rundir import read_jsonl
from reports import batch, charts, grid, story, trace
from reports.rundata import RunData, load
from reports.units import figure_row, fmt_time, offset_runs, runs_text

MAX_EVENTS = 2000
# A story line's kind, as its tag in the report.
KIND_WORDS = {"ack": "acked", "fault": "fault", "power-cycle": "power cycle", "halt": "halt",
              "truncate": "truncation", "election": "election", "final": "final read",
              "resend": "resent", "kept": "kept", "epoch": "epoch answer",
              "recognised": "resend recognised"}

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


@functools.cache
def _env() -> jinja2.Environment:
    # One per process: compiling the templates costs more than rendering a
    # scenario's report (a swarm or a matrix renders hundreds).
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
    )
    env.globals["epoch_colour"] = grid.epoch_colour
    env.globals["fmt_time"] = fmt_time
    env.globals["fmt_seconds_value"] = lambda s: fmt_time(s * 1e9) if isinstance(
        s, int | float) else s
    env.globals["kind_words"] = KIND_WORDS
    env.filters["pretty"] = _pretty
    # a cause's offsets as runs, "2-4,7": a long valid run's kept cause holds
    # tens of thousands
    env.filters["offset_runs"] = lambda offs: runs_text(offset_runs(offs), ",", "-")
    return env


def _pretty(v: Any) -> str:
    """Compact JSON when it fits on a line, indented otherwise."""
    text = json.dumps(v, default=str)
    return text if len(text) <= 90 else json.dumps(v, indent=2, default=str)


def _badge(s: dict[str, Any]) -> str:
    """The banner's badge: whether the run matches its documentation (docs/verdicts.md),
    else what happened to the data -- never the bare verdict value, which reads
    "valid" on a run that lost data as its scenario documents."""
    o = outcome_of(s)
    return o.documentation or o.data


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
    if status == "crashed":
        return "crashed" + (f": {meta['error']}" if meta.get("error") else "") + \
            " (collected afterwards from the data it left)"
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
    with_logs = grid.log_brokers(data)
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
        if r.has_state and r.partitions == 0 and b not in with_logs:
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


def _details(it: story.Item) -> str:
    """A timeline row's fields in one compact line."""
    f = dict(it.fields)
    out = []
    part = story.part_of(f)
    if part is not None:
        out.append(part)
        f.pop("topic", None)
        f.pop("partition", None)
    if it.type == "truncate":
        out.append(f"LEO {f.pop('from', '?')} → {f.pop('to', '?')}")
        removed = f.pop("removed", None)
        count = f.pop("removed_count", None)
        if isinstance(removed, list) and removed:
            shown = ", ".join(f"{r[0]}: e{r[1]}·{r[2]}" for r in removed[:8]
                              if isinstance(r, list) and len(r) == 3)
            more = (count or len(removed)) - min(len(removed), 8)
            out.append(f"removed {shown}" + (f" … +{more}" if more > 0 else ""))
    if it.type == "started":
        parts = f.pop("partitions", None) or []
        out += [f"{story.part_of(p)} LEO {p.get('leo')} HW {p.get('hw')}"
                for p in parts[:4] if isinstance(p, dict)]
    if it.source in ("client", "final", "nemesis"):
        f.pop("type", None)
    if it.source == "nemesis" and isinstance(f.get("value"), list):
        out.append(", ".join(map(str, f.pop("value"))))
    if it.source in ("client", "final"):
        recs = f.pop("records", None)
        if isinstance(recs, list):
            n = it.records_seen[0] if it.records_seen else len(recs)  # the whole read's
            out.append(f"{n} records: " + ", ".join(
                f"{r[0]}:{r[1]}" for r in recs[:12] if isinstance(r, list) and len(r) == 2)
                + (" …" if n > 12 else ""))
    out += [f"{k} {_short(v)}" for k, v in f.items() if v not in (None, [], {})]
    return " · ".join(out)


def _short(v: Any) -> str:
    if isinstance(v, list) and not any(isinstance(x, list | dict) for x in v):
        return ",".join(map(str, v))
    if isinstance(v, list | dict):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


# Events a long run has one of per replica per fetch round: left out of a table
# that would go over MAX_EVENTS (the replica progress charts draw them).
ROUTINE = ("hw-advance", "hw-checkpoint")


def _timeline(facts: story.RunFacts, st: story.Story
              ) -> tuple[list[dict[str, Any]], int, int]:
    """Protocol events, nemesis ops, the final reads and the client ops the story
    names, in time order; at most MAX_EVENTS rows besides those the story links,
    without the ROUTINE events the story does not link when all would be more.
    Returns the rows, how many there are in all and how many ROUTINE left out."""
    refs: dict[str, list[int]] = {}
    for ln in st.lines:
        if ln.ref:
            refs.setdefault(ln.ref, []).append(ln.n)
    items = sorted(facts.items.values(), key=lambda it: (it.time is None, it.time or 0))
    # The ROUTINE events the check left out (checker.reportevents: only when there
    # are more than MAX_EVENTS events, none the story can link) count as here.
    left_out = facts.events_left_out
    total = sum(1 for it in items if it.source != "client" or it.in_story) + left_out
    routine = sum(1 for it in items if it.source == "event" and it.type in ROUTINE
                  and it.id not in refs) + left_out if total > MAX_EVENTS else 0
    rows, shown = [], 0
    for it in items:
        if it.source == "client" and not it.in_story:
            continue
        if routine and it.source == "event" and it.type in ROUTINE and it.id not in refs:
            continue
        if shown >= MAX_EVENTS and it.id not in refs:
            continue
        shown += 1
        rows.append({"id": it.id, "time": fmt_time(it.time), "node": it.node,
                     "type": it.type, "details": _details(it), "story": refs.get(it.id, []),
                     "source": it.source})
    return rows, total, routine


MAX_TRACE_ROWS = 300


def _trace(data: RunData) -> dict[str, Any] | None:
    """A sim run's trace table (reports.trace, as `isrlab trace` prints it) for the
    workload's partition: its first MAX_TRACE_ROWS rows."""
    if data.trace_table is not None:  # computed by the check (checker.reportevents)
        table = data.trace_table
        return {"rows": [{**r, "t": fmt_time(r["time"])} for r in table["rows"]],
                "total": table["total"], "part": table["part"], "legend": trace.LEGEND}
    path = data.path / TRACE
    if not path.is_file():
        return None
    rounds = read_jsonl(data.path, TRACE)
    wl = data.meta.get("workload") or {}
    topic, part = wl.get("topic"), wl.get("partition")
    if not any(r.get("topic") == topic and r.get("partition") == part for r in rounds):
        topic, part = (rounds[0].get("topic"), rounds[0].get("partition")) if rounds \
            else (topic, part)
    brokers = (data.meta.get("cluster") or {}).get("brokers") or []
    labels = {v: lab for lab, vs in (data.meta.get("labels") or {}).items()
              if isinstance(vs, list) for v in vs}
    rows = trace.rows(rounds, data.events, data.history, topic, part, brokers, labels)
    for r in rows:
        r["t"] = fmt_time(r["time"])
    return {"rows": rows[:MAX_TRACE_ROWS], "total": len(rows), "part": f"{topic}/{part}",
            "legend": trace.LEGEND}


# Figures only a consumer makes: a run without one shows none of them (its "polls
# ok 0" and "acknowledged writes no consumer saw: all" say nothing).
_CONSUMER_FIGURES = ("polls_ok", "poll_latency_ms_p50_p95_p99", "poll_latency_ms_max",
                     "unseen_acked")


def _figures(s: dict[str, Any], history: list[dict[str, Any]],
             consumers: bool | None = None) -> list[tuple[str, str]]:
    """The summary's figures; those only a consumer makes when ``consumers`` (the
    check's report-inputs.json "consumers"; None: whether ``history`` has a poll
    outside the final read)."""
    if consumers is None:
        consumers = any(op.get("f") == "poll" and op.get("process") != FINAL_PROCESS
                        for op in history)
    return [figure_row(k, v) for k, v in (s.get("figures") or {}).items()
            if k != "availability" and (consumers or k not in _CONSUMER_FIGURES)]


def render_run(run_dir: Path) -> Path:
    """Write ``<run_dir>/check/report.html`` from the run and its check results."""
    data = load(Path(run_dir))
    s = data.summary
    facts = story.RunFacts(data)
    st, _ = story.build(data, facts)
    timeline, timeline_total, timeline_routine = _timeline(facts, st)
    consumers = data.inputs.get("consumers")  # None: a run checked before the check said
    html = (
        _env()
        .get_template("run.html")
        .render(
            run_id=s.get("run_id") or data.meta.get("run_id"),
            run_dir=str(data.path),
            verdict=s["verdict"],
            verdict_words=_badge(s),
            verdict_text=_verdict_text(s),
            headline=story.headline(data),
            story=st,
            scenario=data.meta.get("scenario"),
            description=data.meta.get("description"),
            source=data.meta.get("source"),
            protocol=data.meta.get("protocol"),
            seed=data.meta.get("seed"),
            truncated=_truncated(data),
            ended=_ended(data.meta),
            notes=_other_notes(data),
            replica_notes=_replica_notes(data),
            anomalies=data.anomalies,
            assertions=data.assertions,
            listed=len(data.anomalies),
            total=s.get("anomaly_count", len(data.anomalies)),
            kinds_checked=s.get("kinds_checked") or [],
            kinds_not_checked=s.get("kinds_not_checked") or {},
            missing=s.get("missing") or [],
            config=_config(data.meta),
            figures=_figures(s, data.history if consumers is None else [], consumers),
            availability=(s.get("figures") or {}).get("availability") or [],
            final_log=s.get("final_log") or [],
            charts=charts.build(data, facts),
            grids=grid.build(data, facts),
            timeline=timeline,
            timeline_total=timeline_total,
            timeline_routine=timeline_routine,
            trace=_trace(data),
            brokers=(data.meta.get("cluster") or {}).get("brokers") or [],
            max_lines=story.MAX_LINES,
            checked_at=s.get("checked_at"),
            spark_version=(s.get("checker") or {}).get("spark"),
        )
    )
    out = data.path / CHECK / REPORT_HTML
    _write_atomic(out, html)
    return out


INDEX = "index.html"


def render_index(summaries: list[dict[str, Any]], out: Path) -> Path:
    """Write a batch's index page: a headline about the data, one row per run
    (scenario or chaos configuration, anomaly kinds with counts) linking each
    run's report, and for chaos runs their kinds grouped by seed and by whether
    the configuration allows them (reports.batch).

    ``summaries`` are the runs' check/summary.json contents (RunResult.summary).
    Links are relative to ``out`` so the tree can be moved or served as is.
    """
    out = Path(out).resolve()
    rows = sorted((batch.row(s, out) for s in summaries), key=batch.sort_key)
    words, css = batch.headline(rows)
    html = _env().get_template("index.html").render(
        runs=rows, headline=words, banner=css, docs=batch.doc_tally(rows),
        groups=batch.groups(rows), swarm=any("swarm" in r["meta"] for r in rows),
        checked_at=max((str(s.get("checked_at", "")) for s in summaries), default=None),
    )
    _write_atomic(out, html)
    return out


def _write_atomic(out: Path, text: str) -> None:
    # A reader (a CI artifact upload, a browser) never sees half a page.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk: no half page left behind
        raise
