"""The trend page over every night in a nightly results directory (isrlab nightly).

Read from the Parquet results table (DIR/results/runs, one row per checked run,
checker.results) with pandas, joined on run_id with each night's night.json
(its cell: row, version, fault mix, config set, backend; the run's detection
time and throughput; what the row allows), which the table does not hold.
A chart of runs, anomalies per kind and detection time per night
(reports.trendchart, inline SVG), then three tables: the nights; per version
and fault mix and night, runs and anomalies per kind with the median detection
time and throughput; every run, linked to its report. Links are relative to
the page, so DIR can be moved or served as it is.
"""

from __future__ import annotations

import html
import json
import os
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

from contract import ANOMALY_KINDS
from reports import trendchart

TREND = "trend.html"

_CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f3f3f3}.bad{background:#fde2e2}
.ok{background:#e5f5e5}.num{text-align:right}h2{margin-top:1.5em}code{font-size:13px}"""


def load_runs(results_dir: Path) -> pd.DataFrame:
    """Every run of every night: the Parquet table's rows joined with night.json."""
    table = results_dir / "results" / "runs"
    extra = []
    for night in sorted((results_dir / "nights").glob("*/night.json")):
        meta = json.loads(night.read_text(encoding="utf-8"))
        for r in meta.get("runs", []):
            det = r.get("detection_s") or {}
            found = [t for t in det.values() if t is not None]
            extra.append({"run_id": r["run_id"], "night": meta["night"],
                          "night_index": str(night.parent / "index.html"),
                          "row": r.get("row"), "cell": r.get("cell"),
                          "faults": r.get("faults"), "set": r.get("set"),
                          "backend": r.get("backend"), "allow": r.get("allow") or [],
                          "not_allowed": r.get("not_allowed") or [],
                          "detection_s": min(found) if found else None,
                          "throughput": r.get("throughput")})
    nights = pd.DataFrame(extra)
    if not table.exists() or nights.empty:
        return pd.DataFrame()
    runs = pd.read_parquet(table)
    runs["check_date"] = runs["check_date"].astype(str)
    # A run checked twice (isrlab check of a night again) counts once: its latest row.
    runs = runs.sort_values("checked_at").drop_duplicates("run_id", keep="last")
    return runs.merge(nights, on="run_id", how="inner")


def _kinds(row: Any) -> list[str]:
    return [k for k in ANOMALY_KINDS if (row.get(k.replace("-", "_")) or 0) > 0]


def _nights(records: list[dict[str, Any]], nights: list[str]) -> list[trendchart.Night]:
    """Each night's figures for the chart: its runs, those with anomalies and with
    one not allowed, anomalies per kind, and each run's detection time."""
    out = []
    for n in nights:
        rs = [r for r in records if r["night"] == n]
        out.append(trendchart.Night(
            night=n, runs=len(rs), with_anomalies=sum(1 for r in rs if _kinds(r)),
            not_allowed=sum(1 for r in rs if len(r["not_allowed"])),
            kinds={k: int(sum(r.get(k.replace("-", "_")) or 0 for r in rs))
                   for k in ANOMALY_KINDS},
            detection_s=[float(r["detection_s"]) for r in rs
                         if r["detection_s"] is not None and r["detection_s"] == r["detection_s"]]))
    return out


def _median(xs: list[float]) -> str:
    xs = [x for x in xs if x is not None and x == x]
    return f"{statistics.median(xs):.1f}" if xs else "–"


def _link(target: str, out: Path, text: str) -> str:
    p = Path(target)
    if not p.exists():
        return html.escape(text)
    return f'<a href="{html.escape(os.path.relpath(p, out.parent))}">{html.escape(text)}</a>'


def render_trend(results_dir: Path, out: Path | None = None) -> Path:
    """Write DIR/trend.html from the table and the nights; returns its path."""
    results_dir = Path(results_dir).resolve()
    out = (out or results_dir / TREND).resolve()
    df = load_runs(results_dir)
    parts = ["<!doctype html><meta charset=utf-8><title>isrlab nightly trend</title>",
             f"<style>{_CSS}</style><h1>isrlab nightly: trend</h1>"]
    if df.empty:
        parts.append("<p>No checked nights yet.</p>")
        return _write(out, "".join(parts))
    records = df.to_dict("records")
    nights = sorted({r["night"] for r in records})
    parts.append(f"<p>{len(nights)} night(s), {len(records)} run(s), from the results table "
                 f"<code>{html.escape(str(results_dir / 'results'))}</code>.</p>")
    parts.append("<h2>Per night</h2>" + trendchart.night_chart(_nights(records, nights)))
    # 1. The nights.
    parts.append("<h2>Nights</h2><table><tr><th>night</th><th>runs</th>"
                 "<th>runs with anomalies</th><th>not allowed</th><th>kinds</th>"
                 "<th>median detection s</th><th>median acked rec/s</th></tr>")
    for n in nights:
        rs = [r for r in records if r["night"] == n]
        bad = [r for r in rs if len(r["not_allowed"])]
        kinds = sorted({k for r in rs for k in _kinds(r)})
        cls = "bad" if bad else "ok"
        parts.append(
            f"<tr class={cls}><td>{_link(rs[0]['night_index'], out, n)}</td>"
            f"<td class=num>{len(rs)}</td>"
            f"<td class=num>{sum(1 for r in rs if _kinds(r))}</td>"
            f"<td class=num>{len(bad)}</td><td>{html.escape(', '.join(kinds)) or '–'}</td>"
            f"<td class=num>{_median([r['detection_s'] for r in rs])}</td>"
            f"<td class=num>{_median([r['throughput'] for r in rs])}</td></tr>")
    parts.append("</table>")
    # 2. Per version and fault mix, per night.
    kinds = [k for k in ANOMALY_KINDS if any((r.get(k.replace("-", "_")) or 0) > 0
                                              for r in records)]
    head = "".join(f"<th>{html.escape(k)}</th>" for k in kinds)
    parts.append("<h2>Per version and fault mix</h2><p>Runs that showed each kind, "
                 "of the runs of that night.</p><table><tr><th>version</th><th>faults</th>"
                 f"<th>night</th><th>runs</th>{head}<th>median detection s</th>"
                 "<th>median acked rec/s</th></tr>")
    groups = sorted({(r["protocol"], r["faults"], r["night"]) for r in records})
    for ver, faults, n in groups:
        rs = [r for r in records if (r["protocol"], r["faults"], r["night"]) == (ver, faults, n)]
        cells = "".join(
            f"<td class=num>{sum(1 for r in rs if (r.get(k.replace('-', '_')) or 0) > 0)}</td>"
            for k in kinds)
        cls = "bad" if any(len(r["not_allowed"]) for r in rs) else ""
        parts.append(f"<tr class='{cls}'><td>{html.escape(ver)}</td>"
                     f"<td>{html.escape(str(faults))}</td><td>{html.escape(n)}</td>"
                     f"<td class=num>{len(rs)}</td>{cells}"
                     f"<td class=num>{_median([r['detection_s'] for r in rs])}</td>"
                     f"<td class=num>{_median([r['throughput'] for r in rs])}</td></tr>")
    parts.append("</table>")
    # 3. Every run.
    parts.append("<h2>Runs</h2><table><tr><th>night</th><th>cell</th><th>seed</th>"
                 "<th>verdict</th><th>kinds</th><th>not allowed</th><th>detection s</th>"
                 "<th>acked rec/s</th><th>report</th></tr>")
    for r in sorted(records, key=lambda r: (r["night"], str(r["cell"]), str(r["seed"]))):
        report = str(Path(r["run_dir"]) / "check" / "report.html")
        det = r["detection_s"]
        cls = "bad" if len(r["not_allowed"]) else ""
        parts.append(
            f"<tr class='{cls}'><td>{html.escape(r['night'])}</td>"
            f"<td>{html.escape(str(r['cell']))}</td><td>{html.escape(str(r['seed']))}</td>"
            f"<td>{html.escape(str(r['verdict']))}</td>"
            f"<td>{html.escape(', '.join(_kinds(r))) or '–'}</td>"
            f"<td>{html.escape(', '.join(r['not_allowed'])) or '–'}</td>"
            f"<td class=num>{'–' if det is None or det != det else f'{det:.1f}'}</td>"
            f"<td class=num>{_median([r['throughput']])}</td>"
            f"<td>{_link(report, out, 'report')}</td></tr>")
    parts.append("</table>")
    return _write(out, "".join(parts))


def _write(out: Path, text: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return out
