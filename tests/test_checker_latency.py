"""Latency quantiles from the checker's histogram (checker.latency), bucketed by
real Spark, against the exact quantiles of the same latencies."""

from __future__ import annotations

import math
import random

import pytest
from pyspark.sql import functions as F

from checker.latency import Histogram, bucket
from checker.spark import get_session

pytestmark = pytest.mark.spark


def _exact(xs: list[int], q: float) -> int:
    return sorted(xs)[max(1, math.ceil(q * len(xs))) - 1]


def test_quantiles_within_one_percent_and_observed() -> None:
    rng = random.Random(7)
    # Sub-microsecond to tens of seconds, heavy-tailed like real op latencies.
    xs = [int(rng.lognormvariate(14, 2.5)) for _ in range(20_000)] + [0, 7, 999, 1000, 10**6]
    df = get_session().createDataFrame([(x,) for x in xs], "ns long")
    hist = Histogram()
    for r in df.groupBy(bucket(F.col("ns")).alias("b")).agg(
        F.count("*").alias("n"), F.max("ns").alias("top")
    ).collect():
        assert r.b <= r.top < (r.b * 1.01 if r.b >= 1000 else r.b + 1)
        hist.add(r.b, r.n, r.top)
    seen = set(xs)
    for q in (0.0, 0.5, 0.95, 0.99, 1.0):
        got, want = hist.quantile(q), _exact(xs, q)
        assert got in seen
        assert want <= got < max(want * 1.01, want + 1), (q, got, want)
    assert hist.quantile(1.0) == max(xs)


def test_histograms_of_two_queries_merge_by_adding() -> None:
    h = Histogram()
    h.add(1_000_000, 3, 1_000_400)
    h.add(2_000_000, 1, 2_000_000)
    h.add(1_000_000, 1, 1_000_900)  # the same bucket from another query
    assert h.buckets[1_000_000] == [4, 1_000_900]
    assert h.figures("send") == {
        "send_latency_ms_p50_p95_p99": [1.001, 2.0, 2.0],
        "send_latency_ms_max": 2.0,
    }
    assert Histogram().figures("poll") == {
        "poll_latency_ms_p50_p95_p99": None, "poll_latency_ms_max": None}
