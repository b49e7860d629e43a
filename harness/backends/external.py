"""An existing Kafka cluster as a run's cluster (`isrlab chaos --target kafka`).

isrlab starts, stops and faults nothing here, and sees nothing of the brokers but
what a Kafka client sees: no events, no replica logs, no status over isrlab's own
protocol. Every broker is taken as running and reachable (nothing here could say
otherwise), `kafka_bootstrap()` is the user's --bootstrap, and the run's topic
and partitions are the client's metadata (harness.cli.chaos reads it before the
run). Not a --backend choice: --target kafka picks it (harness.backends.HIDDEN).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.backends.base import Backend
from harness.backends.spec import ClusterSpec
from harness.errors import RunIncomplete, UsageError
from workloads.kafka_clients import ClusterUnreachable, topic_metadata
from workloads.runtime import Runtime

TARGET = "kafka"  # run.json `target` of a run on an existing Kafka cluster


class ExternalBackend(Backend):
    name = "external"

    def __init__(self, spec: ClusterSpec, run_dir: Path, *, bootstrap: str, client: str,
                 addresses: dict[str, str] | None = None,
                 config: dict[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.client = client
        self.config = dict(config or {})
        # broker id -> host:port as the metadata named them (run.json `addresses`).
        self.addresses = dict(addresses or {})
        super().__init__(spec, run_dir)

    @property
    def nodes(self) -> list[str]:
        return list(self.spec.brokers)  # no controller isrlab could reach

    def kafka_bootstrap(self) -> str:
        return self.bootstrap

    def kafka_address(self, broker: str) -> str:
        return self.address(broker)

    def address(self, node: str) -> str:
        return self.addresses.get(node, self.bootstrap)

    def run_meta(self) -> dict[str, Any]:
        return {"target": TARGET, "bootstrap": self.bootstrap}

    def check_addresses(self) -> None:
        return None  # the addresses are the cluster's, in use by design

    def expect(self, step_kinds: set[str]) -> None:
        faults = step_kinds - {"sleep", "final-read", "recover"}
        if faults:
            raise UsageError(f"{', '.join(sorted(faults))}: faults on an external cluster "
                             "are not supported yet")

    # -- nothing to start, stop or fault ---------------------------------------------

    def start_controller(self) -> None:
        return None

    def start(self, node: str) -> None:
        return None

    def teardown(self) -> None:
        return None

    def _no_faults(self, node: str) -> None:
        raise RunIncomplete(f"{node}: faults on an external cluster are not supported yet")

    def stop(self, node: str) -> int | None:
        self._no_faults(node)
        return None

    def kill(self, node: str) -> None:
        self._no_faults(node)

    def pause(self, node: str) -> None:
        self._no_faults(node)

    def resume(self, node: str) -> None:
        self._no_faults(node)

    def power_cycle(self, node: str) -> None:
        self._no_faults(node)

    def is_running(self, node: str) -> bool:
        return True

    def is_paused(self, node: str) -> bool:
        return False

    def has_exited(self, node: str) -> bool:
        return False

    def exit_status(self, node: str) -> int | None:
        return None

    def log_tail(self, node: str) -> str:
        return ""

    def log_name(self, node: str) -> str:
        return f"broker {node} (external: no log here)"

    def collect_logs(self, run_dir: Path) -> None:
        return None  # the brokers' logs are the cluster's operators'

    # -- readiness, as a client sees it ------------------------------------------------

    def wait_leaders(self, timeout: float, rt: Runtime) -> None:
        """Return once the client's metadata names a leader for every partition of
        every topic of the run; RunIncomplete, with what it last saw, if not within
        `timeout` seconds (or once a write of the run has failed: `rt`)."""
        deadline = rt.monotonic() + timeout
        last = "no metadata yet"
        while True:
            leaderless = []
            try:
                for t in self.spec.topics:
                    md = topic_metadata(self.client, self.bootstrap, t["name"], self.config,
                                        timeout=min(5.0, max(deadline - rt.monotonic(), 0.5)))
                    if not md.exists:
                        leaderless.append(f"{t['name']} (no such topic)")
                        continue
                    leaderless += [f"{t['name']}/{p}" for p in range(t["partitions"])
                                   if md.leaders.get(p) is None]
                if not leaderless:
                    return
                last = "no leader for " + ", ".join(leaderless)
            except ClusterUnreachable as e:
                last = str(e)
            if rt.monotonic() >= deadline:
                raise RunIncomplete(f"cluster not ready within {timeout:g}s: {last}")
            rt.sleep(0.2)
