"""How a run watches an existing Kafka cluster (harness.backends.external): it
cannot. It has no events file (isrlab's brokers report their protocol events over
isrlab's own protocol; a Kafka cluster does not), no status is read
and no replica is collected: the checker sees the history alone (run.json
`target: kafka`) and says which kinds that leaves unchecked."""

from __future__ import annotations

from pathlib import Path

from contract.rundir import RunDirWriter, RunWrites
from harness.backends.base import Backend
from harness.run.clock import RunClock
from harness.run.events import EventsCollector
from harness.run.observation import Observation


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


class ExternalObservation(Observation):
    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)

    def events_collector(self, clock: RunClock, path: Path,
                         writes: RunWrites) -> EventsCollector:
        return NoEvents(self.backend, clock, path, writes=writes)

    def collect_replicas(self, run: RunDirWriter) -> dict[str, str]:
        return {}  # no replica log of an external cluster is readable here
