"""Deterministic, in-process driving of Partition objects (no sockets, no clock).

A test helper: one replica-fetcher round is the unit of progress, so a test can
say exactly what each side knew after each round. (The sim backend drives whole
brokers instead: broker/sim_cluster.py.)
"""

from __future__ import annotations

from typing import Any

from broker.partition import Effect, Partition, ProposeIsr


def fetcher_round(follower: Partition, leader: Partition, now: float = 0.0) -> dict[str, Any]:
    """Send the follower's next request to the leader and feed back the answer.

    Returns {"request", "response", "leader_effects", "follower_effects"};
    request is None when the follower has nothing to send.
    """
    req = follower.next_follower_request()
    out: dict[str, Any] = {"request": req, "response": None, "leader_effects": [],
                           "follower_effects": []}
    if req is None:
        return out
    gen = req["generation"]
    if req["type"] == "offsets-for-leader-epoch":
        resp, leff = leader.offsets_for_leader_epoch(req["leader_epoch_request"],
                                                     req.get("current_leader_epoch"))
        feff = follower.on_offsets_for_leader_epoch_response(gen, resp, now)
    else:
        resp, leff = leader.fetch_for_replica(req["replica_id"], req["offset"],
                                              req["last_fetched_epoch"],
                                              req.get("current_leader_epoch"),
                                              req["max_records"], now)
        feff = follower.on_fetch_response(gen, resp, now)
    out.update(response=resp, leader_effects=leff, follower_effects=feff)
    return out


def accept_isr_proposals(leader: Partition, effects: list[Effect], now: float = 0.0) -> None:
    """Play the controller for ISR changes: accept every proposal in `effects`."""
    for eff in effects:
        if isinstance(eff, ProposeIsr):
            leader.apply_leader_and_isr(leader.node, eff.leader_epoch, list(eff.isr),
                                        eff.partition_epoch + 1, leader.replicas, now)
