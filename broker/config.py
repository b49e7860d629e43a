"""Broker and controller configuration (the protocol versions are in protocol.py).

`from_dict(raw, protocol)` is the one way to build a configuration: the keys the
config leaves out that Kafka's defaults cover take that release's default
(broker/defaults.py); the rest are isrlab's own pacing settings (the dataclass
defaults), the same in every release.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from types import UnionType
from typing import Any, get_args, get_type_hints

from .defaults import release_defaults
from .errors import ConfigError
from .protocol import features

__all__ = ["BrokerConfig", "ConfigError", "ControllerConfig"]


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings; the key names are Kafka's, written with dots in config files."""

    # Release defaults (broker/defaults.py).
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    replica_lag_time_max_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    flush_messages: int | None
    # The group coordinator's (read by the controller, which keeps it).
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    # isrlab's own, every release (Kafka: replica.fetch.wait.max.ms 500,
    # replica.fetch.backoff.ms 1000, request.timeout.ms 30000; scaled down so a
    # scenario takes seconds, not minutes).
    replica_lag_max_messages: int | None = None
    replica_fetch_wait_max_ms: int = 100
    replica_fetch_backoff_ms: int = 50
    request_timeout_ms: int = 5_000
    heartbeat_interval_ms: int = 100

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, protocol: str) -> BrokerConfig:
        return _from_dict(cls, raw or {}, "broker", protocol)


@dataclass(frozen=True)
class ControllerConfig:
    # Release defaults (broker/defaults.py).
    broker_session_timeout_ms: int
    # KIP-966's feature level: 1 keeps eligible leader replicas (4.0 and later).
    eligible_leader_replicas_version: int

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, protocol: str) -> ControllerConfig:
        cfg = _from_dict(cls, raw or {}, "controller", protocol)
        if cfg.eligible_leader_replicas_version not in (0, 1):
            raise ConfigError("controller config 'eligible.leader.replicas.version' must be "
                              f"0 or 1, got {cfg.eligible_leader_replicas_version}")
        if cfg.eligible_leader_replicas_version and not features(
                protocol).eligible_leader_replicas:
            raise ConfigError("controller config 'eligible.leader.replicas.version' 1 needs "
                              f"protocol 4.0 or later (KIP-966), not {protocol}")
        return cfg


# Each key's range: Kafka's type (INT a Java int, LONG a Java long: its ConfigDef
# refuses a value past it) and its lowest value, Kafka's atLeast(...) validator at
# 3.9.0 -- ReplicationConfigs, LogConfig, KRaftConfigs, GroupCoordinatorConfig,
# ServerConfigs -- or 0 where Kafka has none (isrlab refuses a negative time or
# count, which no Kafka default is). isrlab's own keys take Kafka's type of the
# setting they stand for.
_INT, _LONG = (1 << 31) - 1, (1 << 63) - 1
_RANGES: dict[str, tuple[int, int]] = {
    "min.insync.replicas": (1, _INT),  # INT, atLeast(1)
    "unclean.leader.election.enable": (0, 1),  # BOOLEAN (checked as one)
    "replica.lag.time.max.ms": (0, _LONG),  # LONG
    "replica.high.watermark.checkpoint.interval.ms": (0, _LONG),  # LONG
    "flush.messages": (1, _LONG),  # LONG, atLeast(1) (null: never by count)
    "group.initial.rebalance.delay.ms": (0, _INT),  # INT
    "group.min.session.timeout.ms": (0, _INT),  # INT
    "group.max.session.timeout.ms": (0, _INT),  # INT
    "replica.lag.max.messages": (0, _LONG),  # LONG (Kafka 0.8; removed in 0.9)
    "replica.fetch.wait.max.ms": (0, _INT),  # INT
    "replica.fetch.backoff.ms": (0, _INT),  # INT, atLeast(0)
    "request.timeout.ms": (0, _INT),  # INT
    "heartbeat.interval.ms": (0, _INT),  # broker.heartbeat.interval.ms: INT
    "broker.session.timeout.ms": (0, _INT),  # INT
    "eligible.leader.replicas.version": (0, (1 << 15) - 1),  # a feature level: a short
}


def _from_dict(cls: type, raw: dict[str, Any], section: str, protocol: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    kinds = get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace(".", "_")
        if name not in known:
            raise ConfigError(f"unknown {section} config key {key!r}")
        kind = kinds[name]
        nullable = isinstance(kind, UnionType) and type(None) in get_args(kind)
        if kind is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{section} config {key!r} must be true or false, got {value!r}")
        elif value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(f"{section} config {key!r} must be an integer, got {value!r}")
        elif value is None and not nullable:
            raise ConfigError(f"{section} config {key!r} must not be null")
        elif isinstance(value, int) and value < 0:
            raise ConfigError(f"{section} config {key!r} must not be negative, got {value}")
        elif isinstance(value, int) and kind is not bool:
            low, high = _RANGES[name.replace("_", ".")]
            if not low <= value <= high:
                raise ConfigError(f"{section} config {key!r} must be in {low}..{high} "
                                  f"(Kafka's range), got {_shown(value)}")
        values[name] = value
    defaults = release_defaults(protocol)
    for name, f in known.items():
        if name not in values and f.default is MISSING:
            values[name] = defaults[name.replace("_", ".")]
    return cls(**values)


def _shown(v: int) -> str:
    """An integer as an error quotes it, cut short if long (10**30 has 31 digits)."""
    r = str(v)
    return r if len(r) <= 24 else f"{r[:12]}... ({len(r)} digits)"
