"""An existing Kafka cluster as a run's cluster (`isrlab chaos --target kafka`).

isrlab starts nothing here, and sees nothing of the brokers but what a Kafka
client sees: no events, no replica logs, no status over isrlab's own protocol.
`kafka_bootstrap()` is the user's --bootstrap, and the run's topic and
partitions are the client's metadata (harness.cli.chaos reads it before the
run). Not a --backend choice: --target kafka picks it (harness.backends.HIDDEN).

Without a target hosts file (`hosts`) it faults nothing and every broker is taken
as running. With one, the process faults kill, stop, pause (and their recoveries)
run its commands on the brokers' hosts (harness.backends.kafka_target_faults); a broker
is running or not as isrlab's own faults left it, a started one is up once it
answers a metadata request, and teardown -- at the end of every run, also a
failed or interrupted one -- starts or resumes whatever is still faulted.
"""

from __future__ import annotations

import atexit
import sys
from pathlib import Path
from typing import Any

from harness.backends.base import Backend
from harness.backends.kafka_target_faults import BrokerFaults
from harness.backends.kafka_target_hosts import TargetHosts
from harness.backends.spec import ClusterSpec
from harness.errors import HarnessError, RunIncomplete, UsageError
from workloads.kafka_clients import ClusterUnreachable, topic_metadata
from workloads.runtime import Runtime

TARGET = "kafka"  # run.json `target` of a run on an existing Kafka cluster
NO_FAULT_STEPS = {"sleep", "final-read", "recover"}
# What a target hosts file's commands can do; the rest is refused before the run
# (harness.chaos.kafka_target says why).
PROCESS_STEPS = {"kill", "stop", "pause", "resume", "start"}
ANSWER_TIMEOUT = 2.0  # seconds one broker has to answer a readiness metadata request


class ExternalBackend(Backend):
    name = "external"
    watch = "metadata"

    def __init__(self, spec: ClusterSpec, run_dir: Path, *, bootstrap: str, client: str,
                 addresses: dict[str, str] | None = None,
                 config: dict[str, Any] | None = None,
                 hosts: TargetHosts | None = None) -> None:
        self.bootstrap = bootstrap
        self.client = client
        self.config = dict(config or {})
        # broker id -> host:port as the metadata named them (run.json `addresses`).
        self.addresses = dict(addresses or {})
        self.hosts = hosts
        self.faults = None if hosts is None else BrokerFaults(hosts, self._wait_answers,
                                                               self._answers)
        self._fault_steps: set[str] = set()
        self._torn_down = False
        super().__init__(spec, run_dir)
        if self.faults is not None:
            # A harness leaving without its teardown still gives the brokers back.
            atexit.register(self.teardown)

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
        meta: dict[str, Any] = {"target": TARGET, "bootstrap": self.bootstrap}
        if self.hosts is not None:
            meta["target_hosts"] = str(self.hosts.path.resolve())
        return meta

    def check_addresses(self) -> None:
        """The addresses are the cluster's, in use by design; with faults to run,
        every broker's host is connected and checked (UsageError naming it)."""
        if self.faults is not None and self._fault_steps:
            self.faults.check(self._fault_steps)

    def expect(self, step_kinds: set[str]) -> None:
        faults = step_kinds - NO_FAULT_STEPS
        if faults and self.faults is None:
            raise UsageError(f"{', '.join(sorted(faults))}: faults on an existing cluster "
                             "need --hosts HOSTS.yaml (docs/ssh.md)")
        if faults - PROCESS_STEPS:
            raise UsageError(f"{', '.join(sorted(faults - PROCESS_STEPS))}: not supported "
                             "on an existing cluster (docs/chaos.md)")
        self._fault_steps = faults

    # -- the brokers: started by their operators, faulted through the hosts file ------

    def start_controller(self) -> None:
        return None

    def _faults(self, node: str) -> BrokerFaults:
        if self.faults is None:
            raise RunIncomplete(f"{node}: faults on an existing cluster need --hosts")
        return self.faults

    def start(self, node: str) -> None:
        """The run's start finds every broker running: nothing to do. A broker a
        fault took down is started by its hosts file's command."""
        if self.faults is not None:
            self.faults.start(node)

    def stop(self, node: str) -> int | None:
        self._faults(node).stop(node)
        return None  # the exit status is the host's, not seen from here

    def kill(self, node: str) -> None:
        self._faults(node).kill(node)

    def pause(self, node: str) -> None:
        self._faults(node).pause(node)

    def resume(self, node: str) -> None:
        self._faults(node).resume(node)

    def power_cycle(self, node: str) -> None:
        raise RunIncomplete(f"{node}: isrlab cannot drop a real Kafka's unsynced pages")

    def is_running(self, node: str) -> bool:
        return self.faults is None or node not in self.faults.hosts.brokers \
            or self.faults.is_running(node)

    def is_paused(self, node: str) -> bool:
        return self.faults is not None and node in self.faults.hosts.brokers \
            and self.faults.is_paused(node)

    def teardown(self) -> None:
        """Give every faulted broker back (start or resume it), once; a failure is
        said on stderr, naming the broker left as it was."""
        if self.faults is None or self._torn_down:
            return
        self._torn_down = True
        try:
            done = self.faults.recover_all()
            if done:
                print(f"isrlab: at the run's end, recovered: {', '.join(done)}",
                      file=sys.stderr)
        except HarnessError as e:
            print(f"isrlab: a broker of {self.bootstrap} may still be down or paused: {e}",
                  file=sys.stderr)
        finally:
            self.faults.close()

    def _answers(self, node: str) -> bool:
        """The broker answers a metadata request of its own, naming itself."""
        addr = self.addresses.get(node)
        if addr is None:
            return False
        try:
            md = topic_metadata(self.client, addr, self.spec.topics[0]["name"], self.config,
                                ANSWER_TIMEOUT)
        except ClusterUnreachable:
            return False
        return node in md.brokers

    def _wait_answers(self, node: str, timeout: float) -> None:
        deadline = self.rt.monotonic() + timeout
        while not self._answers(node):
            if self.rt.monotonic() >= deadline:
                raise RunIncomplete(f"broker {node} did not answer a metadata request at "
                                    f"{self.addresses.get(node)} within {timeout:g}s of "
                                    "its start command")
            self.rt.sleep(0.2)

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
