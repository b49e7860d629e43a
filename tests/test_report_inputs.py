"""The report's inputs the check computes in Spark (check/report-inputs.json,
checker/reportinputs.py): equal to what the report computes from the history in
Python (checker.clientops), bounded however long the run, and a report rendered
from them is the report rendered from the history; a check without a report,
then a render, gives the report a check with one gives."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from conftest_spark import checked_chaos_loss, checked_chaos_valid, finish, resent

from checker import clientops
from checker.api import check_runs
from contract import CHECK, REPORT_INPUTS_JSON
from reports.render import render_run
from reports.rundata import load
from reports.story import RunFacts

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory):
    return checked_chaos_loss(tmp_path_factory)


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory):
    return checked_chaos_valid(tmp_path_factory)


def _python_reduction(run_dir) -> dict:
    """What the charts compute from history.jsonl and events.jsonl without the check's."""
    data = load(run_dir)
    ops = clientops.ops_of(data.history)
    facts = RunFacts(data)
    end = max([o["end"] for o in ops] + [(it.time or 0) / 1e9 for it in facts.items.values()],
              default=0.0)
    return clientops.reduce(ops, end)


def _plain(v):
    """JSON as Spark's history schema reads it: a record's value is a string."""
    return json.loads(json.dumps(v), object_hook=lambda d: {
        k: (None if x is None else str(x)) if k == "value" else x for k, x in d.items()})


def test_sparks_reduction_equals_pythons(chaos) -> None:
    spark = json.loads((chaos.run_dir / CHECK / REPORT_INPUTS_JSON).read_text())
    assert spark["checked_at"] == chaos.summary["checked_at"]
    python = _python_reduction(chaos.run_dir)
    assert python["count"] > clientops.MAX_POINTS  # the binned path, not the listed one
    assert python["not_ok"] > 0 and python["failed"]
    assert _plain(spark["client_ops"]) == _plain(python)


def test_the_charts_count_every_send_a_producer_had_in_flight(chaos) -> None:
    """A producer keeps several sends in flight per process: each is an op of its
    own (paired by value), not only the one completing after the last invoke."""
    ops = json.loads((chaos.run_dir / CHECK / REPORT_INPUTS_JSON).read_text())["client_ops"]
    figures = chaos.summary["figures"]
    sends_done = figures["sends_ok"] + figures["sends_fail"] + figures["sends_info"]
    assert sends_done > 3 * len(ops["processes"])  # many sends a process
    assert ops["count"] >= sends_done + figures["polls_ok"]
    assert sum(sum(c) for c in ops["throughput"].values()) == ops["count"]


def test_a_small_runs_reduction_lists_every_op(tmp_path) -> None:
    from checker.synth import sample_run

    run = sample_run(tmp_path / "run")
    (result,) = check_runs([run])
    spark = json.loads((run / CHECK / REPORT_INPUTS_JSON).read_text())["client_ops"]
    python = _python_reduction(run)
    assert 0 < python["count"] <= clientops.MAX_POINTS
    assert len(spark["listed"]) == python["count"]
    assert _plain(spark) == _plain(python)


def test_a_resent_values_ops_are_paired_over_its_process(tmp_path) -> None:
    """A value sent twice is not a plain pair (checker.sends): its lines are
    paired over its process's lines, beside the polls -- as the report pairs them."""
    run = resent(tmp_path).write()
    check_runs([run])
    spark = json.loads((run / CHECK / REPORT_INPUTS_JSON).read_text())["client_ops"]
    python = _python_reduction(run)
    assert [o["value"] for o in python["listed"] if o["f"] == "send"].count(5) == 2
    assert any(o["f"] == "poll" for o in python["listed"])
    assert _plain(spark) == _plain(python)


def test_a_process_not_named_by_an_integer_keeps_its_name(tmp_path) -> None:
    """Sends pair by value under a number's text; a process named "07" or "p1"
    is paired over its lines instead, and keeps its name in the charts."""
    from checker.synth import RunBuilder

    rb = RunBuilder(tmp_path / "named", protocol="latest", expect=[])
    for i, proc in enumerate(["07", "p1", 2, "07", "p1", 2]):
        rb.send(proc, 100 + i, i)
    run = finish(rb, [100 + i for i in range(6)]).write()
    check_runs([run])
    spark = json.loads((run / CHECK / REPORT_INPUTS_JSON).read_text())["client_ops"]
    python = _python_reduction(run)
    assert {o["process"] for o in spark["listed"] if o["f"] == "send"} == {"07", "p1", "2"}
    assert _plain(spark) == _plain(python)


def test_the_reduction_does_not_grow_with_the_run() -> None:
    """A 600 s run's worth of operations reduces to kilobytes."""
    ops = [{"process": str(i % 4), "f": "send", "type": "info" if i % 97 == 0 else "ok",
            "start": i / 500, "end": i / 500 + 0.002, "value": i, "offset": i, "index": i}
           for i in range(300_000)]
    reduced = clientops.reduce(ops, 600.0)
    assert reduced["listed"] == [] and len(reduced["failed"]) == clientops.MAX_POINTS // 2
    assert len(json.dumps(reduced, separators=(",", ":"))) < 100_000


def test_the_report_from_the_reduction_is_the_report_from_the_history(chaos, tmp_path) -> None:
    with_inputs = render_run(chaos.run_dir).read_text()
    copy = tmp_path / "run"
    shutil.copytree(chaos.run_dir, copy)
    (copy / CHECK / REPORT_INPUTS_JSON).unlink()  # as a run checked by an older checker
    assert load(copy).client_ops is None
    without = render_run(copy).read_text()
    assert without.replace(str(copy), str(chaos.run_dir)) == with_inputs


def _no_times(html: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+\d:Z]*", "<time>", html)


def test_a_check_without_a_report_then_a_render_gives_the_same_report(chaos, tmp_path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(chaos.run_dir, copy)
    first = render_run(copy).read_text()
    (copy / CHECK / "report.html").unlink()
    (result,) = check_runs([copy])  # what `isrlab check --no-report` runs
    assert not (copy / CHECK / "report.html").exists()
    assert load(copy).client_ops is not None  # this check's inputs, not the last one's
    assert _no_times(render_run(copy).read_text()) == _no_times(first)


def test_a_valid_runs_story_reads_runs_of_offsets_not_every_send(valid, tmp_path) -> None:
    """A run without anomalies: the check hands the story of what kept the records
    at risk the runs of offsets at risk (checker.reportrisk) and the sends at their
    ends, not every acknowledged send there; the story and the whole report are
    the ones the report builds from the history."""
    from reports import story

    assert valid.summary["verdict"] == "valid" and not valid.summary["found"]
    inputs = json.loads((valid.run_dir / CHECK / REPORT_INPUTS_JSON).read_text())
    risk = inputs["story"]["risk"]
    at_risk = sum(b - a for runs in risk.values() for a, b in runs)
    assert len(risk) >= 3 and at_risk > 100
    sends = [op for op in inputs["story"]["ops"] if op.get("f") == "send"]
    assert 0 < len(sends) < at_risk / 2
    with_inputs, _ = story.build(load(valid.run_dir))
    copy = tmp_path / "run"
    shutil.copytree(valid.run_dir, copy)
    (copy / CHECK / REPORT_INPUTS_JSON).unlink()
    from_history, _ = story.build(load(copy))
    kept = [c for c in with_inputs.causes if c.kind == "kept"]
    assert kept
    assert [(c.title, c.offsets, [s.label for s in c.steps]) for c in with_inputs.causes] == \
        [(c.title, c.offsets, [s.label for s in c.steps]) for c in from_history.causes]
    assert [ln.text for ln in with_inputs.lines] == [ln.text for ln in from_history.lines]
    assert render_run(copy).read_text().replace(str(copy), str(valid.run_dir)) == \
        render_run(valid.run_dir).read_text()
