"""A backend: one run's cluster, the bundle of its parts.

A backend owns the controller and broker processes of one run. It is
- `Nodes` (harness/backends/nodes.py): start, stop and fault each node, and the
  address under which the harness reaches it;
- `net`, a `Net` (harness/backends/net.py): partitions and delays, shared by every
  backend; each supplies only how to make its network match a partition;
- `Artefacts` (harness/backends/artefacts.py): logs and data directories, also of
  a crashed run.
It never judges and never talks the client protocol beyond readiness and the
nodes' admin requests. Node names are the broker ids of the scenario ("A", "B",
...); the controller is the node named CONTROLLER.

A Backend is what the nemesis drives: it satisfies `nemesis.Cluster` (nemesis
declares what it needs and never imports the harness). How a run watches the
cluster (clock, events, status, replicas) is harness/run/watch.py's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.kafka.listener import kafka_listen_address
from contract import CONTROLLER
from harness.backends import admin
from harness.backends.artefacts import Artefacts
from harness.backends.net import Grudge, Net, Rules
from harness.backends.nodes import Nodes
from harness.backends.ports import Reservation, check_free, reserve
from harness.backends.spec import ClusterSpec
from nemesis import delays


class Backend(Nodes, Artefacts):
    name: str = "abstract"
    # A backend whose runs a seed decides entirely (the simulator) takes `seed=`.
    deterministic: bool = False
    # How a run watches this backend's cluster (harness.run.runner.WATCHES):
    # `wire` isrlab's status and event protocol over the network, `in-process` the
    # simulator's cluster read directly, `metadata` a cluster that is not isrlab's
    # (only its Kafka metadata can be read).
    watch: str = "wire"

    def __init__(self, spec: ClusterSpec, run_dir: Path) -> None:
        self.spec = spec
        self.run_dir = run_dir
        self.cluster_id = run_dir.name  # unique per run (contract.rundir.new_run_id)
        self._reserved: Reservation | None = None  # check_addresses'
        self.net = Net(self.name, self.nodes, apply=self.firewall(), check=self.check_grudge,
                       send_rules=self.send_delay_rules, reachable=self.is_reachable,
                       monotonic=lambda: self.rt.monotonic())

    @property
    def brokers(self) -> list[str]:
        return list(self.spec.brokers)

    @property
    def nodes(self) -> list[str]:
        """Every process of the cluster, controller first."""
        return [CONTROLLER, *self.spec.brokers]

    def write_process_config(self, path: Path) -> Path:
        addresses = {b: self.listen_address(b) for b in self.spec.brokers}
        kafka = {b: self.kafka_address(b) for b in self.spec.brokers}
        path.write_text(json.dumps(self.spec.process_config(addresses, kafka, self.cluster_id),
                                   indent=2) + "\n")
        return path

    def kafka_address(self, broker: str) -> str:
        """Where a Kafka client on this machine reaches `broker`'s Kafka listener: its
        address's port + 1 (broker/PROTOCOL.md), unless the backend maps ports."""
        return kafka_listen_address(self.address(broker))

    def kafka_bootstrap(self) -> str:
        """Every broker's Kafka address, comma-separated (bootstrap.servers)."""
        return ",".join(self.kafka_address(b) for b in self.spec.brokers)

    def run_meta(self) -> dict[str, Any]:
        """run.json fields this backend's runs add (the sim backend: its network)."""
        return {}

    # -- before the run ------------------------------------------------------

    def expect(self, step_kinds: set[str]) -> None:
        """What the run will ask (its step kinds), told before `check_addresses`, so a
        backend that must check a capability up front can (ssh: iptables on every
        host when a step partitions)."""
        return None

    def check_addresses(self) -> None:
        """Raise UsageError (exit 2) if any address a node needs on this host is
        taken; call before starting."""
        addresses = ([(n, self.address(n)) for n in self.nodes]
                     + [(b, self.kafka_address(b)) for b in self.brokers])
        self.release_addresses()
        self._reserved = reserve(addresses, f"run {self.run_dir.name}")
        try:
            check_free(addresses)  # and no other program holds one
        except BaseException:
            self.release_addresses()
            raise

    def release_addresses(self) -> None:
        """Give back what check_addresses reserved (after the teardown)."""
        if self._reserved is not None:
            self._reserved.release()
            self._reserved = None

    # -- what `net` asks of a backend ------------------------------------------

    def firewall(self) -> Callable[[Grudge], None] | None:
        """How to make the network match a whole partition (a callable taking the
        grudge), or None if this backend cannot partition."""
        return None

    def check_grudge(self, grudge: Grudge) -> None:
        """UsageError for a partition this backend cannot make (names are checked)."""
        return None

    def send_delay_rules(self, node: str, rules: Rules) -> None:
        """Give a running node its delay rules: the `net-delay` admin request."""
        admin.command(node, self.address(node), "net-delay", rules=rules)

    # -- network faults, as nemesis.Cluster names them --------------------------

    def partition(self, grudge: Grudge) -> None:
        self.net.partition(grudge)

    def heal(self) -> None:
        self.net.heal()

    def delay(self, plan: delays.DelayPlan) -> None:
        self.net.delay(plan)

    def deliver(self) -> None:
        self.net.deliver()
