"""The sim backend: the whole cluster in this process, on a virtual clock.

The controller and the brokers are the same sans-IO cores the processes run
(broker.broker_core, broker.controller_core), in broker.sim_cluster's shell; the
harness's clients, workload and scenario steps run unchanged on the simulator's
runtime (harness.sim.runtime). A seed decides every message latency and every
choice, so the same seed and scenario give a byte-identical history and replica
logs. The run directory is the same as every backend's; events carry virtual
times, on the history's axis.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from broker.sim_cluster import Network, SimCluster
from contract import CONTROLLER
from contract.rundir import RunDirWriter
from harness.backends.base import Backend, ClusterSpec
from harness.errors import RunIncomplete, UsageError
from harness.run.collect import hosted_partitions, log_rows, offline_replicas
from harness.run.observe import Observer
from harness.sim.runtime import SimRuntime
from harness.sim.trace import TRACE, Tracer

PREFIX = "sim:"


class SimClock:
    """The run's time axis: ns of virtual time since the run started."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.start_unix_ns = time.time_ns()  # for run.json; no time is taken from it

    def now(self) -> int:
        return round(self.cluster.now * 1_000_000)

    def from_unix(self, unix_ns: int) -> int:
        return unix_ns - self.start_unix_ns


class SimBackend(Backend):
    name = "sim"
    deterministic = True

    def __init__(self, spec: ClusterSpec, run_dir: Path, *, seed: int = 0,
                 stop_timeout: float = 15.0, port: int | None = None,
                 network: Network | None = None) -> None:
        super().__init__(spec, run_dir)
        self.stop_timeout = stop_timeout
        addresses = {b: PREFIX + b for b in spec.brokers}
        self.collector: SimEventsCollector | None = None
        self.network = network or Network()
        self.cluster = SimCluster(spec.process_config(addresses), seed, on_event=self._event,
                                  network=self.network)
        self.rt = SimRuntime(self.cluster, self._node_of)
        self.tracer: Tracer | None = None

    # -- addresses and views ------------------------------------------------------------

    def address(self, node: str) -> str:
        if node not in self.nodes:
            raise UsageError(f"unknown node {node!r}")
        return PREFIX + node

    def _node_of(self, addr: str) -> str:
        return addr.removeprefix(PREFIX)

    def check_addresses(self) -> None:
        return None  # nothing listens on this host

    def run_meta(self) -> dict[str, Any]:
        # Only when set: a run without message faults keeps the run.json it had.
        return {"network": self.network.as_dict()} if self.network.faulty else {}

    def run_clock(self) -> SimClock:
        return SimClock(self.cluster)

    def events_collector(self, clock: Any, path: Path) -> SimEventsCollector:
        self.collector = SimEventsCollector(path)
        return self.collector

    def observer(self, collector: Any) -> SimObserver:
        return SimObserver(self, collector)

    def _event(self, node: str, incarnation: str, ev: dict[str, Any]) -> None:
        if self.collector is not None:
            self.collector.record(node, incarnation, ev)

    def is_running(self, node: str) -> bool:
        return self.cluster.nodes[node].up

    def is_paused(self, node: str) -> bool:
        n = self.cluster.nodes[node]
        return n.up and n.paused

    # -- lifecycle ----------------------------------------------------------------------

    def start_controller(self) -> None:
        # The run directory exists now: the fetch-round trace goes into it.
        self.tracer = Tracer(self.cluster, self.run_dir / TRACE)
        self.cluster.start(CONTROLLER)

    def start(self, node: str) -> None:
        self.address(node)
        self.wait_exited(node, self.stop_timeout)
        self.cluster.start(node)
        if self._grudge.get(node):
            self.cluster.block(node, self._grudge[node])  # a partition outlives a restart
        self._reapply_delays(node)

    def _has_exited(self, node: str) -> bool:
        return not self.cluster.nodes[node].up

    def _exit_status(self, node: str) -> int | None:
        return self.cluster.nodes[node].exit_status

    def _log_tail(self, node: str) -> str:
        return ""

    def _log_name(self, node: str) -> str:
        return f"{node} (simulated)"

    def _running(self, node: str, what: str) -> None:
        if not self.is_running(node):
            raise RunIncomplete(f"cannot {what} {node}: it is not running")

    def stop(self, node: str) -> int | None:
        self._running(node, "stop")
        self.cluster.stop(node)
        deadline = self.rt.monotonic() + self.stop_timeout
        while self.is_running(node) and self.rt.monotonic() < deadline:
            self.rt.sleep(0.01)
        if self.is_running(node):
            self.cluster.kill(node)
            raise RunIncomplete(f"{node} did not shut down within {self.stop_timeout:.0f}s "
                                f"of SIGTERM")
        return self.cluster.nodes[node].exit_status

    def kill(self, node: str) -> None:
        self._running(node, "kill")
        self.cluster.kill(node)

    def pause(self, node: str) -> None:
        self._running(node, "pause")
        self.cluster.pause(node)

    def resume(self, node: str) -> None:
        self._running(node, "resume")
        self.cluster.resume(node)

    def power_cycle(self, node: str) -> None:
        self._running(node, "power-cycle")
        self.cluster.power_cycle(node)

    def wait_exited(self, node: str, timeout: float) -> None:
        deadline = self.rt.monotonic() + timeout
        while (self.is_running(node) and not self.is_paused(node)
               and self.rt.monotonic() < deadline):
            self.rt.sleep(0.01)
        if self.is_running(node):
            raise RunIncomplete(f"cannot start {node}: it is already running")

    # -- network faults -------------------------------------------------------------------

    def _apply_grudge(self) -> None:
        for node in self.nodes:
            self.cluster.block(node, self._grudge.get(node, []))

    def _send_delays(self, node: str) -> None:
        if self.is_reachable(node):
            self.cluster.set_delays(node, self._current_delays(node))

    # -- the end of a run ---------------------------------------------------------------

    def collect_replicas(self, run: RunDirWriter) -> dict[str, str]:
        how = {}
        for node in self.brokers:
            hosted = hosted_partitions(self.spec.topics, node)
            st = self.cluster.status(node)
            if st is not None:
                rows = [row for key in hosted
                        for row in log_rows(*key, self.cluster.records(node, key))]
                run.write_replica(node, rows, {"node": node, "partitions": st["partitions"],
                                               "source": "status"})
                how[node] = "status"
                continue
            store = self.cluster.nodes[node].store
            offline = {}
            for key in hosted:
                files = store.part(key)
                offline[key] = {"records": [list(r) for r in files.records],
                                "hw_checkpoint": store.hw_checkpoint.get(key, 0),
                                "epoch_cache": [list(e) for e in files.epochs]}
            rows, parts = offline_replicas(offline, hosted)
            run.write_replica(node, rows, {"node": node, "partitions": parts,
                                           "source": "data-dir", "running": False})
            how[node] = "data-dir"
        return how

    def collect_logs(self, run_dir: Path) -> None:
        return None  # no process logs: events.jsonl is the whole record

    def teardown(self) -> None:
        for node in self.nodes:
            self.cluster.kill(node)
        if self.tracer is not None:
            self.tracer.close()
            self.tracer = None


class SimObserver(Observer):
    """Status straight from the simulated nodes (no connection to keep)."""

    def status(self, node: str) -> dict[str, Any] | None:
        assert isinstance(self.backend, SimBackend)
        return self.backend.cluster.status(node)

    def close(self) -> None:
        return None


class SimEventsCollector:
    """The events collector's interface (harness.run.events) for the simulator: every
    event is written to events.jsonl as it happens, in the simulator's order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "ab")  # noqa: SIM115 - closed by stop()
        self._events: list[dict[str, Any]] = []

    def record(self, node: str, incarnation: str, ev: dict[str, Any]) -> None:
        ev = {**ev, "incarnation": incarnation}
        if not self._file.closed:
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
        if not self._file.closed:
            self._file.close()

    def poll_all(self) -> None:
        return None

    def drain(self, node: str) -> None:
        self._file.flush()  # before a fault: what happened so far is on disk
