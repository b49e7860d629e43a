"""How a run watches its cluster: its clock, the events collector, the observer
that scenario steps read status through, and the collection of every replica at
the end. Over the wire for the process backends (local, docker, ssh); the sim
backend's cluster is watched in-process (harness/run/sim_observation.py).
"""

from __future__ import annotations

from pathlib import Path

from contract.rundir import RunDirWriter, RunWrites
from harness.backends.base import Backend
from harness.run import collect
from harness.run.clock import RunClock
from harness.run.events import EventsCollector
from harness.run.observe import Observer


class Observation:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def clock(self) -> RunClock:
        """The run's time axis: the wall clock."""
        return RunClock()

    def events_collector(self, clock: RunClock, path: Path,
                         writes: RunWrites) -> EventsCollector:
        """What gathers every node's protocol events into events.jsonl (a failed
        write reported to `writes`)."""
        return EventsCollector(self.backend, clock, path, writes=writes)

    def observer(self, collector: EventsCollector) -> Observer:
        """What scenario steps read status and events through."""
        return Observer(self.backend, collector)

    def collect_replicas(self, run: RunDirWriter) -> dict[str, str]:
        """Write every broker's final log and state into the run directory."""
        return collect.collect_replicas(self.backend, run)
