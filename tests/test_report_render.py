"""The HTML report: self-contained, says what happened in its headline, marks
divergent offsets; shows a down replica as down and an interrupted run as
interrupted; figures carry their units, charts their times in s/ms."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest_spark import TRUNCATED_LINE, checked_odd_runs, kip101_divergence

from checker.api import RunResult
from contract.rundir import RunDirError
from reports.render import render_index, render_run


@pytest.fixture(scope="module")
def report(checked_batch: dict[str, RunResult]) -> str:
    run = checked_batch["report-divergence"].run_dir
    out = render_run(run)
    assert out == run / "check" / "report.html"
    return out.read_text()


@pytest.mark.spark
def test_report_is_self_contained(report: str) -> None:
    # No script at all: the charts are inline SVG; nothing is fetched.
    assert "<script" not in report and "<link" not in report
    assert report.count("<svg ") >= 4  # timeline, replica progress, latency, throughput
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", report)
    assert "@import" not in report and "url(" not in report
    assert len(report.encode()) < 200_000


@pytest.mark.spark
def test_report_headline_config_and_lost_values(report: str) -> None:
    # The headline says what happened to the data, coloured by it; the verdict is
    # the second line.
    banner = re.search(r'<header class="banner (\S+)" id="headline">(.*?)</header>', report,
                       flags=re.S)
    assert banner is not None and banner.group(1) == "data-loss"
    assert re.search(r'<div class="headline">1 acknowledged write lost \(t/0 offset 1\); '
                     r"replicas A and B diverge \(t/0 offset 1\) — the loss and divergence "
                     r"this scenario documents for 0.10</div>", banner.group(2))
    # The badge says the loss matches the documentation, not "valid" (which reads
    # as "no data lost" on a red banner).
    assert ('<span class="verdict valid" title="verdict: valid">reproduced as documented'
            '</span> As expected: scenario kip101-power-loss-divergence documents '
            "divergence, lost-write under 0.10.") in banner.group(2)
    assert "kip101-power-loss-divergence" in report and "4242" in report
    assert "Value 101 was acknowledged" in report  # the explanation paragraph
    # The grid's acknowledged column strikes the lost value through.
    assert '<span class="lost-val">101</span>' in report


@pytest.mark.spark
def test_report_figures_have_units_and_times_are_readable(report: str) -> None:
    figures = dict(re.findall(r"<tr><th>([^<]+)</th><td>([^<]+)</td></tr>",
                              report.split("<h2>Figures</h2>", 1)[1]))
    assert re.fullmatch(r"[\d.]+ (ms|s)", figures["duration"])
    assert figures["sends"].endswith(" ops")
    assert re.fullmatch(r"[\d.]+ / [\d.]+ / [\d.]+ ms", figures["send latency p50 / p95 / p99"])
    assert "duration_ns" not in report
    timeline = report.split('<h2 id="timeline">', 1)[1]
    times = re.findall(r'<td class="t">([^<]+)</td>', timeline)
    assert times and all(re.fullmatch(r"[\d.]+ (ms|s)", t) for t in times)


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


# -- a run with a down replica, and an interrupted one (checked_odd_runs) ----------


def grid_rows(report: str) -> dict[int, list[tuple[str, str]]]:
    """The replica grid's rows: offset → [(td class, text)] for every replica cell
    and the final-log cell (one partition per run here)."""
    rows = {}
    for off, cells in re.findall(
        r'<tr class="[^"]*">\s*<td class="off">(\d+)</td>(.*?)</tr>', report, flags=re.S
    ):
        rows[int(off)] = [
            (re.sub(r"\s+", " ", cls).strip(), text)
            for cls, text in re.findall(r'<td(?: class="([^"]*)")?[^>]*>([^<]*)</td>', cells)
            if cls != "acked"
        ]
    return rows


def heads(report: str) -> dict[str, tuple[str, str]]:
    """The grid's replica column headers: broker → (th class, the state line)."""
    return {
        b: (re.sub(r"\s+", " ", cls).strip(), text)
        for cls, b, text in re.findall(r'<th class="([^"]*)">(\w+)<small>([^<]*)</small></th>',
                                       report)
    }


@pytest.fixture(scope="module")
def odd_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    return checked_odd_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def down_run(odd_runs: dict[str, RunResult]) -> Path:
    return odd_runs["down-replica"].run_dir


@pytest.mark.spark
def test_report_for_a_run_with_a_down_replica(down_run: Path) -> None:
    # B's state.json is what harness/run/collect.py writes for a down broker: no
    # leader_epoch, isr, replicas -- the report exists and says what B is.
    assert json.loads((down_run / "replicas/B/state.json").read_text())["source"] == "data-dir"
    report = render_run(down_run).read_text()
    assert '<span class="verdict valid" title="verdict: valid">' in report  # both expected
    assert '<header class="banner data-loss"' in report
    h = heads(report)
    assert h["B"] == ("down", "down · read from its data directory · LEO 2 · HW checkpoint 1")
    assert h["A"] == ("", "leader · epoch 1 · LEO 2 · HW 2 (ckpt 2) · ISR A")
    assert "C" not in h  # C hosts no partition: no column for it
    # B's log cells as read from its disk: 101 (lost) at offset 1, above its HW checkpoint
    rows = grid_rows(report)
    assert [t for _, t in rows[0]] == ["e0 · 100", "e0 · 100", "100"]
    (a_cls, a), (b_cls, b), (_, final) = rows[1]
    assert (a, b, final) == ("e1 · 102", "e0 · 101", "102")
    assert b_cls == "above-hw lost-cell" and a_cls == ""
    assert "B was down at the end of the run: its log and HW checkpoint were read from " \
           "its data directory" in report
    assert "C hosts no partition: its state.json lists none." in report


@pytest.mark.spark
def test_report_without_a_state_json(down_run: Path, tmp_path: Path) -> None:
    # Robust to files the checker would refuse but a report may meet afterwards:
    # B's state.json gone, A's listing no partition while A's log has records.
    run = tmp_path / "copy"
    shutil.copytree(down_run, run)
    (run / "replicas/B/state.json").unlink()
    (run / "replicas/A/state.json").write_text('{"node": "A", "partitions": []}\n')
    report = render_run(run).read_text()
    h = heads(report)
    assert h["A"] == ("stateless", "not in its state.json · log only")
    assert h["B"] == ("stateless", "no state.json · log only")
    assert [t for _, t in grid_rows(report)[1]] == ["e1 · 102", "e0 · 101", "102"]
    assert "B has no readable state.json: its log is shown without its role, LEO or HW." \
        in report
    assert "A hosts no partition" not in report  # it has a log for t/0


@pytest.mark.spark
def test_report_states_an_interrupted_write_first(odd_runs: dict[str, RunResult]) -> None:
    run = odd_runs["interrupted"].run_dir
    summary = json.loads((run / "check/summary.json").read_text())
    assert summary["truncated"][0]["line"] == 13  # the checker found the cut-off line
    report = render_run(run).read_text()
    top, rest = report.split("<h2>Anomalies</h2>", 1)  # the first screen: before anomalies
    banner = top.split('<header class="banner', 1)[1].split("<main>", 1)[0]
    assert "interrupted mid-write</b> history.jsonl line 13 is cut off" in banner
    box = re.search(r'<div class="interrupted-run">(.*?)\n</div>', top, flags=re.S)
    assert box is not None
    text = html.unescape(re.sub(r"<[^>]+>", "", box.group(1)))
    assert "history.jsonl ends in a cut-off line 13" in text
    assert TRUNCATED_LINE[:40] in text
    assert "the run was interrupted while writing it" in text
    assert "run.json: the run is incomplete: the workload process was killed (SIGKILL)." in text
    # said once, prominently: the checker's own truncation note is not repeated below
    assert "last line 13 is truncated" not in report
    assert "t/0: no final read recorded" in top  # the other notes stay


@pytest.mark.spark
def test_index_marks_the_interrupted_run(odd_runs: dict[str, RunResult], tmp_path: Path) -> None:
    for r in odd_runs.values():
        render_run(r.run_dir)
    out = render_index([r.summary for r in odd_runs.values()], tmp_path / "index.html")
    rows = {
        m.group(2): m.group(1)
        for m in re.finditer(r"<tr class=\"[\w-]+\">\s*<td>(.*?)</td>.*?<a href=\"[^\"]+\">"
                             r"([\w-]+)</a>",
                             out.read_text(), flags=re.S)
    }
    assert set(rows) == {"down-replica", "interrupted"}  # both link their report
    assert 'class="tag interrupted" title="history.jsonl line 13 is cut off"' in rows["interrupted"]
    assert "interrupted" not in rows["down-replica"]


@pytest.mark.spark
def test_report_shows_failed_figure_assertion_first(checked_batch: dict[str, RunResult],
                                                    tmp_path: Path) -> None:
    """A scenario's figure assertion that failed makes the judged verdict invalid:
    the banner says which and what was measured, and the assertions table lists
    each (harness.run.assertions.judge writes check/assertions.json for this check)."""
    from harness.run.assertions import judge

    src = checked_batch["report-divergence"]
    run = tmp_path / "asserted"
    shutil.copytree(src.run_dir, run)
    meta = json.loads((run / "run.json").read_text())
    meta["assertions"] = [
        {"figure": "leader_elections", "ge": 1, "line": 7, "note": "someone was elected"},
        {"figure": "isr_shrinks", "ge": 40, "line": 8},  # no note: the cell stays empty
    ]
    (run / "run.json").write_text(json.dumps(meta))
    verdict, failed = judge(run, src.verdict)
    assert verdict == "invalid" and len(failed) == 1 and "isr_shrinks >= 40" in failed[0]
    page = render_run(run).read_text()
    banner = re.search(r'<header class="banner \S+" id="headline">(.*?)</header>', page,
                       flags=re.S).group(1)
    assert '<span class="verdict invalid" title="verdict: invalid">unexpected</span>' in banner
    assert re.search(r"assertion isr_shrinks &gt;= 40 failed, was \d+", banner), banner
    rows = re.findall(r'<tr class="(held|failed)"><td><code>([^<]+)</code></td><td>([^<]+)</td>',
                      page)
    assert [(c, html.unescape(t)) for c, t, _ in rows] == [
        ("held", "leader_elections >= 1"), ("failed", "isr_shrinks >= 40")]
    # A later check without judging (another checked_at) is not shown as judged.
    summary = json.loads((run / "check" / "summary.json").read_text())
    summary["checked_at"] = "later"
    (run / "check" / "summary.json").write_text(json.dumps(summary))
    page = render_run(run).read_text()
    assert '<span class="verdict invalid"' not in page and 'class="failed"' not in page


def test_figure_units_agree_with_one() -> None:
    """`1 event`, not `1 events` (issue 45, item 9); other counts keep the plural."""
    from reports.units import figure_row

    assert figure_row("isr_shrinks", 1) == ("ISR shrinks by a leader", "1 event")
    assert figure_row("isr_shrinks", 3) == ("ISR shrinks by a leader", "3 events")
    assert figure_row("leader_elections", 1) == ("leader elections", "1 election")
    assert figure_row("send_latency_ms_max", 1) == ("send latency max", "1 ms")
