"""The registry of anomaly kinds the checker runs (one module per kind).

Order is the order anomalies are listed in anomalies.json and the report.
"""

from __future__ import annotations

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
