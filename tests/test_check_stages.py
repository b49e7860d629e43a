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
