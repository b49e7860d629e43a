"""What a backend runs: the part of a scenario that describes the cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ClusterSpec:
    """What to run: the part of a scenario a backend needs."""

    protocol: str
    brokers: list[str]
    topics: list[dict[str, Any]]
    broker_config: dict[str, Any] = field(default_factory=dict)
    controller_config: dict[str, Any] = field(default_factory=dict)

    def process_config(self, addresses: dict[str, str]) -> dict[str, Any]:
        """The JSON document shared by the controller and every broker (PROTOCOL.md)."""
        return {
            "protocol": self.protocol,
            "brokers": {b: addresses[b] for b in self.brokers},
            "topics": self.topics,
            "broker": self.broker_config,
            "controller": self.controller_config,
        }
