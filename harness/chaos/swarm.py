"""Swarm testing on the simulator: many chaos runs, each with a configuration of
its own drawn from its seed.

Swarm testing (Groce et al., 2012) varies the configuration itself from run to
run -- which faults, how many brokers, which timeouts, which acks -- because a
fixed mix of everything tends to hide the bugs that need a mix of only some. A
run is the chaos issue's run (harness.chaos.runs: a seeded fault schedule over a
continuous workload) on the sim backend, so its seed fixes everything: the
drawn configuration, the schedule, every message latency. `simulate(seed, ...)`
is what one Spark task does for one seed; `isrlab swarm` (harness/cli/swarm.py)
spreads seeds over tasks and checks the runs in one batch.

What the user pins (`--faults`, `--acks`, `--set KEY=VALUE`) is not drawn.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from broker.sim_cluster import Network
from contract.rundir import count_ops
from harness.chaos.runs import ChaosConfig, chaos_run
from harness.progress import Progress
from harness.run.runner import RunOptions, run_scenario
from nemesis.schedule import FaultSpec, parse_faults

# The fault packages a run draws its mix from (when --faults does not pin it).
FAULT_POOL = ["kill", "stop", "pause", "power-cycle", "isolate", "halves", "cut-controller",
              "flip"]
# Values a run draws from, per config key (when --set does not pin the key).
BROKER_DRAWS: dict[str, list[Any]] = {
    "unclean.leader.election.enable": [False, True],
    "min.insync.replicas": [1, 2],
    "replica.lag.time.max.ms": [1_000, 5_000, 10_000],
    "flush.messages": [None, None, 1],
    # Kafka's default is 500 ms; ours 100 (quicker scenarios). Both are real settings.
    "replica.fetch.wait.max.ms": [100, 500],
    "heartbeat.interval.ms": [100, 250],
}
CONTROLLER_DRAWS: dict[str, list[Any]] = {
    "broker.session.timeout.ms": [1_000, 2_000, 3_000],
}
SALT = 0x5EED  # the config draw's stream, apart from the schedule's (same seed)


# What every run of a swarm has unless the user pins otherwise: the time limit and
# the workload -- `rate` records/s, one record per request, and a consumer polling
# every `poll_interval` s: a 60 s run has ~850 ops.
SWARM_DEFAULTS: dict[str, Any] = {"time_limit": 60.0, "rate": 10.0, "producers": 2,
                                  "consumers": 1, "batch": 1, "poll_interval": 0.25}
PINNABLE = ("faults", "acks")  # drawn per run unless pinned


@dataclass(frozen=True)
class SwarmSpec:
    """What a swarm fixes for every run; everything else each run draws (draw_config).

    `base` is the ChaosConfig every run starts from: its protocol, time limit and
    workload hold for every run, and the keys of its broker and controller configs
    are pinned (the others drawn). Its faults and acks hold only where `pinned`
    names them; its brokers, partitions and fault timing are always drawn."""

    base: ChaosConfig
    pinned: frozenset[str] = frozenset()  # of PINNABLE
    # Message faults of every run (not drawn: a seed's run without them is what it
    # always was).
    network: Network = Network()

    @classmethod
    def of(cls, protocol: str, *, faults: list[FaultSpec] | None = None,
           acks: int | str | None = None, network: Network | None = None,
           **fields: Any) -> SwarmSpec:
        """The spec that pins `faults` and `acks` unless None (then each run draws
        them); `fields`: other ChaosConfig fields (time_limit, rate, broker_config,
        ...) over SWARM_DEFAULTS."""
        pins = {k: v for k, v in (("faults", faults), ("acks", acks)) if v is not None}
        base = ChaosConfig(**{**SWARM_DEFAULTS, "faults": [], **fields, **pins,
                              "protocol": protocol})
        return cls(base, frozenset(pins), network or Network())

    def as_dict(self) -> dict[str, Any]:
        """What every run has (None: drawn per run), for the swarm's summary."""
        b = self.base
        return {"protocol": b.protocol, "time_limit": b.time_limit,
                "faults": ",".join(map(str, b.faults)) if "faults" in self.pinned else None,
                "acks": b.acks if "acks" in self.pinned else None,
                "broker_config": b.broker_config, "controller_config": b.controller_config,
                "rate": b.rate, "consumers": b.consumers, "producers": b.producers,
                "poll_interval": b.poll_interval, "net_loss": self.network.loss,
                "net_duplicate": self.network.duplicate}


def draw_config(spec: SwarmSpec, seed: int) -> ChaosConfig:
    """Run `seed`'s configuration: what the spec pins, the rest drawn from the seed."""
    rng = random.Random(seed ^ SALT)
    base = spec.base
    if "faults" in spec.pinned:
        faults: list[FaultSpec] = list(base.faults)
    else:
        faults = parse_faults(",".join(rng.sample(FAULT_POOL, rng.randint(1, 4))))
    broker = {k: rng.choice(v) for k, v in BROKER_DRAWS.items()}
    broker.update(base.broker_config)
    controller = {k: rng.choice(v) for k, v in CONTROLLER_DRAWS.items()}
    controller.update(base.controller_config)
    # Two brokers (replication factor 2: every fault of one leaves a single replica,
    # and alternating faults make the unclean elections of KAFKA-6361/KIP-279).
    brokers = rng.choice([2, 3, 3, 4])
    # Replicas rotate over the brokers (ChaosConfig.topics, replication factor 3):
    # with 4 brokers, 2 partitions give every broker a replica to host.
    partitions = rng.choice([1, 2]) if brokers <= 3 else 2
    acks = base.acks if "acks" in spec.pinned else rng.choice(["all", "all", 1])
    return replace(
        base, faults=faults, acks=acks, broker_config=broker, controller_config=controller,
        brokers=brokers, partitions=partitions, interval=rng.uniform(1.0, 4.0),
        duration=rng.uniform(0.5, 4.0), quiet=rng.uniform(0.5, 2.0),
        overlap=rng.choice([0.0, 0.5, 0.9]))


def describe(cfg: ChaosConfig) -> dict[str, Any]:
    """A run's drawn configuration, for run.json and the swarm's output."""
    return {"faults": ",".join(str(f) for f in cfg.faults), "acks": cfg.acks,
            "brokers": cfg.brokers, "partitions": cfg.partitions,
            "broker": cfg.broker_config, "controller": cfg.controller_config,
            "interval": round(cfg.interval, 3), "duration": round(cfg.duration, 3),
            "overlap": cfg.overlap}


def simulate(seed: int, spec: SwarmSpec, runs_dir: str, batch: str) -> dict[str, Any]:
    """One swarm run on the sim backend (what a Spark task does per seed); its run
    directory under runs_dir. Returns where it is and how it ended."""
    cfg = draw_config(spec, seed)
    scenario, meta = chaos_run(cfg, seed)
    meta["chaos"].update(batch=batch)
    meta["swarm"] = {"seed": seed, "batch": batch, "config": describe(cfg)}
    t0 = time.perf_counter()
    rec = run_scenario(scenario, RunOptions(
        protocol=cfg.protocol, backend="sim", seed=seed, runs_dir=Path(runs_dir), meta=meta,
        backend_options={"network": spec.network}),
        Progress(quiet=True))
    ops = count_ops(rec.run_dir)
    return {"seed": seed, "run_dir": str(rec.run_dir),
            "error": None if rec.error is None else str(rec.error),
            "seconds": time.perf_counter() - t0, "ops": ops, "config": describe(cfg)}
