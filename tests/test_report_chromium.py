"""The report opened in headless Chromium: no console errors, a non-blank screenshot."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from conftest import skip_unless_required
from conftest_spark import checked_odd_runs

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


def png_distinct_bytes(path: Path) -> int:
    """Distinct byte values in the decompressed image data (1-2 for a blank page)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)))


def screenshot(report: Path, shot: Path) -> list[str]:
    """Open the report in headless Chromium, save a PNG; the console's error lines."""
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
            report.as_uri(),
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
