"""The verdicts of runs that did not finish (incomplete) or cannot be read (error),
in one batch with ordinary runs: an unfinished run's prefix is judged for what
it shows, a malformed run is set aside with its first bad line and the rest of
the batch is checked as if it had not been there. JUnit, the Parquet results and
summary.json say the same. Real Spark, one check_runs call for the module."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest_spark import clean, kip101_loss

from checker.api import RunResult, check_runs, write_junit
from checker.results import write_results
from checker.spark import get_session
from checker.synth import RunBuilder
from checker.verdict import batch_exit_code, decide

# -- the rules, without Spark -----------------------------------------------------


def test_unfinished_run_is_incomplete_unless_it_shows_a_violation() -> None:
    scen = "kip101-hw-truncation-loss"
    for status in ("incomplete", "crashed", "running"):
        v = decide([], ["lost-write"], scen, status)
        assert (v.verdict, v.exit_code, v.missing, v.unjudged) == (
            "incomplete", 3, [], ["lost-write"])
        v = decide(["lost-write"], ["lost-write"], scen, status)
        assert (v.verdict, v.exit_code, v.unjudged) == ("incomplete", 3, [])
        v = decide(["divergence"], [], None, status)
        assert (v.verdict, v.exit_code, v.unexpected) == ("invalid", 1, ["divergence"])
    # A finished run (or one without a status: older and synthetic runs) as before.
    for status in ("complete", None):
        assert decide([], ["lost-write"], scen, status).verdict == "not-reproduced"
        assert decide([], ["lost-write"], None, status).verdict == "valid"


def test_batch_exit_status() -> None:
    assert batch_exit_code([]) == 0
    assert batch_exit_code(["valid", "valid"]) == 0
    assert batch_exit_code(["valid", "incomplete"]) == 3
    assert batch_exit_code(["incomplete", "not-reproduced"]) == 1  # a violation outranks
    assert batch_exit_code(["invalid", "incomplete", "error"]) == 2  # a malformed run, all


# -- one batch ---------------------------------------------------------------------

SCENARIO = "kip101-hw-truncation-loss"


def small(rb: RunBuilder) -> RunBuilder:
    rb.send(0, 1, 0).send(0, 2, 1)
    rb.replica("A", [(0, 1), (0, 2)], role="leader")
    rb.replica("B", [(0, 1), (0, 2)], role="follower", leader="A")
    rb.event("ctl", "leader-elected", topic="t", partition=0, leader="A", epoch=0)
    rb.final_read([1, 2])
    return rb


def replace_line(path: Path, n: int, text: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[n - 1] = text + "\n"
    path.write_text("".join(lines))


def build(root: Path) -> dict[str, Path]:
    runs: dict[str, Path] = {}
    runs["clean"] = clean(root, "clean", [], None).write()
    # Interrupted before the scenario's loss: expected lost-write unseen -> not judged.
    rb = clean(root, "incomplete-missing", ["lost-write"], SCENARIO)
    rb.meta.update(status="incomplete", error="interrupted by SIGTERM; run incomplete")
    runs["incomplete-missing"] = rb.write()
    # A loss nobody allows, in the prefix of an interrupted run: a violation.
    rb = kip101_loss(root, "incomplete-unexpected", [], None)
    rb.meta.update(status="incomplete", error="wait timed out")
    runs["incomplete-unexpected"] = rb.write()
    # The harness died after the documented loss: listed, still incomplete.
    rb = kip101_loss(root, "crashed-expected", ["lost-write"], SCENARIO)
    rb.meta.update(status="crashed", error="the harness died (owner pid 4711 is gone)")
    runs["crashed-expected"] = rb.write()
    # Malformed: a bad history line (and a cut-off last line after it, not the error).
    runs["bad-history"] = small(RunBuilder(root / "bad-history")).write()
    replace_line(runs["bad-history"] / "history.jsonl", 3, "this is not json")
    with (runs["bad-history"] / "history.jsonl").open("a") as fh:
        fh.write('{"index": 99, "ti')
    runs["bad-log"] = small(RunBuilder(root / "bad-log")).write()
    replace_line(runs["bad-log"] / "replicas/B/log.jsonl", 2,
                 '{"topic": "t", "partition": 0, "offset": 1}')
    runs["bad-events"] = small(RunBuilder(root / "bad-events")).write()
    replace_line(runs["bad-events"] / "events.jsonl", 1, '{"time": 5, "node": "ctl"}')
    runs["bad-run-json"] = small(RunBuilder(root / "bad-run-json")).write()
    (runs["bad-run-json"] / "run.json").write_text('{\n  "protocol": "0.10",\n  "expect": [,]\n}\n')
    return runs


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Path],
                                                             dict[str, RunResult]]:
    root = tmp_path_factory.mktemp("verdicts")
    runs = build(root)
    results = check_runs([root])
    assert [r.run_dir for r in results] == sorted(p.resolve() for p in runs.values())
    by_dir = {r.run_dir: r for r in results}
    return runs, {name: by_dir[p.resolve()] for name, p in runs.items()}


def summary(run: Path) -> dict:
    return json.loads((run / "check" / "summary.json").read_text())


@pytest.mark.spark
def test_incomplete_run_missing_an_expected_kind(batch) -> None:
    runs, res = batch
    r = res["incomplete-missing"]
    assert (r.verdict, r.exit_code, r.status) == ("incomplete", 3, "incomplete")
    assert (r.missing, r.unjudged, r.anomalies) == ([], ["lost-write"], [])
    s = summary(runs["incomplete-missing"])
    assert (s["verdict"], s["exit_code"], s["status"]) == ("incomplete", 3, "incomplete")
    assert (s["missing"], s["unjudged"]) == ([], ["lost-write"])
    assert ("run.json: the run did not finish (status incomplete: interrupted by SIGTERM; run "
            "incomplete); the recorded prefix was checked, and lost-write, expected but not "
            "seen in it, not judged") in s["notes"]


@pytest.mark.spark
def test_unexpected_anomaly_in_a_prefix_is_invalid(batch) -> None:
    _, res = batch
    r = res["incomplete-unexpected"]
    assert (r.verdict, r.exit_code, r.unexpected) == ("invalid", 1, ["lost-write"])
    assert [a["witness"]["value"] for a in r.anomalies] == [101]


@pytest.mark.spark
def test_crashed_run_lists_what_its_prefix_showed(batch) -> None:
    runs, res = batch
    r = res["crashed-expected"]
    assert (r.verdict, r.exit_code, r.status, r.unjudged) == ("incomplete", 3, "crashed", [])
    assert [(a["kind"], a["expected"], a["witness"]["value"]) for a in r.anomalies] == [
        ("lost-write", True, 101)]
    assert summary(runs["crashed-expected"])["found"] == {"lost-write": 1}


@pytest.mark.spark
@pytest.mark.parametrize(("name", "file", "line", "what"), [
    ("bad-history", "history.jsonl", 3, "not JSON"),
    ("bad-log", "replicas/B/log.jsonl", 2, "missing field 'value'"),
    ("bad-events", "events.jsonl", 1, "missing field 'type'"),
    ("bad-run-json", "run.json", 3, "not valid JSON"),
])
def test_malformed_run_is_set_aside(batch, name: str, file: str, line: int, what: str) -> None:
    runs, res = batch
    r = res[name]
    assert (r.verdict, r.exit_code, r.anomalies) == ("error", 2, [])
    assert r.error is not None and (r.error.file, r.error.line) == (file, line)
    msg = str(r.error)
    assert msg.startswith(f"run {runs[name].resolve()}: {file} line {line}: ") and what in msg
    s = summary(runs[name])
    assert (s["verdict"], s["exit_code"], s["error"]) == ("error", 2, msg)
    assert (s["error_file"], s["error_line"]) == (file, line)


@pytest.mark.spark
def test_the_rest_of_the_batch_is_checked_as_usual(batch) -> None:
    runs, res = batch
    r = res["clean"]
    assert (r.verdict, r.exit_code, r.anomalies) == ("valid", 0, [])
    figs = summary(runs["clean"])["figures"]
    # Its own 32 sends only: no row of a set-aside run leaked into it.
    assert (figs["sends"], figs["sends_ok"]) == (32, 30)
    assert batch_exit_code(x.verdict for x in res.values()) == 2


@pytest.mark.spark
def test_junit_errors_and_failures(batch, tmp_path: Path) -> None:
    _, res = batch
    suite = ET.parse(write_junit(list(res.values()), tmp_path / "junit.xml")).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("8", "1", "6")
    cases = {c.find("system-out").text.split(":")[0].removeprefix("run "): c
             for c in suite.findall("testcase")}
    err = cases["incomplete-missing"].find("error")
    assert err is not None and err.get("type") == "incomplete"
    assert err.get("message").startswith("incomplete: the run did not finish (status "
                                         "incomplete)")
    assert "Not judged: lost-write" in err.text
    assert cases["crashed-expected"].find("error").get("type") == "incomplete"
    assert cases["incomplete-unexpected"].find("failure").get("type") == "invalid"
    bad = cases["bad-history"].find("error")
    assert bad.get("type") == "error" and "history.jsonl line 3" in bad.get("message")
    # an unreadable run was not checked: it is no "no anomaly"
    said = cases["bad-history"].find("system-out").text
    assert said.startswith("run bad-history: not checked, run unreadable (verdict error)"), said
    # run.json unreadable: the case is named by the run directory.
    assert cases["bad-run-json"].get("name") == "bad-run-json [?]"
    assert cases["clean"].find("error") is None and cases["clean"].find("failure") is None


@pytest.mark.spark
def test_results_table_carries_verdict_status_and_error(batch, tmp_path: Path) -> None:
    _, res = batch
    spark = get_session()
    table = write_results(spark, list(res.values()), tmp_path / "results")
    rows = {r.run_id: r for r in spark.read.parquet(str(table / "runs")).collect()}
    assert len(rows) == 8
    assert (rows["incomplete-missing"].verdict, rows["incomplete-missing"].status,
            rows["incomplete-missing"].exit_code) == ("incomplete", "incomplete", 3)
    assert (rows["crashed-expected"].verdict, rows["crashed-expected"].lost_write) == (
        "incomplete", 1)
    assert rows["bad-log"].verdict == "error" and "log.jsonl line 2" in rows["bad-log"].error
    assert rows["clean"].error is None
