"""The HTML report: self-contained, names lost values, marks divergent offsets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest_spark import kip101_divergence

from checker.api import RunResult
from checker.errors import RunDirError
from reports.render import render_run


@pytest.fixture(scope="module")
def report(checked_batch: dict[str, RunResult]) -> str:
    run = checked_batch["report-divergence"].run_dir
    out = render_run(run)
    assert out == run / "check" / "report.html"
    return out.read_text()


@pytest.mark.spark
def test_report_is_self_contained(report: str) -> None:
    # Scripts are inline (plotly.js from the installed package) and fetch nothing;
    # their bodies mention URLs in strings (attributions), so check the markup only.
    assert "<script src" not in report and "<link" not in report
    assert "Plotly.newPlot" in report  # the charts are there, plotly.js inlined
    markup = re.sub(r"<script>.*?</script>", "", report, flags=re.S)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", markup)
    assert "@import" not in markup and "url(" not in markup


@pytest.mark.spark
def test_report_verdict_config_and_lost_values(report: str) -> None:
    assert 'class="banner valid"' in report
    assert "kip101-power-loss-divergence" in report and "4242" in report and "0.10" in report
    assert re.search(r"Lost acknowledged values:</b>\s*t/0: 101", report)
    assert "Value 101 was acknowledged" in report  # the explanation paragraph


@pytest.mark.spark
def test_report_grid_marks_divergent_offset(report: str) -> None:
    rows = re.findall(r'<tr class="divergent[^"]*">\s*<td class="off">(\d+)</td>', report)
    assert rows == ["1"]
    assert "e0 · 101" in report and "e1 · 102" in report
    assert "leader-elected" in report  # the protocol event list


def test_render_needs_check_results(tmp_path: Path) -> None:
    run = kip101_divergence(tmp_path, "unchecked").write()
    with pytest.raises(RunDirError, match="check the run first"):
        render_run(run)
