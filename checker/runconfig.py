"""A chaos run's configuration in a few words, and which losses it permits.

Chaos, swarm and nightly runs have no scenario: what tells two runs of one
version apart is their configuration (run.json: `chaos` faults and seed,
`workload` acks, `broker_config` min ISR and unclean election; a key the run did
not set has its release's default, broker/defaults.py). The batch index, the
swarm index and JUnit name runs by it (`summary`).

`permits` is the one rule for "allowed by the configuration" versus
"protocol" (docs/chaos.md#allowed-by-the-configuration): Kafka documents that it
may lose acknowledged records under acks other than all, with unclean leader
election on, and with min.insync.replicas 1 when a lone leader's unflushed tail
can be lost (a power-cycle fault, flush.messages not 1). A kind in
PERMITTED_KINDS found in such a run is allowed by its configuration; any other
anomaly, or one in a run whose configuration permits no loss, is a protocol
finding.
"""

from __future__ import annotations

from typing import Any

from broker.config import BrokerConfig, ConfigError

# What losing an acknowledged (or replicated) record shows as. The others
# (duplicate, aborted-read, nonmonotonic-poll, poll-skip, hw-regression) no
# configuration permits.
PERMITTED_KINDS = ("lost-write", "divergence", "inconsistent-offset", "uncommitted-read")
ALLOWED, PROTOCOL = "allowed by the configuration", "protocol"


def is_chaos(meta: dict[str, Any]) -> bool:
    """A chaos, swarm or nightly run (run.json has a `chaos` block)."""
    return isinstance(meta.get("chaos"), dict)


def settings(meta: dict[str, Any]) -> dict[str, Any]:
    """The settings that decide what a run may lose: faults, acks, min ISR,
    unclean election, flush.messages, protocol, seed (and a nightly run's cell)."""
    chaos = meta.get("chaos") if is_chaos(meta) else {}
    raw = meta.get("broker_config") if isinstance(meta.get("broker_config"), dict) else {}
    try:
        cfg = BrokerConfig.from_dict(raw, str(meta.get("protocol")))
        min_isr, unclean = cfg.min_insync_replicas, cfg.unclean_leader_election_enable
        flush = cfg.flush_messages
    except (ConfigError, KeyError, ValueError):  # an unknown protocol or a bad key: as written
        min_isr = raw.get("min.insync.replicas")
        unclean, flush = raw.get("unclean.leader.election.enable"), raw.get("flush.messages")
    faults = chaos.get("faults") or []
    workload = meta.get("workload") if isinstance(meta.get("workload"), dict) else {}
    return {"faults": ",".join(map(str, faults)) if isinstance(faults, list) else str(faults),
            "acks": workload.get("acks", "all"), "min_isr": min_isr, "unclean": unclean,
            "flush": flush, "protocol": meta.get("protocol"),
            "seed": chaos.get("seed", meta.get("seed")), "cell": chaos.get("cell")}


def summary(meta: dict[str, Any]) -> str:
    """'kill,power-cycle · acks all · min ISR 2 · unclean off' (no seed, no protocol)."""
    s = settings(meta)
    unclean = {True: "on", False: "off"}.get(s["unclean"], "?")
    return (f"{s['faults'] or 'no faults'} · acks {s['acks']} · min ISR {s['min_isr']} · "
            f"unclean {unclean}")


def permits(meta: dict[str, Any]) -> list[str]:
    """Why the run's configuration permits losing acknowledged records ([]: it does not)."""
    s = settings(meta)
    why = []
    if str(s["acks"]) not in ("all", "-1"):
        why.append(f"acks={s['acks']}")
    if s["unclean"] is True:
        why.append("unclean election on")
    if s["min_isr"] == 1 and "power-cycle" in s["faults"].split(",") and s["flush"] != 1:
        why.append("min ISR 1 with power-cycle (unflushed)")
    return why


def attribution(kind: str, meta: dict[str, Any]) -> str:
    """ALLOWED when the run's configuration permits `kind`, else PROTOCOL."""
    return ALLOWED if kind in PERMITTED_KINDS and permits(meta) else PROTOCOL
