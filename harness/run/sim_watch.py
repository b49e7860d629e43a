"""How a run watches the sim backend's cluster: in-process, on virtual time.

The clock is the simulator's; every event is recorded as it happens, in the
simulator's order; status and the final replicas are read straight from the
simulated nodes (a broker that is down: from its simulated files).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from broker.sim_cluster import SimCluster
from contract.rundir import RunDirWriter, RunFile, RunWriteError, RunWrites
from harness.backends.sim import SimBackend
from harness.run.collect import hosted_partitions, log_rows, offline_replicas
from harness.run.observer import Observer
from harness.run.watch import Watch


class SimClock:
    """The run's time axis: ns of virtual time since the run started."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.start_unix_ns = time.time_ns()  # for run.json; no time is taken from it

    def now(self) -> int:
        return round(self.cluster.now * 1_000_000)

    def from_unix(self, unix_ns: int) -> int:
        return unix_ns - self.start_unix_ns


class SimWatch(Watch):
    def __init__(self, backend: SimBackend) -> None:
        super().__init__(backend)
        self.sim = backend

    def clock(self) -> SimClock:  # type: ignore[override]
        return SimClock(self.sim.cluster)

    def events_collector(self, clock: Any, path: Path,  # type: ignore[override]
                         writes: RunWrites) -> SimEventsCollector:
        collector = SimEventsCollector(path, writes)
        self.sim.on_event = collector.record
        self.sim.writes = writes  # the fetch-round trace's failed writes too
        return collector

    def observer(self, collector: Any) -> SimObserver:
        return SimObserver(self.sim, collector)

    def collect_replicas(self, run: RunDirWriter) -> dict[str, str]:
        """Every broker's final log and state, read straight from the simulator."""
        backend = self.sim
        how = {}
        for node in backend.brokers:
            hosted = hosted_partitions(backend.spec.topics, node)
            st = backend.cluster.status(node)
            if st is not None:
                rows = [row for key in hosted
                        for row in log_rows(*key, backend.cluster.records(node, key))]
                run.write_replica(node, rows, {"node": node, "partitions": st["partitions"],
                                               "source": "status"})
                how[node] = "status"
                continue
            store = backend.cluster.nodes[node].store
            offline = {}
            for key in hosted:
                files = store.part(key)
                offline[key] = {"records": [r.to_json() for r in files.records],
                                "hw_checkpoint": store.hw_checkpoint.get(key, 0),
                                "epoch_cache": [list(e) for e in files.epochs]}
            rows, parts = offline_replicas(offline, hosted)
            run.write_replica(node, rows, {"node": node, "partitions": parts,
                                           "source": "data-dir", "running": False})
            how[node] = "data-dir"
        return how


class SimObserver(Observer):
    """Status straight from the simulated nodes (no connection to keep)."""

    def __init__(self, backend: SimBackend, collector: SimEventsCollector) -> None:
        super().__init__(backend, collector)  # type: ignore[arg-type]
        self.sim = backend

    def status(self, node: str) -> dict[str, Any] | None:
        return self.sim.cluster.status(node)

    def close(self) -> None:
        return None


class SimEventsCollector:
    """The events collector's interface (harness.run.event_collector) for the simulator: every
    event is written to events.jsonl as it happens, in the simulator's order. A
    failed write is reported to the run's RunWrites (never raised into the
    simulator's event loop); the file then gets nothing more."""

    def __init__(self, path: Path, writes: RunWrites | None = None) -> None:
        self.path = path
        self._file = RunFile(path, "the events", writes or RunWrites(),
                             buffer=1 << 16)  # closed by stop()
        self._events: list[dict[str, Any]] = []

    def record(self, node: str, incarnation: str, ev: dict[str, Any]) -> None:
        ev = {**ev, "incarnation": incarnation}
        if self._file.error is None and not self._file.closed:
            with contextlib.suppress(RunWriteError):  # reported: the run stops
                self._file.write(orjson.dumps(ev) + b"\n")
        self._events.append(ev)

    def events(self, predicate: Callable[[dict[str, Any]], bool] | None = None) -> list[dict]:
        return list(self._events) if predicate is None else [
            e for e in self._events if predicate(e)]

    def count(self) -> int:
        return len(self._events)

    def start(self) -> None:
        return None

    def stop(self) -> None:
        self._file.close()

    def poll_all(self) -> None:
        return None

    def drain(self, node: str) -> None:
        # Before a fault: what happened so far is on disk.
        if self._file.error is None and not self._file.closed:
            with contextlib.suppress(RunWriteError):  # reported: the run stops
                self._file.flush()
