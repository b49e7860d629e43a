"""What a backend runs: the part of a scenario that describes the cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.config import BrokerConfig, ConfigError, ControllerConfig
from harness.errors import UsageError


@dataclass(frozen=True)
class ClusterSpec:
    """What to run: the part of a scenario a backend needs."""

    protocol: str
    brokers: list[str]
    topics: list[dict[str, Any]]
    broker_config: dict[str, Any] = field(default_factory=dict)
    controller_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The configs were checked key by key when read; here, against the release
        # (a KIP-966 switch under 3.7 is refused before anything starts).
        try:
            BrokerConfig.from_dict(self.broker_config, self.protocol)
            ControllerConfig.from_dict(self.controller_config, self.protocol)
        except ConfigError as e:
            raise UsageError(f"protocol {self.protocol}: {e}") from None

    def process_config(self, addresses: dict[str, str]) -> dict[str, Any]:
        """The JSON document shared by the controller and every broker (PROTOCOL.md)."""
        return {
            "protocol": self.protocol,
            "brokers": {b: addresses[b] for b in self.brokers},
            "topics": self.topics,
            "broker": self.broker_config,
            "controller": self.controller_config,
        }
