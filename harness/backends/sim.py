"""The sim backend: the whole cluster in this process, on a virtual clock.

The controller and the brokers are the same sans-IO cores the processes run
(broker.broker_core, broker.controller_core), in broker.sim_cluster's shell; the
harness's clients, workload and scenario steps run unchanged on the simulator's
runtime (harness.sim.runtime). A seed decides every message latency and every
choice, so the same seed and scenario give a byte-identical history and replica
logs. The run directory is the same as every backend's; events carry virtual
times, on the history's axis (how a run watches this cluster:
harness/run/sim_watch.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.sim_cluster import Network, SimCluster
from contract import CONTROLLER
from contract.rundir import RunWrites
from harness.backends.base import Backend
from harness.backends.net import Grudge, Rules
from harness.backends.spec import ClusterSpec
from harness.errors import RunIncomplete, UsageError
from harness.sim.runtime import SimRuntime
from harness.sim.trace import TRACE, Tracer

PREFIX = "sim:"


class SimBackend(Backend):
    name = "sim"
    deterministic = True
    watch = "in-process"
    exit_poll = 0.01  # as in stop(): a look on virtual time costs no real time

    def __init__(self, spec: ClusterSpec, run_dir: Path, *, seed: int = 0,
                 stop_timeout: float = 15.0, port: int | None = None,
                 network: Network | None = None) -> None:
        super().__init__(spec, run_dir)
        self.stop_timeout = stop_timeout
        addresses = {b: PREFIX + b for b in spec.brokers}
        # Where the nodes' protocol events go as they happen (the run's events
        # collector: harness/run/sim_watch.py).
        self.on_event: Callable[[str, str, dict[str, Any]], None] | None = None
        self.network = network or Network()
        self.cluster = SimCluster(spec.process_config(addresses), seed, on_event=self._event,
                                  network=self.network)
        self.rt = SimRuntime(self.cluster, self._node_of)
        self.tracer: Tracer | None = None
        # Where the trace reports a failed write: the run's (set by its observation).
        self.writes: RunWrites | None = None

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

    def _event(self, node: str, incarnation: str, ev: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(node, incarnation, ev)

    def is_running(self, node: str) -> bool:
        return self.cluster.nodes[node].up

    def is_paused(self, node: str) -> bool:
        n = self.cluster.nodes[node]
        return n.up and n.paused

    # -- lifecycle ----------------------------------------------------------------------

    def start_controller(self) -> None:
        # The run directory exists now: the fetch-round trace goes into it.
        self.tracer = Tracer(self.cluster, self.run_dir / TRACE, self.writes)
        self.cluster.start(CONTROLLER)

    def start(self, node: str) -> None:
        self.address(node)
        self.wait_exited(node, self.stop_timeout)
        self.cluster.start(node)
        if self.net.grudge.get(node):
            self.cluster.block(node, self.net.grudge[node])  # a partition outlives a restart
        self.net.reapply_delays(node)

    def has_exited(self, node: str) -> bool:
        return not self.cluster.nodes[node].up

    def exit_status(self, node: str) -> int | None:
        return self.cluster.nodes[node].exit_status

    def log_tail(self, node: str) -> str:
        return ""

    def log_name(self, node: str) -> str:
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

    # -- network faults -------------------------------------------------------------------

    def firewall(self) -> Callable[[Grudge], None]:
        return self._block

    def _block(self, grudge: Grudge) -> None:
        for node in self.nodes:
            self.cluster.block(node, grudge.get(node, []))

    def send_delay_rules(self, node: str, rules: Rules) -> None:
        self.cluster.set_delays(node, rules)

    # -- the end of a run ---------------------------------------------------------------

    def collect_logs(self, run_dir: Path) -> None:
        return None  # no process logs: events.jsonl is the whole record

    def teardown(self) -> None:
        for node in self.nodes:
            self.cluster.kill(node)
        if self.tracer is not None:
            self.tracer.close()
            self.tracer = None


