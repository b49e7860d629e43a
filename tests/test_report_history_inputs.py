"""The story's history lines, the replica grid and the consumer flag the check writes
in check/report-inputs.json (checker/reportops.py, checker/reportgrid.py): a report
made from them is the report made from history.jsonl and the replica logs, the
story and the grid read neither file, and the big-run path (inside Spark) computes
the grid the driver computes."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest_spark import checked_chaos_loss

from checker import reportgrid
from checker.api import check_runs
from contract import CHECK, REPORT_INPUTS_JSON
from reports import grid, story
from reports.render import _figures, _replica_notes, render_run
from reports.rundata import load

pytestmark = pytest.mark.spark

_MINE = ("story", "grid", "consumers")


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory):
    return checked_chaos_loss(tmp_path_factory)


def _inputs(run_dir) -> dict:
    return json.loads((run_dir / CHECK / REPORT_INPUTS_JSON).read_text())


def test_the_story_and_the_grid_read_neither_the_history_nor_the_logs(chaos) -> None:
    data = load(chaos.run_dir)
    assert all(k in data.inputs for k in _MINE)
    st, facts = story.build(data)
    grids = grid.build(data, facts)
    _figures(data.summary, [], data.inputs["consumers"])
    _replica_notes(data)
    assert st.lines and chaos.anomalies  # a run with a story to tell
    assert any(g.rows for g in grids)
    assert callable(data._history) and callable(data._logs)  # never read


def test_the_report_from_the_checks_lines_is_the_report_from_the_files(chaos, tmp_path
                                                                        ) -> None:
    with_inputs = render_run(chaos.run_dir).read_text()
    copy = tmp_path / "run"
    shutil.copytree(chaos.run_dir, copy)
    body = _inputs(copy)
    for k in _MINE:
        del body[k]  # as a run checked before the check picked them
    (copy / CHECK / REPORT_INPUTS_JSON).write_text(json.dumps(body))
    assert load(copy).inputs.get("grid") is None
    without = render_run(copy).read_text()
    assert without.replace(str(copy), str(chaos.run_dir)) == with_inputs


def test_the_story_keeps_few_lines_and_cuts_the_final_reads(chaos) -> None:
    body = _inputs(chaos.run_dir)
    ops = body["story"]["ops"]
    history_lines = sum(1 for _ in open(chaos.run_dir / "history.jsonl", "rb"))
    assert 0 < len(ops) < history_lines // 10
    finals = [o for o in ops if o.get("process") == "final" and o.get("type") == "ok"]
    assert finals and body["story"]["final_records"]
    for o in finals:
        seen = body["story"]["final_records"].get(str(o["index"]))
        if seen is not None:
            assert len(o["records"]) < seen[0]


def test_the_grid_reduced_in_spark_is_the_grid_reduced_in_the_driver(chaos, tmp_path,
                                                                     monkeypatch) -> None:
    copy = tmp_path / "run"
    shutil.copytree(chaos.run_dir, copy)
    monkeypatch.setattr(reportgrid, "BIG_RUN_BYTES", 0)  # every run is a big one
    (result,) = check_runs([copy])
    assert result.verdict == chaos.verdict
    assert _inputs(copy)["grid"] == _inputs(chaos.run_dir)["grid"]


def test_a_small_runs_lines_and_grid_from_the_driver_give_the_same_report(tmp_path) -> None:
    from checker.synth import sample_run

    run = sample_run(tmp_path / "run")
    check_runs([run])
    assert all(k in _inputs(run) for k in _MINE)
    with_inputs = render_run(run).read_text()
    body = _inputs(run)
    for k in _MINE:
        del body[k]
    (run / CHECK / REPORT_INPUTS_JSON).write_text(json.dumps(body))
    assert render_run(run).read_text() == with_inputs
