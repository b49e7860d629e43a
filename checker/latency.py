"""Latency quantiles from a histogram, as HdrHistogram keeps them.

A latency (ns) is counted in the bucket of its first three significant digits
(below 1000 ns, its own bucket), so a bucket spans less than 1% of its values.
Spark counts a bucket and keeps its largest latency in the aggregation that
already groups the ops (fixed-width columns: a hash aggregation), and histograms
of different queries merge by adding counts -- which quantile sketches computed
in separate queries cannot. A quantile is the largest latency of the bucket
where its rank falls: a latency that occurred, less than 1% above the exact
quantile.
"""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

QUANTILES = (0.5, 0.95, 0.99)


def bucket(ns: Column) -> Column:
    """The latency's bucket: ``ns`` with all but its three leading digits zeroed."""
    digits = F.floor(F.log10(ns)) + 1
    step = F.pow(F.lit(10), digits - 3).cast("long")
    return F.when(ns < 1000, ns).otherwise(ns - ns % step)


class Histogram:
    """bucket -> [count, largest latency in it] (ns)."""

    def __init__(self) -> None:
        self.buckets: dict[int, list[int]] = {}

    def add(self, b: int, count: int, largest: int) -> None:
        cur = self.buckets.setdefault(b, [0, largest])
        cur[0] += count
        cur[1] = max(cur[1], largest)

    def quantile(self, q: float) -> int | None:
        """The smallest bucket holding the ceil(q * n)-th latency: its largest latency."""
        n = sum(c for c, _ in self.buckets.values())
        if not n:
            return None
        rank, seen = max(1, math.ceil(q * n)), 0
        for b in sorted(self.buckets):
            seen += self.buckets[b][0]
            if seen >= rank:
                return self.buckets[b][1]
        raise AssertionError("unreachable: the ranks add up to n")

    def figures(self, name: str) -> dict[str, Any]:
        """``<name>_latency_ms_p50_p95_p99`` and ``<name>_latency_ms_max`` (ms)."""
        qs = [self.quantile(q) for q in QUANTILES]
        top = max((m for _, m in self.buckets.values()), default=None)
        return {
            f"{name}_latency_ms_p50_p95_p99": None if qs[0] is None else [_ms(x) for x in qs],
            f"{name}_latency_ms_max": None if top is None else _ms(top),
        }


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)
