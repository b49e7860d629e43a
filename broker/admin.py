"""The requests a process's shell answers itself, in front of its core: one place
for both processes (the broker, server.py; the controller, controller.py).

`net-block` and `net-delay` set the process's own network faults
(process.NetBlock), `events` reads its event log, and `status` is the core's
status with the process's incarnation, the peers it is cut off from and the
connections it has accepted. Every other request goes to the core. Every
request first passes the network faults (NetBlock.deliver); the admin requests
have no sender, so they always pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .process import EventLog, Handler, Listener, NetBlock


class AdminRequests:
    """One process's event log, network faults and listener, and the requests about
    them."""

    def __init__(self, node: str, incarnation: str, status: Callable[[], dict[str, Any]],
                 core: Handler) -> None:
        self.events = EventLog(node, incarnation)
        self.listener = Listener(self.handle)  # started by the process once it is ready
        self.net = NetBlock()
        self.net.on_event = self.events.add
        self._status = status
        self._core = core

    async def handle(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The process's request handler (process.serve)."""
        return await self.net.deliver(msg, self._answer)

    async def _answer(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        t = msg["type"]
        if t == "net-block":
            self.events.add("net-block", peers=sorted(msg["peers"]))
            return self.net.set(msg["peers"])
        if t == "net-delay":
            self.events.add("net-delay", rules=msg["rules"])
            return await self.net.set_delays(msg["rules"])
        if t == "events":
            return self.events.since(int(msg.get("since", 0)))
        if t == "status":
            return {"incarnation": self.events.incarnation, **self._status(),
                    "blocked": sorted(self.net.peers),
                    "connections_accepted": self.listener.accepted}
        return await self._core(msg)
