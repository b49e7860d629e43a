"""`isrlab chaos --target kafka --bootstrap HOST:PORT[,...]`: the chaos workload on
an existing Kafka cluster, through a real client (docs/chaos.md, "An existing
Kafka cluster").

Everything is checked before a run starts, each problem a UsageError (exit 2):
the flags that have no meaning there (`--set`, a backend), the bootstrap's
form, that the client gets metadata from it within a bounded time, and that the
topic exists (isrlab creates none on someone else's cluster). The topic's
partitions, their replicas and the brokers are the metadata's. The run itself
is a chaos run on the `external` backend: without faults, or -- with a target
hosts file (`--hosts`, harness.backends.kafka_target_hosts) -- with the process faults
its commands can make (`target_faults`: kill, stop, pause, flip), the schedule
drawn over the metadata's brokers and partitions.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from typing import Any

from harness.backends.kafka_target import TARGET
from harness.backends.kafka_target_hosts import TargetHosts, load_target_hosts
from harness.chaos.runs import ChaosConfig, chaos_run
from harness.errors import UsageError
from harness.scenario.loader import Scenario
from nemesis.schedule import (
    FLIP,
    PARTITION_PACKAGES,
    FaultSpec,
    FaultSpecError,
    ScheduleSpec,
    parse_faults,
    schedule,
)
from workloads.kafka_clients import (
    ClientConfigError,
    ClusterUnreachable,
    TopicMetadata,
    topic_metadata,
)

DEFAULT_CLIENT = "confluent-kafka"
DEFAULT_TOPIC = "t"
DEFAULT_PROTOCOL = "latest"
# Seconds the client has to get the cluster's metadata before the run is refused:
# an unreachable --bootstrap is a user error, said within this time.
METADATA_TIMEOUT = 15.0
NO_FAULTS = "none"


@dataclass
class ExternalTarget:
    bootstrap: str
    topic: str
    client: str
    config: dict[str, Any]
    metadata: TopicMetadata
    brokers: list[str] = field(default_factory=list)
    hosts: TargetHosts | None = None
    faults: list[FaultSpec] = field(default_factory=list)

    @property
    def partitions(self) -> int:
        return len(self.metadata.leaders)

    def topics(self) -> list[dict[str, Any]]:
        md = self.metadata
        return [{"name": self.topic, "partitions": self.partitions,
                 "replicas": [md.replicas.get(p, []) for p in range(self.partitions)]}]

    def backend_options(self) -> dict[str, Any]:
        return {"bootstrap": self.bootstrap, "client": self.client, "config": self.config,
                "addresses": dict(self.metadata.brokers), "hosts": self.hosts}

    def schedule_spec(self, cfg: ChaosConfig) -> ScheduleSpec:
        """The chaos schedule's parameters, on the metadata's brokers and partitions."""
        spec = cfg.schedule_spec()
        return replace(spec, faults=self.faults, brokers=self.brokers,
                       partitions=[(self.topic, p) for p in range(self.partitions)])

    def run(self, cfg: ChaosConfig, seed: int) -> tuple[Scenario, dict[str, Any]]:
        """One run's scenario: the workload until the time limit (with the faults'
        schedule, if any), then the final read, on the metadata's brokers and topic."""
        spec = self.schedule_spec(cfg)
        if self.faults and self.hosts is not None:
            ops = schedule(spec, seed)
            faults = f"faults {','.join(str(f) for f in self.faults)} through {self.hosts.path}"
        else:
            ops = [{"at": cfg.time_limit, "f": "final-read"}]
            faults = "no faults"
        scenario, meta = chaos_run(cfg, seed, ops=ops)
        workload = {**scenario.workload, "topic": self.topic}
        scenario = replace(scenario, brokers=self.brokers, topics=self.topics(),
                           workload=workload,
                           description=f"chaos on {self.bootstrap} (existing Kafka cluster), "
                                       f"{faults}, for {cfg.time_limit:g}s (seed {seed})")
        if self.faults:
            meta["chaos"].update(spec.as_dict())
        meta.update(target=TARGET, bootstrap=self.bootstrap)
        return scenario, meta


def external_target(args: argparse.Namespace) -> ExternalTarget:
    """The cluster --bootstrap names, as the client sees it; UsageError for any
    flag that does not apply, a bootstrap that does not answer, a missing topic."""
    if not args.bootstrap:
        raise UsageError("--target kafka needs --bootstrap HOST:PORT[,...]: the existing "
                         "cluster's brokers")
    hosts, faults = None, []
    if args.faults_text not in (None, NO_FAULTS):
        if args.hosts is None:
            raise UsageError(f"--faults {args.faults_text}: faults on an existing cluster "
                             "need --hosts HOSTS.yaml, its brokers' hosts and how to stop "
                             "and start them (docs/ssh.md); give --faults none or leave "
                             "it out")
        faults = target_faults(args.faults_text)
    if args.hosts is not None:
        hosts = load_target_hosts(args.hosts)  # FILE:LINE errors, before any network
        hosts.require({f.fault for f in faults})
    for given, flag in ((args.sets, "--set"),
                        (args.backend != "local", "--backend"),
                        (args.net_loss or args.net_duplicate, "--net-loss/--net-duplicate")):
        if given:
            raise UsageError(f"{flag} does not apply to --target kafka: isrlab neither runs "
                             "nor configures an existing cluster")
    bootstrap = _bootstrap(args.bootstrap)
    client = args.client or DEFAULT_CLIENT
    config = dict(args.client_config)
    try:
        md = topic_metadata(client, bootstrap, args.topic, config, METADATA_TIMEOUT)
    except ClientConfigError as e:  # kcat: no metadata or final read of a cluster
        raise UsageError(f"--client {client} with --target kafka: {e}") from None
    except ClusterUnreachable as e:
        raise UsageError(f"--bootstrap {bootstrap}: {e} (within {METADATA_TIMEOUT:g}s); "
                         "nothing was started") from None
    if not md.exists:
        raise UsageError(f"--topic {args.topic}: no such topic on {bootstrap}; isrlab creates "
                         "no topic on an existing cluster: create it, or name another")
    if sorted(md.leaders) != list(range(len(md.leaders))) or not md.leaders:
        raise UsageError(f"--topic {args.topic}: the metadata lists partitions "
                         f"{sorted(md.leaders)}, not 0..N-1")
    ids = set(md.brokers) | {b for r in md.replicas.values() for b in r}
    brokers = sorted(ids, key=lambda b: (not b.isdigit(), int(b) if b.isdigit() else 0, b))
    if hosts is not None:
        hosts.match(brokers)
    if any(f.fault == FLIP for f in faults) and len(brokers) < 2:
        raise UsageError("flip hands leadership between two brokers: the cluster has one")
    return ExternalTarget(bootstrap, args.topic, client, config, md, brokers, hosts, faults)


def target_faults(text: str) -> list[FaultSpec]:
    """--faults for an existing cluster: the process faults a hosts file's commands
    make; UsageError saying why any other is refused."""
    try:
        faults = parse_faults(text)
    except FaultSpecError as e:
        raise UsageError(f"--faults {text}: {e}") from None
    for f in faults:
        if f.fault == "power-cycle":
            raise UsageError(
                "--faults power-cycle: refused on an existing cluster: isrlab cannot drop "
                "a real Kafka's unsynced pages (a power cycle loses what a broker wrote but "
                "did not fsync; isrlab makes that loss only in its own broker's log, and a "
                "real Kafka's are its host kernel's page cache); use kill, or cut the "
                "hosts' power yourself")
        if f.fault in (*PARTITION_PACKAGES, "partition"):
            raise UsageError(
                f"--faults {f.fault}: partitions are refused on an existing cluster: "
                "isrlab's partitions cut brokers from each other and from the controller, "
                "and a target hosts file does not say where the cluster's controllers "
                "(KRaft quorum or ZooKeeper) run, so no cut would mean what its name "
                "says; use kill, stop or pause")
    return faults


def _bootstrap(text: str) -> str:
    """HOST:PORT[,...] as given, each part checked; UsageError naming the bad one."""
    parts = [p.strip() for p in text.split(",")]
    for p in parts:
        host, colon, port = p.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--bootstrap {text}: {p!r} is not HOST:PORT")
    return ",".join(parts)
