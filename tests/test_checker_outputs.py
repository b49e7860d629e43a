"""CI and trend outputs of a batch: JUnit XML, the Parquet results table, figures."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from checker.api import MAX_LISTED, RunResult, check_runs, write_junit
from checker.results import write_results
from checker.spark import get_session
from checker.synth import RunBuilder
from contract import ANOMALIES_JSON, CHECK, SUMMARY_JSON

pytestmark = pytest.mark.spark


def test_junit_one_case_per_run(checked_batch: dict[str, RunResult], tmp_path: Path) -> None:
    results = list(checked_batch.values())
    path = write_junit(results, tmp_path / "ci" / "junit.xml")
    suite = ET.parse(path).getroot()
    cases = suite.findall("testcase")
    assert len(cases) == len(results) and suite.get("tests") == str(len(results))
    by_name = {c.get("name"): c for c in cases}
    assert "kip101-hw-truncation-loss [0.10] seed 1" in by_name
    failed = [c for c in cases if c.find("failure") is not None]
    assert suite.get("failures") == str(len(failed))
    assert len(failed) == sum(r.verdict != "valid" for r in results)
    # The unexpected lost write carries its explanation.
    texts = [c.find("failure").text or "" for c in failed]
    assert any("Value 101 was acknowledged" in t for t in texts)
    assert any(
        "expected lost-write did not occur" in c.find("failure").get("message") for c in failed
    )


def test_results_table(checked_batch: dict[str, RunResult], tmp_path: Path) -> None:
    results = list(checked_batch.values())
    table = write_results(get_session(), results, tmp_path / "results")
    spark = get_session()
    runs = spark.read.parquet(str(table / "runs"))
    assert runs.count() == len(results)
    row = runs.filter("run_id = 'divergence'").collect()[0]
    assert (row.verdict, row.divergence, row.lost_write, row.protocol) == ("valid", 1, 1, "0.10")
    anomalies = spark.read.parquet(str(table / "anomalies"))
    assert anomalies.count() == sum(len(r.anomalies) for r in results)


def test_event_and_latency_figures(checked_batch: dict[str, RunResult]) -> None:
    figs = checked_batch["report-divergence"].summary["figures"]
    assert (figs["isr_shrinks"], figs["isr_expands"], figs["leader_elections"]) == (1, 0, 1)
    # The synthetic clock spaces every op 1 ms apart: invoke → completion is 1 ms.
    assert figs["send_latency_ms_p50_p95_p99"] == [1.0, 1.0, 1.0]
    assert figs["send_latency_ms_max"] == 1.0


def test_availability_per_fault_window(checked_batch: dict[str, RunResult]) -> None:
    # report-divergence: sends 100, 101; pause A; power-cycle B; send 102.
    phases = checked_batch["report-divergence"].summary["figures"]["availability"]
    assert [(p["phase"], p["sends"], p["ok"]) for p in phases] == [
        ("no fault", 2, 2), ("pause A", 0, 0), ("power-cycle B", 1, 1)]
    assert phases[-1]["end_s"] is None


def test_send_figures_pair_a_value_sent_twice(checked_batch: dict[str, RunResult]) -> None:
    # resent: 11 sends, all acked; value 5 twice, its second send taking 3 ms
    # (a poll by another process in between). Pairing by value alone would make
    # one 15 ms op of it (first invoke at line 8, last completion at line 23).
    r = checked_batch["resent"]
    assert (r.verdict, [a["kind"] for a in r.anomalies]) == ("valid", ["duplicate"])
    figs = r.summary["figures"]
    assert (figs["sends"], figs["sends_ok"], figs["ops"]) == (11, 11, 2 * 11 + 2 + 2)
    assert figs["send_latency_ms_max"] == 3.0
    assert figs["send_latency_ms_p50_p95_p99"][0] == 1.0
    assert [(p["phase"], p["sends"], p["ok"]) for p in figs["availability"]] == [
        ("no fault", 11, 11)]


def test_fault_windows_by_expression_and_by_join_agree(
    checked_batch: dict[str, RunResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A completion's fault window is an expression for a few runs with faults and
    # a broadcast join for many (checker.sends.EXPRESSION_RUNS): the same tallies.
    from checker import sends as sends_mod
    from checker.figures import faults
    from checker.load import load_inputs
    from checker.rundir import read_rundir
    from checker.scope import BUCKET_BITS
    from checker.spark import release
    from checker.sparse import sparse_rows, uneven_sources

    spark = get_session()
    runs = {rd.key: rd for rd in (read_rundir(r.run_dir) for r in checked_batch.values())}
    try:
        inputs, facts = load_inputs(spark, runs, lambda _msg: None, BUCKET_BITS)
        sparse = sparse_rows(spark, inputs.history, uneven_sources(facts.digests))
        windows = faults(sparse)
        assert len(windows) > 1
        tallies = {}
        for limit in (len(windows), -1):
            monkeypatch.setattr(sends_mod, "EXPRESSION_RUNS", limit)
            ops = sends_mod.send_ops(spark, inputs.history, windows)
            tallies[limit] = {run: s.windows for run, s in ops.runs.items()}
    finally:
        release(spark)
    assert tallies[len(windows)] == tallies[-1]
    # Sends completed after a fault in some run: the windows were really applied.
    assert any(n >= 1 and c[0] for w in tallies[-1].values() for n, c in w.items())


def test_many_anomalies_of_a_kind_are_counted_and_capped(tmp_path: Path) -> None:
    # More lost writes than are listed: summary.json counts every one, and
    # anomalies.json lists exactly MAX_LISTED witnesses, the first by offset --
    # checked record by record and through the digests (checker.scope).
    lost = MAX_LISTED + 57
    for prune in (False, True):
        rb = RunBuilder(tmp_path / f"many-lost-{prune}", protocol="latest", expect=[])
        for k in range(lost):  # acked at offset k ...
            rb.send(0, 1 + k, k)
        for k in range(lost):  # ... where the final log holds another, unacknowledged value
            rb.send(1, 100_000 + k, result="info")
        final = [100_000 + k for k in range(lost)]
        log = [(0, v) for v in final]
        rb.replica("A", log, role="leader", isr=["A", "B"])
        rb.replica("B", log, role="follower", leader="A")
        rb.final_read(final)
        (result,) = check_runs([rb.write()], prune=prune)
        summary = json.loads((result.run_dir / CHECK / SUMMARY_JSON).read_text())
        listed = json.loads((result.run_dir / CHECK / ANOMALIES_JSON).read_text())
        assert summary["found"] == {"lost-write": lost}
        assert summary["anomaly_count"] == lost
        assert summary["anomalies_listed"] == len(listed) == MAX_LISTED
        assert [a["kind"] for a in listed] == ["lost-write"] * MAX_LISTED
        assert [a["witness"]["value"] for a in listed] == list(range(1, MAX_LISTED + 1))
        assert result.verdict == "invalid"
