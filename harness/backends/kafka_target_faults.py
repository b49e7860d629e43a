"""Process faults on an existing Kafka cluster's brokers: the target hosts file's
`kafka:` commands (harness/backends/kafka_target_hosts.py), run over SSH on each
broker's host (harness/backends/ssh_remote.py).

isrlab sees the brokers' processes only through what it did to them, so each
broker's state here is that: running, down (killed or stopped) or paused. A
state is set before its command runs: a command cut short (Ctrl-C, a lost
connection) leaves the broker marked faulted, and `recover_all` -- at the end
of every run, also a failed or interrupted one -- starts or resumes it. Such a
broker is `doubtful` until a command on it completes; a doubtful "down" one
that answers a metadata request is not started a second time.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass

from harness.backends.fanout import parallel
from harness.backends.kafka_target_hosts import NEEDS, PATTERN, TargetBroker, TargetHosts
from harness.backends.ssh_remote import Remote
from harness.errors import HarnessError, RunIncomplete, UsageError

RUNNING, DOWN, PAUSED = "running", "down", "paused"


@dataclass
class _State:
    state: str = RUNNING
    doubtful: bool = False


class BrokerFaults:
    """The brokers of a target hosts file: their SSH connections and fault commands.
    `ready(node, timeout)` is how a started broker is known to be up (the backend's:
    a Kafka client's metadata request to it)."""

    def __init__(self, hosts: TargetHosts,
                 ready: Callable[[str, float], None],
                 answers: Callable[[str], bool]) -> None:
        self.hosts = hosts
        self.ready = ready
        self.answers = answers  # the broker answers a metadata request now
        self._remotes: dict[str, Remote] = {}  # Host.target -> its connection
        self._states = {n: _State() for n in hosts.brokers}
        self._lock = threading.Lock()

    @property
    def brokers(self) -> list[str]:
        return list(self.hosts.brokers)

    # -- before the run ----------------------------------------------------------

    def check(self, faults: set[str]) -> None:
        """Connect to every broker's host, in parallel, and check there what the
        faults' commands need; UsageError naming the host otherwise."""
        by_target: dict[str, list[TargetBroker]] = {}
        for b in self.hosts.brokers.values():
            by_target.setdefault(b.host.target, []).append(b)
        try:
            parallel(by_target.values(), lambda bs: self._preflight(bs, faults))
        except BaseException:
            self.close()
            raise

    def _preflight(self, brokers: list[TargetBroker], faults: set[str]) -> None:
        host = brokers[0].host
        remote = Remote(host).connect()  # UsageError: unreachable, key, host key
        with self._lock:
            self._remotes[host.target] = remote
        if host.sudo:
            code, out = remote.run("sudo -n true", check=False)
            if code != 0:
                raise UsageError(f"{host.label()}: sudo: true, but `sudo -n` does not work "
                                 f"there: {out.strip()[-200:]}")
        # The default commands find the broker by its main class: without pkill, or
        # with nothing to find, every fault of the run would miss.
        defaulted = any(c in b.defaulted for b in brokers for c in ("kill", "stop", "pause")
                        if any(c in NEEDS.get(f, ()) for f in faults))
        if defaulted:
            code, _ = remote.run(self._wrap(host.sudo, "command -v pkill && command -v pgrep"),
                                 check=False)
            if code != 0:
                raise UsageError(f"{host.label()}: no pkill/pgrep (procps) for the default "
                                 f"kafka commands; install procps or give the commands in "
                                 f"{self.hosts.path}")
            code, _ = remote.run(self._wrap(host.sudo, f"pgrep -f {PATTERN}"), check=False)
            if code != 0:
                raise UsageError(f"{host.label()}: no process matches {PATTERN} (Kafka's "
                                 f"main class, what the default kafka commands signal); "
                                 f"give the commands in {self.hosts.path}")

    # -- faults ---------------------------------------------------------------------

    def is_running(self, node: str) -> bool:
        return self._states[node].state in (RUNNING, PAUSED)

    def is_paused(self, node: str) -> bool:
        return self._states[node].state == PAUSED

    def kill(self, node: str) -> None:
        self._fault(node, "kill", DOWN)

    def stop(self, node: str) -> None:
        self._fault(node, "stop", DOWN)

    def pause(self, node: str) -> None:
        self._fault(node, "pause", PAUSED)

    def resume(self, node: str) -> None:
        self._fault(node, "resume", RUNNING)

    def start(self, node: str) -> None:
        """Start a down broker and return once it answers; a running one is left
        alone (the run's start finds the cluster running)."""
        st = self._states[node]
        if st.state == RUNNING and not st.doubtful:
            return
        if st.state == PAUSED:
            raise RunIncomplete(f"cannot start broker {node}: it is paused")
        self._fault(node, "start", RUNNING)
        b = self.hosts.brokers[node]
        self.ready(node, b.ready_timeout)

    def _fault(self, node: str, what: str, after: str) -> None:
        b = self.hosts.brokers[node]
        if what not in b.commands:
            raise RunIncomplete(f"broker {node}: no kafka.{what} command in {self.hosts.path}")
        st = self._states[node]
        # Marked before the command runs: one cut short is recovered at the end.
        st.state, st.doubtful = after, True
        self._remote(b).run(self._wrap(b.host.sudo, b.commands[what]))
        st.doubtful = False

    def recover_all(self) -> list[str]:
        """Resume every paused broker, start every down one; what was done, as
        "resume 2" / "start 1". One after another: this also runs at interpreter
        exit (atexit), where no thread pool starts. Every broker is tried; the
        first failure is raised after."""
        done: list[str] = []
        errors: list[HarnessError] = []
        for node, st in self._states.items():
            try:
                if st.state == PAUSED:
                    self.resume(node)
                    done.append(f"resume {node}")
                elif st.state == DOWN:
                    if st.doubtful and self.answers(node):
                        st.state, st.doubtful = RUNNING, False  # its fault never happened
                        continue
                    self.start(node)
                    done.append(f"start {node}")
            except HarnessError as e:
                errors.append(e)
        if errors:
            raise errors[0]
        return done

    # -- connections -----------------------------------------------------------------

    def _remote(self, b: TargetBroker) -> Remote:
        with self._lock:
            remote = self._remotes.get(b.host.target)
        if remote is None or not remote.connected:
            # A connection lost mid-run (a host's sshd restarted): once more, as the
            # recovery at the end must still reach the host.
            try:
                remote = Remote(b.host).connect()
            except UsageError as e:
                raise RunIncomplete(str(e)) from None
            with self._lock:
                self._remotes[b.host.target] = remote
        return remote

    @staticmethod
    def _wrap(sudo: bool, command: str) -> str:
        return f"sudo -n sh -c {shlex.quote(command)}" if sudo else command

    def close(self) -> None:
        with self._lock:
            remotes, self._remotes = list(self._remotes.values()), {}
        for r in remotes:
            r.close()

