"""Broker and controller configuration (the protocol versions are in protocol.py)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


class ConfigError(ValueError):
    """A configuration value is unknown or malformed (exit status 2)."""


@dataclass(frozen=True)
class BrokerConfig:
    """Broker settings; the key names are Kafka's, written with dots in config files."""

    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    # None: the protocol version's default (10 s until Kafka 2.4, 30 s from 2.5, KIP-537).
    replica_lag_time_max_ms: int | None = None
    replica_lag_max_messages: int | None = None
    replica_fetch_wait_max_ms: int = 100
    replica_fetch_backoff_ms: int = 50
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    flush_messages: int | None = None
    request_timeout_ms: int = 5_000
    heartbeat_interval_ms: int = 100

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> BrokerConfig:
        return _from_dict(cls, raw or {}, "broker")


@dataclass(frozen=True)
class ControllerConfig:
    broker_session_timeout_ms: int = 3_000

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> ControllerConfig:
        return _from_dict(cls, raw or {}, "controller")


def _from_dict(cls: type, raw: dict[str, Any], section: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace(".", "_")
        if name not in known:
            raise ConfigError(f"unknown {section} config key {key!r}")
        default = known[name].default
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{section} config {key!r} must be true or false, got {value!r}")
        elif value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(f"{section} config {key!r} must be an integer, got {value!r}")
        elif value is None and default is not None:
            raise ConfigError(f"{section} config {key!r} must not be null")
        elif isinstance(value, int) and value < 0:
            raise ConfigError(f"{section} config {key!r} must not be negative, got {value}")
        values[name] = value
    return cls(**values)
