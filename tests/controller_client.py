"""The brokers' side of a ControllerCore, for unit tests: every request goes in by
`on_request` as the shells pass it on, and its answer, events and written state
come out of the effects the core returns."""

from __future__ import annotations

from typing import Any

from broker.broker_core import Respond
from broker.controller_core import ControllerCore, ControllerEffect, WriteControllerState
from broker.partition import Event


class ControllerClient:
    def __init__(self, core: ControllerCore) -> None:
        self.core = core
        self.events: list[Event] = []  # every event the core returned, in order
        self.saved: dict[str, Any] | None = None  # the state it wrote last

    def ask(self, now: float, **msg: Any) -> dict[str, Any]:
        """One request; its answer."""
        answers = [eff.resp for eff in self.take(self.core.on_request("rid", msg, now))
                   if isinstance(eff, Respond)]
        assert len(answers) == 1, answers
        return answers[0]

    def tick(self, now: float) -> list[ControllerEffect]:
        return self.take(self.core.tick(now))

    def take(self, effects: list[ControllerEffect]) -> list[ControllerEffect]:
        for eff in effects:
            if isinstance(eff, Event):
                self.events.append(eff)
            elif isinstance(eff, WriteControllerState):
                self.saved = eff.state
        return effects

    # -- the brokers' requests ----------------------------------------------------------

    def register(self, broker: str, incarnation: str, now: float,
                 previous_broker_epoch: int = -1) -> dict[str, Any]:
        return self.ask(now, type="register", id=broker, incarnation=incarnation,
                        addr=f"{broker}:1", previous_broker_epoch=previous_broker_epoch)

    def heartbeat(self, broker: str, incarnation: str, now: float) -> dict[str, Any]:
        return self.ask(now, type="heartbeat", id=broker, incarnation=incarnation)

    def shutdown(self, broker: str, now: float = 0.0) -> dict[str, Any]:
        return self.ask(now, type="shutdown", id=broker)

    def alter_partition(self, leader: str, leader_epoch: int, partition_epoch: int,
                        isr: list[str], broker_epochs: dict[str, int] | None = None,
                        now: float = 0.0) -> dict[str, Any]:
        """An AlterPartition of partition t-0."""
        return self.ask(now, type="alter-partition", topic="t", partition=0, id=leader,
                        leader_epoch=leader_epoch, partition_epoch=partition_epoch, isr=isr,
                        broker_epochs=broker_epochs)
