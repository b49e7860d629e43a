"""What a backend runs: the part of a scenario that describes the cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.config import BrokerConfig, ConfigError, ControllerConfig
from harness.errors import UsageError


def check_release_configs(protocol: str, broker: dict[str, Any],
                          controller: dict[str, Any]) -> None:
    """UsageError (exit 2) unless the configs suit `protocol`. They were checked key
    by key when read; here, against the release (a KIP-966 switch under 3.7 is
    refused before anything starts)."""
    try:
        BrokerConfig.from_dict(broker, protocol)
        ControllerConfig.from_dict(controller, protocol)
    except ConfigError as e:
        raise UsageError(f"protocol {protocol}: {e}") from None


@dataclass(frozen=True)
class ClusterSpec:
    """What to run: the part of a scenario a backend needs."""

    protocol: str
    brokers: list[str]
    topics: list[dict[str, Any]]
    broker_config: dict[str, Any] = field(default_factory=dict)
    controller_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_release_configs(self.protocol, self.broker_config, self.controller_config)

    def process_config(self, addresses: dict[str, str],
                       kafka_advertised: dict[str, str] | None = None,
                       cluster_id: str | None = None) -> dict[str, Any]:
        """The JSON document shared by the controller and every broker (PROTOCOL.md);
        `kafka_advertised`: where Kafka clients reach each broker's Kafka listener."""
        cfg = {
            "protocol": self.protocol,
            "brokers": {b: addresses[b] for b in self.brokers},
            "topics": self.topics,
            "broker": self.broker_config,
            "controller": self.controller_config,
        }
        if cluster_id is not None:  # each run's own (broker/admin.py)
            cfg["cluster_id"] = cluster_id
        if kafka_advertised:
            cfg["kafka_advertised"] = {b: kafka_advertised[b] for b in self.brokers}
        return cfg
