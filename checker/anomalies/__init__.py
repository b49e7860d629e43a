"""The registry of anomaly kinds the checker runs (one module per kind).

Order is the order anomalies are listed in anomalies.json and the report. The
union of the kinds' Needs is what the digests hash and the scope keeps.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame

from checker.anomalies import (
    aborted_read,
    divergence,
    duplicate,
    hw_regression,
    inconsistent_offset,
    lost_write,
    nonmonotonic_poll,
    poll_skip,
    uncommitted_read,
)
from checker.anomalies.base import AnomalyKind
from checker.context import Known

REGISTRY: list[AnomalyKind] = [
    lost_write.KIND,
    divergence.KIND,
    inconsistent_offset.KIND,
    duplicate.KIND,
    uncommitted_read.KIND,
    aborted_read.KIND,
    nonmonotonic_poll.KIND,
    poll_skip.KIND,
    hw_regression.KIND,
]

BY_NAME: dict[str, AnomalyKind] = {k.name: k for k in REGISTRY}

# The record fields some kind compares (checker.facts hashes them).
COMPARED: tuple[str, ...] = tuple(sorted({f for k in REGISTRY for f in k.needs.compares}))
# Some kind matches records by value (checker.scope keeps the values named).
BY_VALUE: bool = any(k.needs.by_value for k in REGISTRY)


def _union(frames: list[DataFrame | None]) -> DataFrame | None:
    some = [df for df in frames if df is not None]
    return reduce(DataFrame.unionByName, some) if some else None


def needed_values(known: Known) -> DataFrame | None:
    """(run, topic, partition, value) of every value some kind needs all records
    of (with repeats), or None."""
    return _union([k.needs.values(known) for k in REGISTRY if k.needs.values])


def needed_final_ranges(known: Known) -> DataFrame | None:
    """(run, topic, partition, lo, hi): the final-log offset ranges some kind looks
    up, or None."""
    return _union([k.needs.final_ranges(known) for k in REGISTRY if k.needs.final_ranges])
