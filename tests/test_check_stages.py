"""bench/check_stages.py, where a check's time goes: after a real check of a
generated run, Spark's status store lists the check's jobs, each named by the
checker's line that started it (threads included), with wall and CPU time."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from pyspark.sql.classic.dataframe import DataFrame

sys.path.insert(0, str(ROOT / "bench"))

import check_stages  # noqa: E402  (bench/ is scripts, not a package)
import gen_history  # noqa: E402

from checker import api  # noqa: E402
from checker.spark import get_session  # noqa: E402

pytestmark = pytest.mark.spark


def test_each_job_of_a_check_is_named_by_the_checker_line_that_started_it(tmp_path: Path
                                                                           ) -> None:
    run = tmp_path / "gen"
    gen_history.generate(run, 5_000, set(gen_history.KINDS), seed=4)
    spark = get_session()
    collect = DataFrame.collect
    t0 = time.time()
    with check_stages.describe_jobs(spark):
        api.check_runs([run])
    took = time.time() - t0
    assert DataFrame.collect is collect  # the actions are the checker's own again
    jobs = check_stages.spark_jobs(spark, int(t0 * 1e3))
    assert jobs, "the check ran Spark jobs"
    sites = [j["site"] for j in jobs]
    assert any("collect_facts at checker/facts.py:" in s for s in sites), sites
    # Jobs started in the kinds' threads are named too, none "<unknown>".
    assert all(" at checker/" in s for s in sites), sites
    assert all(0 <= j["wall"] <= took + 1 and j["cpu"] >= 0 for j in jobs)
    assert all(t0 <= j["start"] <= t0 + took + 1 for j in jobs)


def _quotient_of(ratio: str, num: str, den: str) -> bool:
    """Whether a printed ratio is the quotient of two printed figures (all rounded:
    the figures to 0.1 s, the ratio to 0.01)."""
    n, d, r = float(num), float(den), float(ratio.rstrip("x"))
    return (n - 0.05) / (d + 0.05) - 0.005 <= r <= (n + 0.05) / max(d - 0.05, 1e-9) + 0.005


def test_the_floor_is_measured_in_the_checks_jvm_beside_the_check(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--floor: after the check, the floor's wall time and executor CPU, and the
    check's over them, each ratio the quotient of the figures printed."""
    # main() sets the driver memory in the environment: the later tests' as before
    monkeypatch.setenv("ISRLAB_SPARK_DRIVER_MEMORY", "4g")
    run = tmp_path / "gen"
    gen_history.generate(run, 5_000, set(gen_history.KINDS), seed=5)
    assert check_stages.main([str(run), "--repeat", "1", "--top", "3", "--floor"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.splitlines()
            if line.startswith(("| floor |", "| check |", "| check / floor |"))}
    assert set(rows) == {"floor", "check", "check / floor"}, out
    (fw, fc, fu), (cw, cc, cu) = rows["floor"], rows["check"]
    assert float(fw) > 0 and float(fc) > 0 and float(cw) > 0 and float(cc) > 0, out
    wall, cpu = rows["check / floor"][:2]
    assert _quotient_of(fu, fc, fw) and _quotient_of(cu, cc, cw), out
    assert _quotient_of(wall, cw, fw) and _quotient_of(cpu, cc, fc), out
