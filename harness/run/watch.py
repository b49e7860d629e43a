"""How a run watches its cluster: its clock, the events collector, the observer
that scenario steps read status through, and the collection of every replica at
the end. Over the wire for the process backends (local, docker, ssh); the sim
backend's cluster is watched in-process (harness/run/sim_watch.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contract import CONTROLLER
from contract.rundir import RunDirWriter, RunWrites
from harness.backends.base import Backend
from harness.errors import RunIncomplete
from harness.run import collect
from harness.run.clock import RunClock
from harness.run.event_collector import EventsCollector
from harness.run.observer import Observer, wait_for
from workloads.runtime import Runtime

STARTUP_TIMEOUT = 30.0  # seconds for a started cluster to come up


class Watch:
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

    def wait_ready(self, obs: Observer, rt: Runtime) -> None:
        """Every broker live at the controller and every replica knows its leader (a
        write of the run that fails ends the wait: `rt`)."""
        backend = self.backend
        last: dict[str, Any] = {}

        def ready() -> bool:
            ctrl = obs.status(CONTROLLER)
            last["controller"] = ctrl
            if ctrl is None or sorted(ctrl.get("live", [])) != sorted(backend.brokers):
                return False
            for t in backend.spec.topics:
                for p, replicas in enumerate(t["replicas"]):
                    for node in replicas:
                        st = obs.partition(node, t["name"], p)
                        last[node] = st
                        if st is None or st.get("role") not in ("leader", "follower") \
                                or st.get("leader") is None:
                            return False
            return True

        try:
            wait_for(ready, STARTUP_TIMEOUT, what="the cluster to come up",
                     last_seen=lambda: last, rt=rt)
        except RunIncomplete as e:
            raise RunIncomplete(f"cluster did not come up: {e}") from e
