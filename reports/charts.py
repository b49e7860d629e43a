"""Plotly charts for the run report: client-op timeline and latency with fault
windows shaded, and HW/LEO per replica over time with leader changes marked.

The figures are embedded as HTML fragments; plotly.js itself is inlined once per
report from the installed plotly package, so the report opens offline.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import plotly.graph_objects as go
import plotly.offline

from reports.rundata import RunData

MAX_TIMELINE_OPS = 4000  # bars beyond this make the page sluggish; latency plot covers all
MAX_POINTS = 50_000
COLOURS = {"ok": "#1f7a3d", "fail": "#b3261e", "info": "#b26a00"}
# Which nemesis op opens a fault window and which closes it.
WINDOWS = {"kill": "start", "stop": "start", "power-cycle": "start", "pause": "resume",
           "partition": "heal"}


@cache
def plotly_js() -> str:
    return plotly.offline.get_plotlyjs()


def _s(ns: Any) -> float | None:
    return ns / 1e9 if isinstance(ns, int | float) else None


def fault_windows(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fault windows from nemesis ops: a fault opens one, the op that undoes it on
    the same nodes closes it (`heal` closes every partition); an unclosed window
    runs to the end of the history."""
    out: list[dict[str, Any]] = []
    end = max((_s(o.get("time")) or 0 for o in history), default=0)
    for o in history:
        t = _s(o.get("time"))
        if o.get("process") != "nemesis" or o.get("type") == "invoke" or t is None:
            continue
        f, value = o.get("f"), o.get("value")
        nodes = set(map(str, value)) if isinstance(value, list) else None
        if f in WINDOWS:
            label = f if nodes is None else f"{f} {','.join(sorted(nodes))}"
            out.append({"start": t, "end": None, "label": label, "closer": WINDOWS[f],
                        "nodes": nodes})
            continue
        for w in out:
            if w["end"] is None and w["closer"] == f and (
                    w["nodes"] is None or nodes is None or w["nodes"] & nodes):
                w["end"] = t
    for w in out:
        if w["end"] is None:
            w["end"] = end
    return out


def _shade(fig: go.Figure, windows: list[dict[str, Any]]) -> None:
    for w in windows:
        if w["end"] > w["start"]:
            fig.add_vrect(
                x0=w["start"],
                x1=w["end"],
                fillcolor="#b3261e",
                opacity=0.08,
                line_width=0,
                annotation_text=w["label"],
                annotation_position="top left",
                annotation_font_size=10,
            )
        else:
            fig.add_vline(
                x=w["start"],
                line_color="#b3261e",
                line_dash="dot",
                annotation_text=w["label"],
                annotation_font_size=10,
            )


def _ops(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Completed client ops with start/end seconds (invoke → next op of the process)."""
    pending: dict[Any, dict[str, Any]] = {}
    out = []
    for o in history:
        p = o.get("process")
        if p == "nemesis":
            continue
        if o.get("type") == "invoke":
            pending[p] = o
        elif p in pending:
            inv = pending.pop(p)
            s, e = _s(inv.get("time")), _s(o.get("time"))
            if s is not None and e is not None:
                out.append(
                    {
                        "process": str(p),
                        "f": o.get("f"),
                        "type": o.get("type"),
                        "start": s,
                        "end": e,
                        "value": o.get("value"),
                        "offset": o.get("offset"),
                    }
                )
    return out


def _layout(fig: go.Figure, title: str, y: str, height: int = 320) -> go.Figure:
    fig.update_layout(
        title=title,
        height=height,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        xaxis_title="seconds since start",
        yaxis_title=y,
        template="plotly_white",
        legend={"orientation": "h"},
    )
    return fig


def timeline(ops: list[dict[str, Any]], windows: list[dict[str, Any]]) -> go.Figure:
    fig = go.Figure()
    shown = ops[:MAX_TIMELINE_OPS]
    for typ, colour in COLOURS.items():
        sel = [o for o in shown if o["type"] == typ]
        if not sel:
            continue
        fig.add_trace(
            go.Bar(
                name=typ,
                orientation="h",
                marker_color=colour,
                y=[o["process"] for o in sel],
                base=[o["start"] for o in sel],
                x=[max(o["end"] - o["start"], 1e-4) for o in sel],
                hovertext=[
                    f"{o['f']} {o['type']} value={o['value']} offset={o['offset']}" for o in sel
                ],
            )
        )
    _shade(fig, windows)
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(type="category")
    title = "Client operations by process"
    if len(ops) > len(shown):
        title += f" (first {len(shown)} of {len(ops)})"
    return _layout(fig, title, "process", 80 + 30 * len({o["process"] for o in shown}) + 120)


def latency(ops: list[dict[str, Any]], windows: list[dict[str, Any]]) -> go.Figure:
    fig = go.Figure()
    step = max(1, len(ops) // MAX_POINTS)
    for f in ("send", "poll"):
        for typ, colour in COLOURS.items():
            sel = [o for o in ops[::step] if o["f"] == f and o["type"] == typ]
            if sel:
                fig.add_trace(
                    go.Scattergl(
                        name=f"{f} {typ}",
                        mode="markers",
                        marker={
                            "color": colour,
                            "size": 4,
                            "symbol": "circle" if f == "send" else "x",
                        },
                        x=[o["end"] for o in sel],
                        y=[(o["end"] - o["start"]) * 1e3 for o in sel],
                    )
                )
    _shade(fig, windows)
    fig.update_yaxes(type="log")
    return _layout(fig, "Latency (completion time × latency)", "ms")


def throughput(ops: list[dict[str, Any]], windows: list[dict[str, Any]]) -> go.Figure:
    """Completed client ops per second by outcome, in ~60 bins over the run."""
    span = max(o["end"] for o in ops) or 1.0
    width = max(span / 60, 0.05)
    fig = go.Figure()
    for typ, colour in COLOURS.items():
        counts: dict[int, int] = {}
        for o in ops:
            if o["type"] == typ:
                b = int(o["end"] / width)
                counts[b] = counts.get(b, 0) + 1
        if counts:
            bins = range(int(span / width) + 1)
            fig.add_trace(go.Scatter(
                name=typ, x=[(b + 0.5) * width for b in bins],
                y=[counts.get(b, 0) / width for b in bins],
                mode="lines", line={"shape": "hv", "color": colour}))
    _shade(fig, windows)
    return _layout(fig, f"Throughput (completed ops per second, {width:.2f} s bins)", "ops/s")


def replica_progress(events: list[dict[str, Any]]) -> go.Figure | None:
    """HW and LEO per replica over time, from events carrying hw/leo fields."""
    series: dict[tuple[str, str], tuple[list[float], list[int]]] = {}
    elections = []
    isr: tuple[list[float], list[int]] = ([], [])
    for e in events:
        t = _s(e.get("time"))
        if t is None:
            continue
        for k in ("hw", "leo"):
            if isinstance(e.get(k), int):
                xs, ys = series.setdefault((str(e.get("node")), k), ([], []))
                xs.append(t)
                ys.append(e[k])
        if isinstance(e.get("isr"), list):
            isr[0].append(t)
            isr[1].append(len(e["isr"]))
        if e.get("type") == "leader-elected":
            elections.append((t, e))
    if not series and not isr[0]:
        return None
    fig = go.Figure()
    for (node, k), (xs, ys) in sorted(series.items()):
        fig.add_trace(
            go.Scatter(
                name=f"{node} {k.upper()}",
                x=xs,
                y=ys,
                mode="lines+markers",
                line={"shape": "hv", "dash": "solid" if k == "hw" else "dot"},
            )
        )
    if isr[0]:
        fig.add_trace(
            go.Scatter(
                name="ISR size",
                x=isr[0],
                y=isr[1],
                yaxis="y2",
                mode="lines",
                line={"shape": "hv", "color": "#888"},
            )
        )
        fig.update_layout(yaxis2={"overlaying": "y", "side": "right", "title": "ISR size"})
    for t, e in elections:
        fig.add_vline(
            x=t,
            line_color="#3451b2",
            line_dash="dash",
            annotation_text=f"leader {e.get('leader', '?')} "
            f"e{e.get('leader_epoch', e.get('epoch', '?'))}",
            annotation_font_size=10,
        )
    return _layout(fig, "HW and LEO per replica, ISR size, leader changes", "offset")


def build(data: RunData) -> list[dict[str, str]]:
    """The report's charts as {"title", "html"} fragments (no plotly.js inside)."""
    windows = fault_windows(data.history)
    ops = _ops(data.history)
    figs: list[tuple[str, go.Figure]] = []
    if ops:
        figs.append(("Timeline", timeline(ops, windows)))
        figs.append(("Latency", latency(ops, windows)))
        figs.append(("Throughput", throughput(ops, windows)))
    prog = replica_progress(data.events)
    if prog is not None:
        figs.append(("Replica progress", prog))
    return [
        {
            "title": title,
            "html": fig.to_html(
                full_html=False, include_plotlyjs=False, config={"displaylogo": False}
            ),
        }
        for title, fig in figs
    ]
