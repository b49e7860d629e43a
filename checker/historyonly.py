"""A run checked from its history alone: a run on an existing Kafka cluster
(run.json `target: kafka`, harness.backends.kafka_target), where isrlab reads no
replica log and sees no protocol event, and every poll is a real client's.

The kinds the history decides are checked as for any run -- lost-write and
inconsistent-offset and uncommitted-read against the final read (the client's
read of each partition up to its HW), duplicate, aborted-read, nonmonotonic-poll,
poll-skip. The others are named here with why not: a kind that could not be
checked is reported as such, never as "no anomaly found". A run on the reference
brokers driven by a real client leaves hw-regression unchecked (its polls carry
no HW).
"""

from __future__ import annotations

from typing import Any

EXTERNAL_TARGET = "kafka"  # run.json `target` (harness.backends.kafka_target.TARGET)

# kind -> why it cannot be checked from the history alone.
UNCHECKED: dict[str, str] = {
    "divergence": "no replica logs: an existing cluster's replicas are not readable here",
    "hw-regression": "real-client polls carry no HW or leader epoch",
}


def is_history_only(meta: dict[str, Any]) -> bool:
    return meta.get("target") == EXTERNAL_TARGET


def unchecked(meta: dict[str, Any]) -> dict[str, str]:
    """The kinds this run's check cannot decide, each with the reason. On the
    reference brokers too, a run whose workload is a real client has no poll
    with a HW: hw-regression has nothing to compare."""
    if is_history_only(meta):
        return dict(UNCHECKED)
    if (meta.get("workload") or {}).get("client"):
        return {"hw-regression": UNCHECKED["hw-regression"]}
    return {}
