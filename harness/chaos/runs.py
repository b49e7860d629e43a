"""Chaos runs: a seeded fault schedule over a continuous workload, run as a scenario.

A chaos run is built as a `Scenario` -- a cluster, a background workload
(workloads.continuous) and steps -- and run by the one runner
(harness.run.runner.run_scenario), so its run directory, teardown, Ctrl-C and
crash handling are a scenario's. Its steps are the schedule of
nemesis.schedule, unrolled from the run's seed before anything starts: `sleep`
until each op's time, the fault (a `leader` target resolved when it runs),
`recover`, and at the end `recover` and `final-read`. run.json gets the whole
schedule and the seed in its `chaos` block, `scenario: null` (a chaos run
allows kinds, never requires them) and `nemesis`, the steps as planned.

Parsing of the command line's values lives here too (time limits, `--set`),
each error a UsageError naming what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig, ControllerConfig
from broker.config import ConfigError as BrokerConfigError
from contract import PROTOCOLS
from harness.backends.spec import check_release_configs
from harness.errors import UsageError
from harness.scenario.loader import Scenario
from harness.scenario.steps import DEFAULT_FINAL_TIMEOUT, Step
from nemesis.schedule import (
    FLIP,
    PROCESS_PACKAGES,
    FaultSpec,
    ScheduleSpec,
    schedule,
)

CHAOS = "chaos"  # the name in a chaos run's id: <time>-chaos-<protocol>-<hex>
TOPIC = "t"

def parse_sets(items: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`--set KEY=VALUE`s -> (broker config, controller config), each key checked by
    the broker's own validation; the value is an integer, true/false or null."""
    broker: dict[str, Any] = {}
    controller: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not eq or not key or not raw:
            raise UsageError(f"{item!r}: give KEY=VALUE, e.g. min.insync.replicas=2")
        value: Any
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        elif raw.lower() in ("null", "none"):
            value = None
        else:
            try:
                value = int(raw)
            except ValueError:
                raise UsageError(f"{item!r}: {raw!r} is not an integer, true/false "
                                 "or null") from None
        errors = []
        for cls, into in ((BrokerConfig, broker), (ControllerConfig, controller)):
            try:
                # Any release's validation: whether the value suits the run's release
                # is ClusterSpec's check, once the release is known.
                cls.from_dict({key: value}, "latest")
            except BrokerConfigError as e:
                errors.append(str(e))
                continue
            into[key] = value
            break
        else:
            # Refused by the one that knows the key, or unknown to both.
            known = [e for e in errors if "unknown" not in e]
            raise UsageError(f"{item!r}: " + (known[0] if known else
                             f"unknown broker or controller config key {key!r}"))
    return broker, controller


@dataclass
class ChaosConfig:
    """One chaos run's configuration (all but its seed)."""

    protocol: str
    time_limit: float
    faults: list[FaultSpec]
    acks: int | str = "all"
    broker_config: dict[str, Any] = field(default_factory=dict)
    controller_config: dict[str, Any] = field(default_factory=dict)
    brokers: int = 3
    partitions: int = 3
    producers: int = 4
    consumers: int = 3
    # Records per second over all producers, in batches (workloads.continuous): a
    # realistic load, yet a 60 s run's history stays a few hundred thousand lines.
    rate: float = 2000.0
    batch: int = 100  # records per produce request at most (batch.size)
    linger: float = 0.005  # seconds a batch waits for more records (linger.ms)
    interval: float = 3.0
    duration: float = 4.0
    quiet: float = 2.0
    # Half of the packages compound: KIP-101's loss needs two faults at once.
    overlap: float = 0.5
    gap: float | None = None  # None: half the controller's session timeout
    timeout_ms: int = 5000
    retry_ms: int = 10000
    poll_interval: float = 0.05  # seconds between a background consumer's polls
    # A real Kafka client for the workload (workloads.client_ops), and its settings.
    client: str | None = None
    client_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_release_configs(self.protocol, self.broker_config, self.controller_config)

    def broker_names(self) -> list[str]:
        if not 1 <= self.brokers <= 8:  # the local backend has 127.0.0.2..9
            raise UsageError(f"--brokers {self.brokers}: give 1..8")
        if self.brokers < 2 and any(f.fault == FLIP for f in self.faults):
            raise UsageError("flip hands leadership between two brokers: give --brokers 2 "
                             "or more")
        return [chr(ord("A") + i) for i in range(self.brokers)]

    def topics(self) -> list[dict[str, Any]]:
        """One topic, its partitions' replicas rotated so leaders start spread."""
        names = self.broker_names()
        rf = min(3, len(names))
        replicas = [[names[(p + i) % len(names)] for i in range(rf)]
                    for p in range(self.partitions)]
        return [{"name": TOPIC, "partitions": self.partitions, "replicas": replicas}]

    def session_timeout(self) -> float:
        """The controller's broker session timeout, seconds (its default or --set's)."""
        cfg = ControllerConfig.from_dict(self.controller_config, self.protocol)
        return cfg.broker_session_timeout_ms / 1000

    def schedule_spec(self) -> ScheduleSpec:
        # A compound package's second fault must land before the first broker's
        # session ends, so the gap scales with the session timeout.
        gap = self.gap if self.gap is not None else self.session_timeout() / 2
        return ScheduleSpec(faults=self.faults, brokers=self.broker_names(),
                            partitions=[(TOPIC, p) for p in range(self.partitions)],
                            time_limit=self.time_limit, interval=self.interval,
                            duration=self.duration, quiet=self.quiet,
                            overlap=self.overlap, gap=gap)


def chaos_run(cfg: ChaosConfig, seed: int, ops: list[dict[str, Any]] | None = None
              ) -> tuple[Scenario, dict[str, Any]]:
    """The scenario of one chaos run with `seed`, and run.json's extra fields; `ops`
    replaces the schedule the seed draws (a shrunk one, harness.chaos.shrink)."""
    if ops is None:
        ops = schedule(cfg.schedule_spec(), seed)
    workload = {
        "acks": cfg.acks, "timeout_ms": cfg.timeout_ms, "retry_ms": cfg.retry_ms,
        "topic": TOPIC, "partition": 0, "consumers": cfg.consumers,
        "producers": cfg.producers, "rate": cfg.rate, "partitions": "all",
        "batch": cfg.batch, "linger": cfg.linger,
    }
    if cfg.poll_interval != ChaosConfig.poll_interval:
        workload["poll_interval"] = cfg.poll_interval
    if cfg.client:
        workload["client"] = cfg.client
        workload["config"] = dict(cfg.client_config)
    faults = ",".join(str(f) for f in cfg.faults)
    scenario = Scenario(
        name=CHAOS,
        description=f"chaos: {faults} for {cfg.time_limit:g}s (seed {seed})",
        path=Path(CHAOS),
        brokers=cfg.broker_names(),
        topics=cfg.topics(),
        broker_config=dict(cfg.broker_config),
        controller_config=dict(cfg.controller_config),
        workload=workload,
        # A chaos run allows no anomaly: whatever it finds is a finding.
        expect={p: [] for p in PROTOCOLS},
        steps=schedule_steps(ops),
    )
    meta = {
        "scenario": None,
        "scenario_file": None,
        "chaos": {"seed": seed, **cfg.schedule_spec().as_dict(), "schedule": ops},
    }
    return scenario, meta


def schedule_steps(ops: list[dict[str, Any]]) -> list[Step]:
    """A schedule's ops as the runner's steps (sleeps up to each op's time)."""
    steps: list[Step] = []

    def add(kind: str, args: dict[str, Any]) -> None:
        steps.append(Step(index=len(steps) + 1, kind=kind, args=args, line=0))

    last = 0.0
    for op in ops:
        op = dict(op)
        at, f = op.pop("at"), op.pop("f")
        if at > last:
            add("sleep", {"until": at})
            last = at
        if f == "final-read":
            add("final-read", {"timeout": DEFAULT_FINAL_TIMEOUT, "heal": True})
        elif f == "recover":
            add("recover", {})
        elif f in PROCESS_PACKAGES or f in ("partition", "start"):
            add(f, op)
        else:
            raise ValueError(f"schedule op {f!r} has no step")
    return steps
