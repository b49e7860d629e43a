"""The requests a process's shell answers itself, in front of its core: one place
for both processes (the broker, server.py; the controller, controller.py).

A request that names a `cluster_id` other than the process's own -- a peer of
another run's cluster, on an address this one took over -- is refused with
INCONSISTENT_CLUSTER_ID, as Kafka refuses a broker whose meta.properties names
another cluster (InconsistentClusterIdException); a peer's request (it names its
sender) must name one. The harness's and clients' requests may leave it out.

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

from .process import EventLog, Handler, Listener, NetBlock, sender

INCONSISTENT_CLUSTER_ID = "INCONSISTENT_CLUSTER_ID"


class AdminRequests:
    """One process's event log, network faults and listener, and the requests about
    them."""

    def __init__(self, node: str, incarnation: str, status: Callable[[], dict[str, Any]],
                 core: Handler, cluster_id: str | None = None) -> None:
        self.cluster_id = cluster_id
        self.events = EventLog(node, incarnation)
        self.listener = Listener(self.handle)  # started by the process once it is ready
        self.net = NetBlock()
        self.net.on_event = self.events.add
        self._status = status
        self._core = core

    async def handle(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The process's request handler (process.serve)."""
        theirs = msg.get("cluster_id")
        if self.cluster_id is not None and (
                (theirs is not None or sender(msg) is not None) and theirs != self.cluster_id):
            return {"error": INCONSISTENT_CLUSTER_ID,
                    "message": f"this is {self.events.node} of cluster {self.cluster_id}, "
                               f"not of cluster {theirs}"}
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
            return {"incarnation": self.events.incarnation, "cluster_id": self.cluster_id,
                    **self._status(),
                    "blocked": sorted(self.net.peers),
                    "connections_accepted": self.listener.accepted}
        return await self._core(msg)
