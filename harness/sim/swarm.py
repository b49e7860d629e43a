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
from dataclasses import asdict, dataclass, field
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


@dataclass
class SwarmSpec:
    """What a swarm fixes for every run; everything else each run draws."""

    protocol: str
    time_limit: float = 60.0
    faults: str | None = None  # "kill,pause" pins the mix; None: drawn per run
    acks: int | str | None = None  # None: drawn per run
    broker_config: dict[str, Any] = field(default_factory=dict)
    controller_config: dict[str, Any] = field(default_factory=dict)
    # The workload of every run: `rate` records/s, one record per request, and a
    # consumer polling every `poll_interval` s: a 60 s run has ~850 ops.
    rate: float = 10.0
    consumers: int = 1
    producers: int = 2
    poll_interval: float = 0.25
    # Message faults of every run (broker.sim_cluster.Network; not drawn: a seed's
    # run without them is what it always was).
    net_loss: float = 0.0
    net_duplicate: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def draw_config(spec: SwarmSpec, seed: int) -> ChaosConfig:
    """Run `seed`'s configuration: what the spec pins, the rest drawn from the seed."""
    rng = random.Random(seed ^ SALT)
    if spec.faults is not None:
        faults: list[FaultSpec] = parse_faults(spec.faults)
    else:
        faults = parse_faults(",".join(rng.sample(FAULT_POOL, rng.randint(1, 4))))
    broker = {k: rng.choice(v) for k, v in BROKER_DRAWS.items()}
    broker.update(spec.broker_config)
    controller = {k: rng.choice(v) for k, v in CONTROLLER_DRAWS.items()}
    controller.update(spec.controller_config)
    # Two brokers (replication factor 2: every fault of one leaves a single replica,
    # and alternating faults make the unclean elections of KAFKA-6361/KIP-279).
    brokers = rng.choice([2, 3, 3, 4])
    # Replicas rotate over the brokers (ChaosConfig.topics, replication factor 3):
    # with 4 brokers, 2 partitions give every broker a replica to host.
    partitions = rng.choice([1, 2]) if brokers <= 3 else 2
    acks = spec.acks if spec.acks is not None else rng.choice(["all", "all", 1])
    return ChaosConfig(
        protocol=spec.protocol, time_limit=spec.time_limit, faults=faults, acks=acks,
        broker_config=broker, controller_config=controller, brokers=brokers,
        partitions=partitions, producers=spec.producers, consumers=spec.consumers,
        rate=spec.rate, batch=1, poll_interval=spec.poll_interval,
        interval=rng.uniform(1.0, 4.0),
        duration=rng.uniform(0.5, 4.0), quiet=rng.uniform(0.5, 2.0),
        overlap=rng.choice([0.0, 0.5, 0.9]))


def describe(cfg: ChaosConfig) -> dict[str, Any]:
    """A run's drawn configuration, for run.json and the swarm's output."""
    return {"faults": ",".join(str(f) for f in cfg.faults), "acks": cfg.acks,
            "brokers": cfg.brokers, "partitions": cfg.partitions,
            "broker": cfg.broker_config, "controller": cfg.controller_config,
            "interval": round(cfg.interval, 3), "duration": round(cfg.duration, 3),
            "overlap": cfg.overlap}


def simulate(seed: int, spec: dict[str, Any], runs_dir: str, batch: str) -> dict[str, Any]:
    """One swarm run on the sim backend (what a Spark task does per seed); its run
    directory under runs_dir. Returns where it is and how it ended."""
    sw = SwarmSpec(**spec)
    cfg = draw_config(sw, seed)
    scenario, meta = chaos_run(cfg, seed)
    meta["chaos"].update(batch=batch)
    meta["swarm"] = {"seed": seed, "batch": batch, "config": describe(cfg)}
    t0 = time.perf_counter()
    rec = run_scenario(scenario, RunOptions(
        protocol=sw.protocol, backend="sim", seed=seed, runs_dir=Path(runs_dir), meta=meta,
        backend_options={"network": Network(sw.net_loss, sw.net_duplicate)}),
        Progress(quiet=True))
    ops = count_ops(rec.run_dir)
    return {"seed": seed, "run_dir": str(rec.run_dir),
            "error": None if rec.error is None else str(rec.error),
            "seconds": time.perf_counter() - t0, "ops": ops, "config": describe(cfg)}
