"""How a run watches an existing Kafka cluster (harness.backends.kafka_target): it
cannot. It has no events file (isrlab's brokers report their protocol events over
isrlab's own protocol; a Kafka cluster does not), no status is read
and no replica is collected: the checker sees the history alone (run.json
`target: kafka`) and says which kinds that leaves unchecked. What a fault's
`leader` target needs, a partition's leader, is the client's metadata's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contract import CONTROLLER
from contract.rundir import RunDirWriter, RunWrites
from harness.backends.kafka_target import ExternalBackend
from harness.run.clock import RunClock
from harness.run.event_collector import EventsCollector
from harness.run.observer import Observer
from harness.run.watch import STARTUP_TIMEOUT, Watch
from workloads.kafka_clients import ClusterUnreachable, topic_metadata
from workloads.runtime import Runtime

METADATA_TIMEOUT = 5.0  # seconds for the leader of a `leader` target


class NoEvents(EventsCollector):
    """An events collector that asks no node. Its file goes when it stops: an
    empty events.jsonl would read as "no election, no ISR change", which nobody
    observed; a missing one is what the checker reports as "no events"."""

    def start(self) -> None:
        return None

    def stop(self) -> None:
        super().stop()
        self.path.unlink(missing_ok=True)

    def poll_all(self) -> None:
        return None

    def drain(self, node: str) -> None:
        return None


class ExternalObserver(Observer):
    """No node answers isrlab's `status`; the controller's view of a partition is
    the metadata's leader (the broker id), or None if it names none now."""

    # What the final read reads through: the workload's client, up to the HW it
    # reports (isrlab sees neither the replicas' convergence nor their leaders).
    sees_replicas = False

    def __init__(self, backend: ExternalBackend, collector: EventsCollector) -> None:
        super().__init__(backend, collector)
        self.external = backend

    def status(self, node: str) -> dict[str, Any] | None:
        return None

    def partition(self, node: str, topic: str, partition: int) -> dict[str, Any] | None:
        b = self.external
        if node != CONTROLLER:
            return None
        try:
            md = topic_metadata(b.client, b.bootstrap, topic, b.config, METADATA_TIMEOUT)
        except ClusterUnreachable:
            return None
        leader = md.leaders.get(partition)
        return None if leader is None else {"leader": leader}


class KafkaTargetWatch(Watch):
    def __init__(self, backend: ExternalBackend) -> None:
        super().__init__(backend)
        self.external = backend

    def observer(self, collector: EventsCollector) -> Observer:
        return ExternalObserver(self.external, collector)

    def wait_ready(self, obs: Observer, rt: Runtime) -> None:
        """A leader for every partition in the client's metadata (isrlab's status
        is not there)."""
        self.external.wait_leaders(STARTUP_TIMEOUT, rt)

    def events_collector(self, clock: RunClock, path: Path,
                         writes: RunWrites) -> EventsCollector:
        return NoEvents(self.backend, clock, path, writes=writes)

    def collect_replicas(self, run: RunDirWriter) -> dict[str, str]:
        return {}  # no replica log of an external cluster is readable here
