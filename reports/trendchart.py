"""The nightly trend page's chart (reports.trend): one inline SVG, three panels over
the nights -- runs (and those with anomalies, and those with one their row does
not allow), anomalies found per kind (stacked), and detection time (median, with
the fastest and slowest run). No script and no external asset: the page stays
self-contained and offline like the reports.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from contract import ANOMALY_KINDS

W, LEFT, RIGHT = 960, 64, 16  # viewBox width and margins
PANEL, GAP, TOP = 120, 44, 24  # panel height, space between panels (its title), top margin
# One colour per anomaly kind (ANOMALY_KINDS order); the first two are the losses.
KIND_COLOURS = ["#b3261e", "#a4400c", "#7e22ce", "#3451b2", "#0f766e", "#a16207",
                "#be123c", "#475569", "#6a3fb5"]
RUNS, BAD, NOT_ALLOWED, DETECT = "#9aa5b1", "#b3261e", "#5c0a06", "#3451b2"


@dataclass
class Night:
    """One night's figures, as reports.trend reads them from the results table."""

    night: str
    runs: int
    with_anomalies: int
    not_allowed: int
    kinds: dict[str, int] = field(default_factory=dict)  # anomalies found, per kind
    detection_s: list[float] = field(default_factory=list)  # per run that detected one


def _ticks(top: float) -> list[float]:
    """Up to 5 round ticks from 0 to at least `top`."""
    top = max(top, 1.0)
    step = 1.0
    for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000, 20_000,
              50_000, 100_000):
        step = float(s)
        if top / s <= 4:
            break
    n = int(-(-top // step))
    return [i * step for i in range(n + 1)]


def _fmt(v: float) -> str:
    return f"{v:g}" if v < 10_000 else f"{v / 1000:g}k"


class _Panel:
    """A panel's y scale and its frame: title, y ticks and grid lines."""

    def __init__(self, y0: float, top: float, title: str) -> None:
        self.y0, self.ticks = y0, _ticks(top)
        self.top = self.ticks[-1]
        self.body = [f'<text x="{LEFT}" y="{y0 - 8}" class="t">{html.escape(title)}</text>']
        for t in self.ticks:
            y = self.y(t)
            self.body.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                             'class="g"/>')
            self.body.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                             f'{_fmt(t)}</text>')

    def y(self, v: float) -> float:
        return self.y0 + PANEL - PANEL * v / self.top


def _legend(y: float, items: list[tuple[str, str]]) -> list[str]:
    """Swatches right of a panel's title (its title is at most ~60 characters)."""
    out, x = [], LEFT + 440
    for label, colour in items:
        out.append(f'<rect x="{x}" y="{y - 18}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x + 14}" y="{y - 9}">{html.escape(label)}</text>')
        x += 14 + 6.5 * len(label) + 14
    return out


def _line(points: list[str]) -> list[str]:
    if len(points) < 2:
        return []
    return [f'<polyline points="{" ".join(points)}" fill="none" stroke="{DETECT}" '
            'stroke-width="1.5"/>']


def night_chart(nights: list[Night]) -> str:
    """The three panels as one <svg> (empty string for no nights)."""
    if not nights:
        return ""
    n = len(nights)
    slot = (W - LEFT - RIGHT) / n
    bar = min(40.0, slot * 0.7)

    def cx(i: int) -> float:
        return LEFT + slot * (i + 0.5)

    out: list[str] = []
    y = TOP
    # 1. Runs, runs with anomalies, runs with one not allowed.
    p = _Panel(y, max(x.runs for x in nights), "runs per night")
    out += p.body + _legend(y, [("all", RUNS), ("with anomalies", BAD),
                                ("with one their row does not allow", NOT_ALLOWED)])
    for i, x in enumerate(nights):
        tip = (f"{x.night}: {x.runs} run(s), {x.with_anomalies} with anomalies, "
               f"{x.not_allowed} not allowed")
        for v, colour, w in ((x.runs, RUNS, bar), (x.with_anomalies, BAD, bar * 0.6),
                             (x.not_allowed, NOT_ALLOWED, bar * 0.3)):
            if v:
                out.append(f'<rect x="{cx(i) - w / 2:.1f}" y="{p.y(v):.1f}" width="{w:.1f}" '
                           f'height="{p.y(0) - p.y(v):.1f}" fill="{colour}">'
                           f'<title>{html.escape(tip)}</title></rect>')
    y += PANEL + GAP
    # 2. Anomalies found, stacked per kind.
    kinds = [k for k in ANOMALY_KINDS if any(x.kinds.get(k) for x in nights)]
    p = _Panel(y, max(sum(x.kinds.values()) for x in nights), "anomalies found per night, "
               "by kind")
    out += p.body
    for i, x in enumerate(nights):
        base = 0
        for k in kinds:
            v = x.kinds.get(k, 0)
            if v:
                colour = KIND_COLOURS[ANOMALY_KINDS.index(k) % len(KIND_COLOURS)]
                out.append(f'<rect x="{cx(i) - bar / 2:.1f}" y="{p.y(base + v):.1f}" '
                           f'width="{bar:.1f}" height="{p.y(base) - p.y(base + v):.1f}" '
                           f'fill="{colour}"><title>{html.escape(f"{x.night}: {k} ×{v}")}'
                           '</title></rect>')
                base += v
        if not base:
            out.append(f'<text x="{cx(i):.1f}" y="{p.y(0) - 4:.1f}" text-anchor="middle" '
                       'class="none">none</text>')
    out += _legend(y, [(k, KIND_COLOURS[ANOMALY_KINDS.index(k) % len(KIND_COLOURS)])
                       for k in kinds])
    y += PANEL + GAP
    # 3. Detection time: median line, fastest-slowest whisker.
    times = [t for x in nights for t in x.detection_s]
    p = _Panel(y, max(times, default=1.0), "seconds to detect a loss (lost-write or "
               "divergence): median, fastest to slowest run")
    out += p.body
    points: list[str] = []
    for i, x in enumerate(nights):
        ts = sorted(x.detection_s)
        if not ts:  # no loss detected: the line breaks here rather than bridge the night
            out.append(f'<text x="{cx(i):.1f}" y="{p.y(0) - 4:.1f}" text-anchor="middle" '
                       'class="none">no loss</text>')
            out += _line(points)
            points = []
            continue
        med = ts[len(ts) // 2] if len(ts) % 2 else (ts[len(ts) // 2 - 1] + ts[len(ts) // 2]) / 2
        tip = html.escape(f"{x.night}: median {med:.1f}s, {ts[0]:.1f}–{ts[-1]:.1f}s over "
                          f"{len(ts)} run(s)")
        out.append(f'<line x1="{cx(i):.1f}" x2="{cx(i):.1f}" y1="{p.y(ts[0]):.1f}" '
                   f'y2="{p.y(ts[-1]):.1f}" stroke="{DETECT}" stroke-width="2" '
                   'opacity=".45"/>')
        out.append(f'<circle cx="{cx(i):.1f}" cy="{p.y(med):.1f}" r="4" fill="{DETECT}">'
                   f'<title>{tip}</title></circle>')
        points.append(f"{cx(i):.1f},{p.y(med):.1f}")
    out += _line(points)
    y += PANEL
    # The nights, under the last panel (every k-th label when they would overlap).
    every = max(1, int(-(-n * 100 // (W - LEFT - RIGHT))))
    for i, x in enumerate(nights):
        if i % every == 0 or i == n - 1:
            out.append(f'<text x="{cx(i):.1f}" y="{y + 16}" text-anchor="middle">'
                       f'{html.escape(x.night)}</text>')
    height = y + 28
    return (f'<svg class="trend" viewBox="0 0 {W} {height}" width="100%" role="img" '
            f'aria-label="runs, anomalies and detection time per night" '
            f'xmlns="http://www.w3.org/2000/svg" font-size="11" font-family="system-ui,'
            f'sans-serif"><style>.g{{stroke:#e3e3e3}}.t{{font-size:12px;font-weight:600}}'
            f'.none{{fill:#999}}</style>{"".join(out)}</svg>')
