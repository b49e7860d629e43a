"""The report's charts as inline SVG: no script, no library, a few kB each.

- Cluster timeline: one lane per broker with its leadership, its own fault
  windows as thin bands (down, paused, partitioned), and its protocol events as
  markers (elections, truncations, power cycles) that link to the
  timeline table; one lane per client process with its operations.
- Latency and throughput of client operations, each with a strip of the
  brokers' fault bands under its time axis.
- HW and LEO per replica, the ISR size (whole numbers) and leader changes.

Times are seconds since the run started, labelled in s and ms. Every mark has a
tooltip (<title>). A chart keeps at most a few thousand marks, so a long run's
report stays small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

from checker import clientops, progress
from checker.clientops import LANE_BINS, LATENCY_BINS, MAX_POINTS, MAX_TIMELINE_OPS, WORST
from contract import FAULT_WINDOWS
from reports.rundata import Progress, RunData, pkey, trace_progress
from reports.story.facts import RunFacts, nodes_of, rule_of
from reports.units import fmt_seconds, fmt_time, is_number

MAX_LEADER_PARTITIONS = 4
MAX_PROGRESS = 4  # partitions with a replica progress chart
COLOURS = {"ok": "#1f7a3d", "fail": "#b3261e", "info": "#b26a00"}
FAULT_COLOURS = {"down": "#b3261e", "paused": "#b26a00", "partitioned": "#6a3fb5"}
NODE_COLOURS = ["#3451b2", "#c2410c", "#0f766e", "#7e22ce", "#a16207", "#be123c", "#475569"]
# Which nemesis op opens a fault window and which closes it (runs without
# run.json fault_windows).
WINDOWS = {f: (end, kind) for f, (kind, end) in FAULT_WINDOWS.items()}

W = 1100  # viewBox width
LEFT, RIGHT = 92, 56


def _s(ns: Any) -> float | None:
    return ns / 1e9 if is_number(ns) else None


@dataclass
class Band:
    node: str
    kind: str
    label: str
    start: float
    end: float
    ref: str | None = None


@dataclass
class Scale:
    t1: float  # seconds at the right edge

    @property
    def width(self) -> float:
        return W - LEFT - RIGHT

    def x(self, t: float) -> float:
        return LEFT + max(0.0, min(t, self.t1)) / self.t1 * self.width


def fault_bands(data: RunData, facts: RunFacts, end: float) -> list[Band]:
    """The fault windows of run.json (per node), else from the nemesis ops."""
    out = []
    for w in facts.windows:
        s = _s(w.start) or 0.0
        e = _s(w.end) if w.end is not None else end
        out.append(Band(w.node, w.kind, w.fault, s, e if e is not None else end,
                        w.item.id if w.item else None))
    if out or facts.windows:
        return out
    open_: list[Band] = []
    for it in facts.nemesis:
        t = _s(it.time)
        if t is None:
            continue
        nodes = nodes_of(it.get("value"))
        if it.type in WINDOWS:
            for n in nodes:
                b = Band(n, WINDOWS[it.type][1], it.type, t, end, it.id)
                out.append(b)
                open_.append(b)
            continue
        for b in list(open_):
            if WINDOWS[b.label][0] == it.type and (b.node in nodes or it.type == "heal"):
                b.end = t
                open_.remove(b)
    return out


def _ticks(t1: float, n: int = 8) -> list[float]:
    raw = t1 / n
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [round(i * step, 9) for i in range(int(t1 / step) + 1)]


def _x_axis(sc: Scale, y: float, label: bool = True) -> list[str]:
    out = [f'<line x1="{LEFT}" y1="{y}" x2="{W - RIGHT}" y2="{y}" class="ax"/>']
    for t in _ticks(sc.t1):
        x = sc.x(t)
        out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" class="ax"/>')
        if label:
            out.append(f'<text x="{x:.1f}" y="{y + 16}" class="tick" text-anchor="middle">'
                       f'{fmt_seconds(t)}</text>')
    return out


def _grid_x(sc: Scale, y0: float, y1: float) -> list[str]:
    return [f'<line x1="{sc.x(t):.1f}" y1="{y0}" x2="{sc.x(t):.1f}" y2="{y1}" class="gl"/>'
            for t in _ticks(sc.t1)]


def _plot_area(sc: Scale, y0: float, y1: float) -> list[str]:
    """A chart's background and its vertical time grid."""
    return [f'<rect x="{LEFT}" y="{y0}" width="{sc.width:.1f}" height="{y1 - y0}" '
            'class="plotbg"/>', *_grid_x(sc, y0, y1)]


def _y_tick(y: float, label: str) -> str:
    """A horizontal grid line at `y` with its label left of the axis."""
    return (f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" class="gl"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">'
            f'{escape(label)}</text>')


def _title(text: str) -> str:
    return f"<title>{escape(text)}</title>"


def _link(ref: str | None, body: str) -> str:
    return f'<a href="#{ref}">{body}</a>' if ref else body


def _svg(height: float, body: list[str], label: str) -> str:
    return (f'<svg viewBox="0 0 {W} {height:.0f}" width="100%" role="img" '
            f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
            + "".join(body) + "</svg>")


def _band_text(b: Band) -> str:
    return b.kind if b.kind != "down" else f"down: {b.label}"


def _band(sc: Scale, b: Band, y: float, h: float, label: bool) -> str:
    x0, x1 = sc.x(b.start), sc.x(b.end)
    colour = FAULT_COLOURS.get(b.kind, "#5b6470")
    tip = f"{b.node} {_band_text(b)}, {fmt_time(b.start * 1e9)} – {fmt_time(b.end * 1e9)}"
    body = (f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 2):.1f}" height="{h}" '
            f'fill="{colour}" rx="1">{_title(tip)}</rect>')
    if label:
        body += (f'<text x="{x0 + 2:.1f}" y="{y + h + 10}" class="band" fill="{colour}">'
                 f'{escape(_band_text(b))}</text>')
    return _link(b.ref, body)


def fault_strip(sc: Scale, bands: list[Band], nodes: list[str], y: float) -> tuple[list[str],
                                                                                float]:
    """A thin row per node with its fault bands, under a time chart."""
    out = []
    for n in nodes:
        out.append(f'<text x="{LEFT - 6}" y="{y + 7}" class="lane" text-anchor="end">'
                   f'{escape(n)}</text>')
        out.append(f'<line x1="{LEFT}" y1="{y + 4}" x2="{W - RIGHT}" y2="{y + 4}" class="gl"/>')
        out += [_band(sc, b, y + 1, 6, False) for b in bands if b.node == n]
        y += 11
    return out, y


def _marker(x: float, y: float, kind: str, colour: str, tip: str, ref: str | None) -> str:
    shapes = {
        "election": f'<path d="M{x:.1f} {y - 6} l6 6 l-6 6 l-6 -6 z" fill="{colour}"/>',
        "truncate": f'<path d="M{x - 6:.1f} {y - 5} h12 l-6 11 z" fill="{colour}"/>',
        "power-cycle": (f'<path d="M{x + 2:.1f} {y - 7} l-7 9 h5 l-2 7 l7 -9 h-5 z" '
                        f'fill="{colour}"/>'),
    }
    return _link(ref, f'<g class="mk">{shapes[kind]}{_title(tip)}</g>')


def _leadership(facts: RunFacts, end: float
                ) -> dict[str, list[tuple[str, int, float, float, str]]]:
    """node → [(partition, epoch, from, to, election item id)]: who led what when."""
    out: dict[str, list[tuple[str, int, float, float, str]]] = {}
    parts = sorted(facts.elections)[:MAX_LEADER_PARTITIONS]
    for part in parts:
        changes = [it for it in facts.isr_changes.get(part, [])
                   if it.type in ("leader-elected", "leader-offline")]
        for i, it in enumerate(changes):
            if it.type != "leader-elected":
                continue
            t0 = _s(it.time) or 0.0
            t1 = _s(changes[i + 1].time) if i + 1 < len(changes) else end
            out.setdefault(str(it.get("leader")), []).append(
                (part, int(it.get("leader_epoch", -1)), t0, t1 or end, it.id))
    return out


def cluster_timeline(data: RunData, facts: RunFacts, sc: Scale, bands: list[Band],
                     nodes: list[str], ops: dict[str, Any]) -> str:
    """``ops``: the client ops as reduced for the charts (checker.clientops)."""
    lane = 56
    top = 8
    body: list[str] = []
    lead = _leadership(facts, sc.t1)
    y = top
    for n in nodes:
        body.append(f'<rect x="{LEFT}" y="{y}" width="{sc.width:.1f}" height="{lane - 4}" '
                    'class="lanebg"/>')
        body.append(f'<text x="{LEFT - 8}" y="{y + 30}" class="lane big" text-anchor="end">'
                    f'{escape(n)}</text>')
        for part, epoch, t0, t1, ref in lead.get(n, []):
            x0, x1 = sc.x(t0), sc.x(t1)
            tip = f"{n} leads {part} in epoch {epoch} from {fmt_time(t0 * 1e9)}"
            text = f"leader {part} e{epoch}" if x1 - x0 > 70 else f"e{epoch}"
            body.append(_link(ref, f'<rect x="{x0:.1f}" y="{y + 18}" '
                                   f'width="{max(x1 - x0, 2):.1f}" height="12" class="lead">'
                                   f'{_title(tip)}</rect>'))
            if x1 - x0 > 18:
                body.append(f'<text x="{x0 + 3:.1f}" y="{y + 28}" class="leadt">'
                            f'{escape(text)}</text>')
        label_end = 0.0
        for b in sorted((b for b in bands if b.node == n), key=lambda b: b.start):
            # a label only where the previous one has ended (its tooltip says it all)
            room = sc.x(b.start) >= label_end
            body.append(_band(sc, b, y + 34, 5, room))
            if room:
                label_end = sc.x(b.start) + 6 * len(_band_text(b)) + 8
        body += _lane_markers(facts, sc, n, y + 9)
        y += lane
    body += _grid_x(sc, top, y)
    if ops["count"]:
        procs = sorted(ops["processes"], key=_proc_key)
        row = 14 if len(procs) <= 12 else 8
        body.append(f'<text x="{LEFT - 8}" y="{y + 14}" class="lane" text-anchor="end">'
                    'client</text>')
        y += 18
        for i, p in enumerate(procs):
            py = y + i * row
            body.append(f'<text x="{LEFT - 8}" y="{py + row - 3}" class="tick" '
                        f'text-anchor="end">{escape(p)}</text>'
                        if row >= 12 else "")
            body.append(f'<line x1="{LEFT}" y1="{py + row / 2}" x2="{W - RIGHT}" '
                        f'y2="{py + row / 2}" class="gl"/>')
        index = {p: i for i, p in enumerate(procs)}
        if ops["count"] <= MAX_TIMELINE_OPS:
            for o in ops["listed"]:
                x0, x1 = sc.x(o["start"]), sc.x(o["end"])
                py = y + index[o["process"]] * row + 2
                tip = (f"{o['f']} {o['type']} value={o['value']} offset={o['offset']} "
                       f"{fmt_time(o['start'] * 1e9)} → {fmt_time(o['end'] * 1e9)}")
                body.append(f'<rect x="{x0:.1f}" y="{py}" width="{max(x1 - x0, 1.5):.1f}" '
                            f'height="{row - 4}" fill="{COLOURS.get(o["type"], "#888")}">'
                            f'{_title(tip)}</rect>')
        else:
            for p, segs in lane_segments(ops["lanes"], sc.t1).items():
                py = y + index[p] * row + 2
                for t0, t1, typ, counts in segs:
                    x0, x1 = sc.x(t0), sc.x(t1)
                    tip = (f"client {p}, {fmt_time(t0 * 1e9)} – {fmt_time(t1 * 1e9)}: "
                           + ", ".join(f"{n} {k}" for k, n in counts.items() if n)
                           + " completed")
                    body.append(f'<rect x="{x0:.1f}" y="{py}" width="{max(x1 - x0, 1.5):.1f}" '
                                f'height="{row - 4}" fill="{COLOURS[typ]}">{_title(tip)}</rect>')
        y += len(procs) * row + 4
    body += _x_axis(sc, y)
    legend = _legend(y + 30)
    return _svg(y + 44, body + legend, "cluster timeline")


# An aggregated lane's stretch: (from s, to s, the worst outcome in it, completions by type).
Segment = tuple[float, float, str, dict[str, int]]


def lane_bins(ops: list[dict[str, Any]], t1: float, n: int = LANE_BINS
              ) -> dict[str, list[Segment]]:
    """Each client's operations over the whole run in `n` equal time bins
    (lane_segments of the ops' reduction)."""
    return lane_segments(clientops.lanes(ops, t1, n), t1, n)


def lane_segments(lanes: dict[str, list[list[Any]]], t1: float, n: int = LANE_BINS
                  ) -> dict[str, list[Segment]]:
    """Each client's lane as drawn from its bins (checker.clientops: [bin, the
    index in WORST of the worst outcome in flight, [[type, completions], ...]]):
    runs of bins alike merge into one stretch; a bin with no operation in flight
    is left empty."""
    width = t1 / n
    out: dict[str, list[Segment]] = {}
    for p, bins in lanes.items():
        segs: list[Segment] = []
        for b, rank, done in bins:
            if segs and segs[-1][2] == WORST[rank] and abs(segs[-1][1] - b * width) < 1e-9:
                t0, _, typ, counts = segs[-1]
                segs[-1] = (t0, (b + 1) * width, typ, counts)
            else:
                counts = {}
                segs.append((b * width, (b + 1) * width, WORST[rank], counts))
            for k, v in done:
                counts[k] = counts.get(k, 0) + v
        out[p] = segs
    return out


def _proc_key(p: str) -> tuple[int, str]:
    return (0, f"{int(p):09d}") if p.isdigit() else (1, p)


def _legend(y: float) -> list[str]:
    items = [("election", "#3451b2", "elected leader"),
             ("truncate", "#b3261e", "truncation that removed records"),
             ("truncate", "#9aa3ad", "truncation that removed nothing"),
             ("power-cycle", "#7a1c14", "power cycle")]
    out, x = [], LEFT
    for kind, colour, text in items:
        out.append(_marker(x + 6, y - 4, kind, colour, text, None))
        out.append(f'<text x="{x + 16}" y="{y}" class="tick">{escape(text)}</text>')
        x += 30 + 6.2 * len(text)
    for kind, colour in FAULT_COLOURS.items():
        out.append(f'<rect x="{x}" y="{y - 7}" width="18" height="5" fill="{colour}"/>'
                   f'<text x="{x + 22}" y="{y}" class="tick">{kind}</text>')
        x += 34 + 6.2 * len(kind)
    return out


def _lane_markers(facts: RunFacts, sc: Scale, node: str, y: float) -> list[str]:
    """Markers at their times, nudged right where they would cover each other
    (the tooltip gives the exact time)."""
    marks: list[tuple[float, str, str, str, str | None]] = []
    for part, els in facts.elections.items():
        for el in els:
            if el.leader == node:
                tip = (f"{fmt_time(el.time)}: {node} elected leader of {part}, epoch {el.epoch}"
                       + (" (unclean)" if el.unclean else ""))
                marks.append((sc.x(el.time / 1e9), "election", "#3451b2", tip, el.item.id))
    for part, by_node in facts.truncs.items():
        for tr in by_node.get(node, []):
            removed = max(int(tr.get("from") or 0) - int(tr.get("to") or 0), 0)
            tip = (f"{fmt_time(tr.time)}: {node} truncates {part} from {tr.get('from')} to "
                   f"{tr.get('to')} (rule {rule_of(tr) or '?'}), removing {removed}")
            marks.append((sc.x((tr.time or 0) / 1e9), "truncate",
                          "#b3261e" if removed else "#9aa3ad", tip, tr.id))
    for pc in facts.power_cycles.get(node, []):
        marks.append((sc.x((pc.time or 0) / 1e9), "power-cycle", "#7a1c14",
                      f"{fmt_time(pc.time)}: power-cycle of {node}", pc.id))
    out, last = [], -1e9
    for x, kind, colour, tip, ref in sorted(marks, key=lambda m: m[0]):
        x = max(x, last + 13)
        last = x
        out.append(_marker(x, y, kind, colour, tip, ref))
    return out


def _y_log(v: float, lo: float, hi: float, y0: float, y1: float) -> float:
    v = min(max(v, lo), hi)
    return y1 - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (y1 - y0)


def latency(sc: Scale, ops: dict[str, Any], bands: list[Band], nodes: list[str]) -> str:
    """``ops``: the client ops as reduced for the charts (checker.clientops)."""
    y0, y1 = 10, 190
    lo = 10 ** math.floor(math.log10(ops["latency_min"]))
    hi = 10 ** math.ceil(math.log10(ops["latency_max"] * 1.01))
    body = _plot_area(sc, y0, y1)
    d = lo
    while d <= hi * 1.0001:
        y = _y_log(d, lo, hi, y0, y1)
        body.append(_y_tick(y, fmt_seconds(d / 1e3)))
        d *= 10
    body.append(f'<text x="14" y="{(y0 + y1) / 2}" class="tick" transform="rotate(-90 14 '
                f'{(y0 + y1) / 2})" text-anchor="middle">latency (log)</text>')
    if ops["count"] <= MAX_POINTS:
        shown = ops["listed"]
    else:  # the ok ops' envelope per bin, and an even sample of the others
        body += _latency_envelope(sc, ops["latency"], lo, hi, y0, y1)
        shown = ops["failed"]
    for o in shown:
        lat = clientops.latency_ms(o["start"], o["end"])
        x, y = sc.x(o["end"]), _y_log(lat, lo, hi, y0, y1)
        colour = COLOURS.get(o["type"], "#888")
        tip = f"{o['f']} {o['type']} at {fmt_time(o['end'] * 1e9)}: {lat:.3g} ms"
        if o["f"] == "send":
            body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}">'
                        f'{_title(tip)}</circle>')
        else:
            body.append(f'<path d="M{x - 3:.1f} {y - 3:.1f}l6 6m0 -6l-6 6" stroke="{colour}" '
                        f'stroke-width="1.5">{_title(tip)}</path>')
    body += _x_axis(sc, y1)
    strip, y = fault_strip(sc, bands, nodes, y1 + 24)
    body += strip
    body.append(f'<text x="{LEFT}" y="{y + 12}" class="tick">● send  × poll — '
                '<tspan fill="#1f7a3d">ok</tspan> <tspan fill="#b3261e">fail</tspan> '
                '<tspan fill="#b26a00">info</tspan>; '
                'fault windows per broker under the axis</text>')
    return _svg(y + 20, body, "latency")


def _latency_envelope(sc: Scale, env: list[list[Any]], lo: float, hi: float,
                      y0: float, y1: float) -> list[str]:
    """The ok ops' latency per LATENCY_BINS bin of completion time ([bin, lowest,
    median, highest], checker.clientops): a band from the lowest to the highest, a
    line at the median."""
    width = sc.t1 / LATENCY_BINS
    runs: list[list[list[Any]]] = []  # runs of consecutive bins: no band across a gap
    for row in env:
        if runs and runs[-1][-1][0] == row[0] - 1:
            runs[-1].append(row)
        else:
            runs.append([row])
    colour = COLOURS["ok"]
    out = []
    for run in runs:
        top, bottom, mid = [], [], []
        for b, low, median, high in run:
            for x in (sc.x(b * width), sc.x((b + 1) * width)):
                top.append(f"{x:.1f},{_y_log(high, lo, hi, y0, y1):.1f}")
                bottom.append(f"{x:.1f},{_y_log(low, lo, hi, y0, y1):.1f}")
                mid.append(f"{x:.1f},{_y_log(median, lo, hi, y0, y1):.1f}")
        out += [f'<polygon points="{" ".join(top + bottom[::-1])}" fill="{colour}" '
                'fill-opacity=".25" stroke="none"><title>ok: lowest to highest latency per '
                'bin</title></polygon>',
                f'<polyline points="{" ".join(mid)}" fill="none" stroke="{colour}" '
                'stroke-width="1.5"><title>ok: median latency per bin</title></polyline>']
    return out


def throughput(sc: Scale, ops: dict[str, Any], bands: list[Band], nodes: list[str]
               ) -> tuple[str, float]:
    """``ops``: the client ops as reduced for the charts (checker.clientops)."""
    y0, y1 = 10, 150
    width = clientops.throughput_width(sc.t1)
    series = {typ: [c / width for c in counts] for typ, counts in ops["throughput"].items()}
    top = max((max(v) for v in series.values()), default=1.0) or 1.0
    body = _plot_area(sc, y0, y1)
    for v in _int_ticks(top):
        y = y1 - v / top * (y1 - y0)
        body.append(_y_tick(y, f"{v:g}/s"))
    for typ, vals in series.items():
        pts = []
        for b, v in enumerate(vals):
            y = y1 - v / top * (y1 - y0)
            pts.append(f"{sc.x(b * width):.1f},{y:.1f} {sc.x((b + 1) * width):.1f},{y:.1f}")
        body.append(f'<polyline points="{" ".join(pts)}" fill="none" '
                    f'stroke="{COLOURS[typ]}" stroke-width="1.5">{_title(typ)}</polyline>')
    body += _x_axis(sc, y1)
    strip, y = fault_strip(sc, bands, nodes, y1 + 24)
    body += strip
    body.append(f'<text x="{LEFT}" y="{y + 12}" class="tick">completed client ops per second '
                f'({fmt_seconds(round(width, 3))} bins): '
                '<tspan fill="#1f7a3d">ok</tspan> <tspan fill="#b3261e">fail</tspan> '
                '<tspan fill="#b26a00">info</tspan></text>')
    return _svg(y + 20, body, "throughput"), width


def _int_ticks(top: float, n: int = 5) -> list[float]:
    """Whole-number ticks from 0 to `top` (at most about n+1 of them)."""
    step = max(1, math.ceil(top / n))
    mag = 10 ** math.floor(math.log10(step))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= step)
    return [float(i * step) for i in range(int(top // step) + 1)]


State, Column, PROGRESS_COLUMNS = progress.State, progress.Column, progress.PROGRESS_COLUMNS
progress_columns = progress.columns
PROGRESS_NOTE = (
    "HW (solid) and LEO (dashed) per replica, the ISR size, and leader changes. The LEO "
    "is what events report (a start, a leadership change, a truncation) raised by the "
    "appends the run shows: each acknowledged offset on the broker that acknowledged "
    "it, and each HW move (a replica holds the records below its HW). A long run is "
    f"drawn in {PROGRESS_COLUMNS} columns of equal time, each spanning the lowest to the "
    "highest value in it.")


def progress_states(data: RunData, facts: RunFacts, part: str,
                    trace: Progress | None = None) -> dict[str, list[State]]:
    """node → its (t, HW, LEO) after each observation of `part`, in time order
    (checker.progress.fold): the events that report a LEO (started,
    became-leader/-follower, a truncation's "to"), the HW moves, the acknowledged
    sends on the broker that acknowledged them, and a sim run's fetch-round trace."""
    obs: list[progress.Obs] = []
    kept = data.events_kept  # the events the check kept, else events.jsonl's
    for i, e in kept if kept is not None else enumerate(data.events):
        obs += [o for p, o in progress.event_obs(i, e) if p == part]
    for i, op in enumerate(data.history):
        if (op.get("f") == "send" and op.get("type") == "ok" and isinstance(op.get("offset"), int)
                and is_number(op.get("time")) and op.get("node") is not None
                and pkey(op.get("topic"), op.get("partition")) == part):
            obs.append(progress.ack_obs(i, op["time"], str(op["node"]), op["offset"]))
    obs += progress.traced_obs(trace or {}, part)
    return progress.fold(obs)


def replica_progress(data: RunData, facts: RunFacts, sc: Scale, part: str, nodes: list[str],
                     bands: list[Band], trace: Progress | None = None,
                     cols: dict[str, list[Column]] | None = None) -> str | None:
    """``cols``: each replica's columns as the check computed them
    (checker.reportevents); None: computed here from the run's files."""
    if cols is None:
        cols = {node: progress_columns(st, sc.t1)
                for node, st in progress_states(data, facts, part, trace).items()}
    changes = facts.isr_changes.get(part) or [  # no controller events: any that say
        it for it in sorted(facts.items.values(), key=lambda i: i.time or 0)
        if it.source == "event" and pkey(it.get("topic"), it.get("partition")) == part]
    isr = [(_s(it.time) or 0.0, len(it.get("isr"))) for it in changes
           if isinstance(it.get("isr"), list)]
    if not cols and not isr:
        return None
    y0, y1 = 22, 200
    top_off = max([c[2][1] for cs in cols.values() for c in cs] + [1])
    top_isr = max([n for _, n in isr] + [1])
    body = _plot_area(sc, y0, y1)
    for v in _int_ticks(top_off):
        y = y1 - v / top_off * (y1 - y0)
        body.append(_y_tick(y, f"{v:g}"))
    body.append(f'<text x="14" y="{(y0 + y1) / 2}" class="tick" transform="rotate(-90 14 '
                f'{(y0 + y1) / 2})" text-anchor="middle">offset</text>')
    if isr:
        for n in range(top_isr + 1):
            y = y1 - n / top_isr * (y1 - y0)
            body.append(f'<text x="{W - RIGHT + 6}" y="{y + 4:.1f}" class="tick isr">{n}'
                        '</text>')
        body.append(f'<text x="{W - 12}" y="{(y0 + y1) / 2}" class="tick isr" '
                    f'transform="rotate(90 {W - 12} {(y0 + y1) / 2})" text-anchor="middle">'
                    'ISR size</text>')
        pts = []
        for i, (t, n) in enumerate(isr):
            t_next = isr[i + 1][0] if i + 1 < len(isr) else sc.t1
            y = y1 - n / top_isr * (y1 - y0)
            pts.append(f"{sc.x(t):.1f},{y:.1f} {sc.x(t_next):.1f},{y:.1f}")
        body.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="#9aa3ad" '
                    'stroke-width="6" stroke-opacity=".45"><title>ISR size</title></polyline>')
    colour = {n: NODE_COLOURS[i % len(NODE_COLOURS)] for i, n in enumerate(nodes)}
    for node, cs in sorted(cols.items()):
        for k, which in (("HW", 1), ("LEO", 2)):
            path: list[str] = []
            for i, c in enumerate(cs):
                t_next = cs[i + 1][0] if i + 1 < len(cs) else sc.t1
                lo, hi, last = c[which]
                x = f"{sc.x(c[0]):.1f}"
                prev = None
                for v in (lo, hi, last):  # the column's range, ending at its last value
                    if v != prev:
                        path.append(f"{x},{y1 - v / top_off * (y1 - y0):.1f}")
                    prev = v
                path.append(f"{sc.x(t_next):.1f},{y1 - last / top_off * (y1 - y0):.1f}")
            dash = "" if k == "HW" else ' stroke-dasharray="4 3"'
            off = -1.5 if k == "HW" else 1.5  # keep equal HW and LEO lines apart
            body.append(f'<polyline data-replica="{escape(node)}" data-line="{k}" '
                        f'points="{" ".join(path)}" fill="none" '
                        f'stroke="{colour.get(node, "#555")}" stroke-width="2"{dash} '
                        f'transform="translate(0 {off})">{_title(f"{node} {k}")}</polyline>')
    for el in facts.elections.get(part, []):
        x = sc.x(el.time / 1e9)
        body.append(_link(el.item.id, f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y1}" '
                                      'class="elect"/>'
                          f'<text x="{x + 3:.1f}" y="{y0 - 6}" class="tick elect-t">'
                          f'{escape(el.leader)} e{el.epoch}</text>'))
    body += _x_axis(sc, y1)
    strip, y = fault_strip(sc, bands, nodes, y1 + 24)
    body += strip
    legend = []
    x = LEFT
    for n in nodes:
        if n in cols:
            legend.append(f'<line x1="{x}" y1="{y + 8}" x2="{x + 18}" y2="{y + 8}" '
                          f'stroke="{colour[n]}" stroke-width="2"/><text x="{x + 22}" '
                          f'y="{y + 12}" class="tick">{escape(n)} HW</text>'
                          f'<line x1="{x + 64}" y1="{y + 8}" x2="{x + 82}" y2="{y + 8}" '
                          f'stroke="{colour[n]}" stroke-width="2" stroke-dasharray="4 3"/>'
                          f'<text x="{x + 86}" y="{y + 12}" class="tick">{escape(n)} LEO</text>')
            x += 140
    if isr:
        legend.append(f'<line x1="{x}" y1="{y + 8}" x2="{x + 18}" y2="{y + 8}" '
                      'stroke="#9aa3ad" stroke-width="6" stroke-opacity=".45"/>'
                      f'<text x="{x + 22}" y="{y + 12}" class="tick">ISR size (right axis)'
                      '</text>')
        x += 150
    legend.append(f'<line x1="{x}" y1="{y + 2}" x2="{x}" y2="{y + 14}" class="elect"/>'
                  f'<text x="{x + 6}" y="{y + 12}" class="tick">leader elected (leader, '
                  'epoch)</text>')
    return _svg(y + 20, body + legend, f"replica progress {part}")


def progress_parts(facts: RunFacts) -> list[str]:
    """The partitions with a progress chart: those with an election or a truncation
    (checker.reportevents computes the same set from the events)."""
    return sorted({p for ps in (facts.elections, facts.truncs) for p in ps})[:MAX_PROGRESS]


def build(data: RunData, facts: RunFacts | None = None) -> list[dict[str, str]]:
    """The report's charts as {"title", "html", "note"} (inline SVG)."""
    facts = facts or RunFacts(data)
    ops = data.client_ops
    if ops is None:  # a run checked before the checker reduced them
        listed = clientops.ops_of(data.history)
        times = [o["end"] for o in listed] + [(_s(it.time) or 0.0)
                                              for it in facts.items.values()]
        ops = clientops.reduce(listed, max(times, default=0.0))
    end = ops["end"]
    if end <= 0:
        return []
    sc = Scale(clientops.edge(end))
    nodes = _nodes(data, facts)
    bands = fault_bands(data, facts, end)
    out = [{"title": "Cluster timeline", "html": cluster_timeline(data, facts, sc, bands,
                                                                   nodes, ops),
            "note": ("Each broker's lane: when it led (blue bar), its own fault windows "
                     "(thin band), its elections, truncations and power cycles "
                     "(markers link to the timeline table); below, each client's operations."
                     + (f" The {ops['count']:,} operations are drawn in {LANE_BINS} time bins of "
                        f"{fmt_seconds(round(sc.t1 / LANE_BINS, 3))} per client, over the "
                        "whole run: a bin is red if an operation in flight in it failed, amber "
                        "if one ended indeterminate (info), green if all completed ok, empty "
                        "if the client had none in flight; its tooltip counts them."
                        if ops["count"] > MAX_TIMELINE_OPS else ""))}]
    reduced = data.progress  # the check's columns, else the run's files
    trace = trace_progress(data.path) if reduced is None else {}
    traced = bool(trace) if reduced is None else reduced["traced"]
    for part in progress_parts(facts):
        cols = None if reduced is None else reduced["parts"].get(part, {})
        svg = replica_progress(data, facts, sc, part, nodes, bands, trace, cols)
        if svg:
            out.append({"title": f"Replica progress {part}", "html": svg,
                        "note": PROGRESS_NOTE + (" From the sim backend's fetch-round trace "
                                                 "too: the exact LEO and HW after each round."
                                                 if traced else "")})
    if ops["count"]:
        others = ops["not_ok"]
        out.append({"title": "Latency", "html": latency(sc, ops, bands, nodes),
                    "note": "Each completed client operation at its completion time." if
                    ops["count"] <= MAX_POINTS else
                    f"The {ops['count'] - others:,} ok operations as a band per "
                    f"{fmt_seconds(round(sc.t1 / LATENCY_BINS, 3))} of completion time, from "
                    "the lowest to the highest latency, with a line at the median; the "
                    f"{others:,} failed or indeterminate ones as points at their completion "
                    "time" + (f" (an even sample of {MAX_POINTS // 2})"
                              if others > MAX_POINTS // 2 else "") + "."})
        svg, _ = throughput(sc, ops, bands, nodes)
        out.append({"title": "Throughput", "html": svg, "note": ""})
    return out


def _nodes(data: RunData, facts: RunFacts) -> list[str]:
    brokers = (data.meta.get("cluster") or {}).get("brokers")
    if isinstance(brokers, list) and brokers:
        return [str(b) for b in brokers]
    seen = {it.node for it in facts.items.values() if it.source == "event"}
    seen |= set(data.logs) | set(data.states)
    return sorted(n for n in seen if n not in ("controller", "None"))


