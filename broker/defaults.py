"""Kafka's defaults, per release line, for the settings the modelled rules depend on.

A cluster config that leaves one of these keys out gets the value Kafka shipped in
that release (`broker/config.py` fills it in); scenarios set explicitly what their
path relies on. Each value was read from apache/kafka at the release's tag
(KafkaConfig.scala's `Defaults` up to 3.x) or, for 4.x, from Kafka's documentation:
docs/protocol-versions.md ("Defaults per release") gives the source of each.

Settings that only set the pace of a run (fetch wait and backoff, request timeout,
heartbeat interval) are isrlab's own, the same in every release: they are the
dataclass defaults in `broker/config.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .protocol import VERSIONS, canonical, features

# The values that change, oldest first: (first release, value). A release takes the
# entry of the newest release at or before it.
_CHANGES: dict[str, tuple[tuple[str, Any], ...]] = {
    # KIP-106 (0.11.0): unclean election off by default.
    "unclean.leader.election.enable": (("0.10", True), ("0.11", False)),
    # KIP-537 (2.5.0): 10 s -> 30 s.
    "replica.lag.time.max.ms": (("0.10", 10_000), ("2.7", 30_000)),
    "min.insync.replicas": (("0.10", 1),),
    "replica.high.watermark.checkpoint.interval.ms": (("0.10", 5_000),),
    # log.flush.interval.messages = Long.MaxValue: never fsync by count (null here).
    "flush.messages": (("0.10", None),),
    # How long a silent broker keeps its session: zookeeper.session.timeout.ms up to
    # 2.8 (6 s; 18 s from 2.5, KIP-537), broker.session.timeout.ms under KRaft (9 s).
    "broker.session.timeout.ms": (("0.10", 6_000), ("2.7", 18_000), ("3.7", 9_000)),
    # KIP-966: the ELR feature level. 4.0 ships it off ("The ELR is not enabled by
    # default for 4.0"); new clusters from 4.1 have it on.
    "eligible.leader.replicas.version": (("0.10", 0), ("4.1", 1)),
    # The classic group coordinator's (kept by the controller, broker/group_coordinator.py).
    # KIP-134 (0.11.0): an empty group's first rebalance waits 3 s; none before.
    "group.initial.rebalance.delay.ms": (("0.10", 0), ("0.11", 3_000)),
    "group.min.session.timeout.ms": (("0.10", 6_000),),
    # 5 min, 30 min from 2.3.0 (KAFKA-7862, with KIP-345).
    "group.max.session.timeout.ms": (("0.10", 300_000), ("2.7", 1_800_000)),
}


def _table() -> Mapping[str, Mapping[str, Any]]:
    rows: dict[str, Mapping[str, Any]] = {}
    for version in VERSIONS:
        row = {}
        for key, changes in _CHANGES.items():
            for first, value in changes:
                if VERSIONS.index(first) <= VERSIONS.index(version):
                    row[key] = value
        rows[version] = MappingProxyType(row)
    return MappingProxyType(rows)


# release -> {setting: Kafka's default in that release}
RELEASE_DEFAULTS: Mapping[str, Mapping[str, Any]] = _table()


def release_defaults(protocol: str) -> Mapping[str, Any]:
    """Kafka's defaults of `protocol` (a release or `latest`); ConfigError if unknown."""
    features(protocol)
    return RELEASE_DEFAULTS[canonical(protocol)]
