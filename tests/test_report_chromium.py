"""The report opened in headless Chromium: no console errors, a non-blank screenshot;
for a real 0.10 loss, the first screen shows the headline in the loss colour, the
story, the ghost row and the scenario's source, and CJK text renders with a CJK font
(Debian's fonts-noto-cjk, which run-tests installs)."""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from conftest import skip_unless_required
from conftest_spark import CHAOS_LOSS, checked_chaos_loss, checked_odd_runs, checked_scenario_runs

from checker.api import RunResult
from reports.render import render_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def chromium() -> None:
    """Skip without Chromium -- fail under ISRLAB_REQUIRE_CHROMIUM=1 (CI: run-tests
    installs it, so a missing one is a broken setup, not a reason to skip)."""
    if CHROMIUM is None:
        skip_unless_required("ISRLAB_REQUIRE_CHROMIUM", "needs Debian's chromium package")


def _png(path: Path) -> tuple[int, int, int, bytes]:
    """(width, height, bytes per pixel, decompressed filtered rows) of an 8-bit PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IHDR":
            head = data[pos + 8 : pos + 8 + length]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", head[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    return width, height, 3 if colour == 2 else 4, zlib.decompress(idat)


def png_distinct_bytes(path: Path) -> int:
    """Distinct byte values in the decompressed image data (1-2 for a blank page)."""
    return len(set(_png(path)[3]))


def png_pixel(path: Path, x: int, y: int) -> tuple[int, int, int]:
    """The RGB of one pixel (rows unfiltered up to y)."""
    width, _, bpp, raw = _png(path)
    stride = width * bpp
    prev = bytearray(stride)
    for row in range(y + 1):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        prev = line
    return tuple(prev[x * bpp : x * bpp + 3])  # type: ignore[return-value]


def screenshot(report: Path, shot: Path, anchor: str = "") -> list[str]:
    """Open the report (at `anchor`, "#id") in headless Chromium, save a PNG; the
    console's error lines."""
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            f"--screenshot={shot}",
            "--window-size=1200,1600",
            report.as_uri() + anchor,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line]
    return [line for line in console if "rror" in line or "Uncaught" in line]


def test_report_renders_in_chromium(checked_batch: dict[str, RunResult], tmp_path: Path) -> None:
    report = render_run(checked_batch["report-divergence"].run_dir)
    shot = tmp_path / "report.png"
    assert screenshot(report, shot) == []
    assert png_distinct_bytes(shot) > 16


def test_down_replica_report_renders_in_chromium(tmp_path_factory: pytest.TempPathFactory,
                                                 tmp_path: Path) -> None:
    # A run with a replica read from its data directory, and an interrupted one.
    for run in checked_odd_runs(tmp_path_factory).values():
        shot = tmp_path / f"{run.run_id}.png"
        assert screenshot(render_run(run.run_dir), shot) == []
        assert png_distinct_bytes(shot) > 16


# Written into a copy of the report: where the first screen's parts are drawn,
# and whether a CJK character renders with a real glyph (not the box every
# missing glyph gets).
PROBE = r"""<script>
addEventListener("load", () => {
  const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, height: r.height, text: e.innerText}; };
  const glyph = ch => { const c = document.createElement("canvas"); c.width = 40; c.height = 40;
    const g = c.getContext("2d"); g.font = "32px sans-serif"; g.fillText(ch, 2, 32);
    return Array.from(g.getImageData(0, 0, 40, 40).data).join(","); };
  const out = {
    headline: box(document.querySelector("#headline .headline")),
    banner: getComputedStyle(document.querySelector("#headline")).backgroundColor,
    story: box(document.querySelector("#story ol.story")),
    causes: box(document.querySelector("#story ul.causes")),
    ghosts: Array.from(document.querySelectorAll("tr.ghost")).map(box),
    source: box(document.querySelector("#headline .source")),
    cjk: glyph("\u573a") !== glyph("\u{10FFFD}") && glyph("\u573a") !== glyph("\u573b"),
  };
  const pre = document.createElement("pre"); pre.id = "probe";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


def probe(report: Path, tmp: Path, script: str = PROBE, anchor: str = "") -> dict:
    copy = tmp / "probe.html"
    copy.write_text(report.read_text().replace("</body>", script + "</body>"))
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
         "--virtual-time-budget=5000", "--window-size=1200,1600", copy.as_uri() + anchor],
        capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, flags=re.S)
    assert m, proc.stderr[-2000:]
    return json.loads(html.unescape(m.group(1)))


def test_first_screen_of_a_real_loss(tmp_path_factory: pytest.TempPathFactory,
                                     tmp_path: Path) -> None:
    """kip101-hw-truncation-loss under 0.10, run and checked for real."""
    run = checked_scenario_runs(tmp_path_factory)["kip101-hw-truncation-loss"]
    report = render_run(run.run_dir)
    shot = tmp_path / "loss.png"
    assert screenshot(report, shot) == []
    assert png_distinct_bytes(shot) > 16
    # The banner is painted in the loss colour (#b3261e), not a verdict's green.
    assert png_pixel(shot, 6, 6) == (0xB3, 0x26, 0x1E)
    got = probe(report, tmp_path)
    assert got["banner"] == "rgb(179, 38, 30)"
    assert got["headline"]["top"] < 40
    assert got["headline"]["text"].startswith("1 acknowledged write lost (t/0 offset 1) — "
                                              "the loss this scenario documents for 0.10")
    # The story and its causes are on the first screen (1200×1600), readable.
    assert got["story"]["top"] < 400 and got["causes"]["bottom"] < 1600
    assert "B follows C (epoch 1); it truncates to its HW 1 (rule: hw)" in got["story"]["text"]
    assert "The controller elects B leader of epoch 2" in got["story"]["text"]
    # So is the ghost row of offset 1, with what A, C and B held there.
    (ghost,) = got["ghosts"]
    assert 0 < ghost["top"] < 1600 and ghost["height"] > 10
    m1 = json.loads((run.run_dir / "run.json").read_text())["labels"]["m1"][0]
    assert ghost["text"].split()[:2] == ["1", str(m1)]  # offset, the acknowledged value
    assert ghost["text"].count(f"e0 · {m1}") == 3 and "truncated" in ghost["text"]
    # The scenario's source, its catalogue section, is on the first screen; a CJK
    # character (a scenario's text may be in any language) is drawn with a real glyph.
    assert "docs/catalogue.md#kip101-hw-truncation-loss" in got["source"]["text"]
    assert got["cjk"], "no CJK font: install Debian's fonts-noto-cjk (run-tests does)"


# Opened at a partition's table (report.html#grid-t-1): where its rows are drawn
# in the window, and the order of the partitions' tables.
GRID_PROBE = r"""<script>
addEventListener("load", () => {
  const h3 = document.getElementById(location.hash.slice(1));
  let table = h3.nextElementSibling;
  while (table.tagName !== "TABLE") table = table.nextElementSibling;
  const rows = Array.from(table.querySelectorAll("tr")).filter(r => r.querySelector("td.off"))
    .map(r => { const b = r.getBoundingClientRect();
      return {offset: r.querySelector("td.off").innerText, top: b.top, bottom: b.bottom,
              height: b.height, text: r.innerText, colour: getComputedStyle(
                r.querySelector("td.off")).color}; });
  const out = {rows, window: innerHeight,
               order: Array.from(document.querySelectorAll("h3[id^=grid-]")).map(h => h.id)};
  const pre = document.createElement("pre"); pre.id = "probe";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


def test_lost_offsets_of_a_chaos_run_on_the_first_screen_of_their_table(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """A sim chaos run whose acknowledged records were overwritten (not removed):
    opened at their partition's table, the lost offsets' rows are drawn within the
    first window, in the loss colour, with the struck acknowledged value."""
    run = checked_chaos_loss(tmp_path_factory)
    report = render_run(run.run_dir)
    part, offsets = CHAOS_LOSS
    anchor = "#grid-" + part.replace("/", "-")
    text = report.read_text()
    assert f'<h3 id="{anchor[1:]}">{part}</h3>' in text
    shot = tmp_path / "grid.png"
    assert screenshot(report, shot, anchor) == []
    assert png_distinct_bytes(shot) > 16
    got = probe(report, tmp_path, GRID_PROBE, anchor)
    assert got["order"][0] == anchor[1:]  # the anomalous partition's table comes first
    rows = {r["offset"]: r for r in got["rows"]}
    for off in offsets:
        row = rows[str(off)]
        assert 0 <= row["top"] and row["bottom"] <= got["window"] and row["height"] > 10, row
        assert row["colour"] == "rgb(179, 38, 30)", row
        acked = row["text"].split("\t")[1]
        assert re.fullmatch(r"\d+, \d+", acked), row  # the lost value, then what replaced it
