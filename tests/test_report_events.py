"""The report's inputs the check computes from events.jsonl and trace.jsonl
(checker/reportevents.py, check/report-inputs.json "events", "progress" and
"trace"): the events kept are the run's own, with their line indexes; a report
rendered from them is the report rendered from the files, on both paths of the
trace table's ops (collected whole, and selected in Spark for a big run)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest_spark import checked_chaos_loss

from checker import reportevents
from checker.api import check_runs
from contract import CHECK, REPORT_INPUTS_JSON
from contract.rundir import read_events
from reports import charts, render
from reports.render import MAX_EVENTS, MAX_TRACE_ROWS, ROUTINE, render_run
from reports.rundata import load

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory):
    return checked_chaos_loss(tmp_path_factory)


def _inputs(run_dir) -> dict:
    return json.loads((run_dir / CHECK / REPORT_INPUTS_JSON).read_text())


def test_the_check_and_the_report_agree_on_their_limits() -> None:
    """The checker may not import the report: its copies of the report's limits."""
    assert (reportevents.MAX_EVENTS, reportevents.ROUTINE, reportevents.MAX_TRACE_ROWS,
            reportevents.MAX_PROGRESS) == (render.MAX_EVENTS, render.ROUTINE,
                                           render.MAX_TRACE_ROWS, charts.MAX_PROGRESS)


def test_the_check_keeps_the_events_the_report_shows_with_their_line_indexes(chaos) -> None:
    events = read_events(chaos.run_dir)
    assert len(events) > MAX_EVENTS  # the path that leaves HW moves out
    kept = _inputs(chaos.run_dir)["events"]
    assert all(events[i] == e for i, e in kept["kept"])
    assert {i for i, e in enumerate(events) if e["type"] not in ROUTINE} <= {
        i for i, _ in kept["kept"]}
    routine = sum(1 for e in events if e["type"] in ROUTINE)
    assert 0 < kept["left_out"] < routine
    assert kept["left_out"] + len(kept["kept"]) == len(events)
    assert load(chaos.run_dir).events == []  # the report reads no events.jsonl


def test_the_trace_table_and_progress_columns_are_the_checks(chaos) -> None:
    ins = _inputs(chaos.run_dir)
    table = ins["trace"]
    assert len(table["rows"]) == MAX_TRACE_ROWS < table["total"]
    assert ins["progress"]["traced"] and ins["progress"]["parts"]
    # a long replica's states are drawn in columns of equal time, each spanning several
    cols = [c for node_cols in ins["progress"]["parts"].values() for c in node_cols.values()]
    assert all(len(c) <= reportevents.progress.PROGRESS_COLUMNS for c in cols)
    assert any(hw[0] < hw[1] or leo[0] < leo[1] for c in cols for _, hw, leo in c)


def test_a_big_runs_progress_columns_folded_in_spark_are_the_collected_ones(
        chaos, tmp_path, monkeypatch) -> None:
    """Over BIG_HISTORY_BYTES the charted partitions' acks are folded in Spark,
    one (run, partition) per group: only the columns reach the driver, and they
    are the columns of the collected path."""
    run = tmp_path / "run"
    shutil.copytree(chaos.run_dir, run)
    folded: list[dict] = []
    in_spark = reportevents._progress_in_spark

    def recorded(*args, **kwargs):  # the real fold, its result kept to see it ran
        folded.append(in_spark(*args, **kwargs))
        return folded[-1]

    monkeypatch.setattr(reportevents, "_progress_in_spark", recorded)
    monkeypatch.setattr(reportevents, "BIG_HISTORY_BYTES", 0)  # every run is big
    check_runs([run])
    # every charted partition had acks, so each one's columns came from Spark
    spark_cols = _inputs(run)["progress"]
    assert spark_cols["parts"]
    assert [sorted(parts) for by_run in folded for parts in by_run.values()] == [
        sorted(spark_cols["parts"])]
    monkeypatch.setattr(reportevents, "BIG_HISTORY_BYTES", 1 << 40)  # every run is small
    check_runs([run])
    assert len(folded) == 1  # the acks were collected
    assert _inputs(run)["progress"] == spark_cols


@pytest.mark.parametrize("big", [False, True], ids=["collected", "selected-in-spark"])
def test_the_report_from_the_checks_inputs_is_the_report_from_the_files(
        chaos, tmp_path, monkeypatch, big: bool) -> None:
    run = tmp_path / "run"
    shutil.copytree(chaos.run_dir, run)
    if big:  # the big-run path on this run: the trace table's ops chosen in Spark
        monkeypatch.setattr(reportevents, "BIG_HISTORY_BYTES", 0)
        check_runs([run])
    with_inputs = render_run(run).read_text()
    ins = _inputs(run)
    for key in ("events", "progress", "trace"):
        del ins[key]  # as a check before these inputs: the report reads the files
    (run / CHECK / REPORT_INPUTS_JSON).write_text(json.dumps(ins))
    assert load(run).events  # read from events.jsonl
    assert render_run(run).read_text() == with_inputs
