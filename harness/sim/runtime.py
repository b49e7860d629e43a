"""The sim backend's runtime (workloads.runtime): virtual time, the simulated
network and greenlets.

The harness's clients, workload and scenario steps are blocking code: a send
waits for its answer, a wait polls and sleeps. Under the simulator each of them
runs in a greenlet, and every blocking call hands control to the hub, a
greenlet that carries out the cluster's events in (virtual time, sequence)
order until the caller's answer arrives or its time comes. Exactly one greenlet
runs at a time and the hub decides which, from the seeded event queue alone, so
a run is the same every time: no wall clock, no OS thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from greenlet import getcurrent, greenlet

from broker.sim_cluster import SimCluster
from broker.wire import WireError
from workloads.runtime import NotSent, Runtime


class SimRuntime(Runtime):
    def __init__(self, cluster: SimCluster, address_of: Callable[[str], str]) -> None:
        super().__init__()  # an idle-connection pool no request here uses
        self.cluster = cluster
        self.node_of = address_of  # a harness address ("sim:A") -> the node
        # Created here so that its parent is the run's own greenlet: an error in an
        # event (or in a spawned task) ends the hub and surfaces in the run.
        self._hub = greenlet(self._loop)

    # -- blocking and waking ------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            self.cluster.run_one()

    def _block(self) -> Any:
        """Give control to the hub until something wakes this greenlet (with a value)."""
        return self._hub.switch()

    def _waker(self) -> Callable[[Any], None]:
        """A function that wakes the calling greenlet once, from an event."""
        me = getcurrent()
        state = {"woken": False}

        def wake(value: Any = None) -> None:
            if not state["woken"]:
                state["woken"] = True
                me.switch(value)

        return wake

    # -- Runtime ------------------------------------------------------------------------

    def monotonic(self) -> float:
        return self.cluster.now / 1000

    def sleep(self, seconds: float) -> None:
        wake = self._waker()
        self.cluster.at(self.cluster.now + max(seconds, 0) * 1000, wake)
        self._block()

    def request(self, addr: str, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        wake = self._waker()
        node = self.node_of(addr)
        self.cluster.request(node, msg, timeout * 1000, wake)
        resp = self._block()
        if resp == "refused":
            raise NotSent(f"{addr}: connection refused")
        if resp is None:
            raise WireError(f"{addr}: timed out after {timeout:g}s")
        return resp

    def send_only(self, addr: str, msg: dict[str, Any], timeout: float) -> None:
        node = self.node_of(addr)
        if not self.cluster.nodes[node].up:
            raise NotSent(f"{addr}: connection refused")
        self.cluster.request(node, msg, timeout * 1000, lambda _resp: None)

    def spawn(self, target: Callable[[], None], name: str) -> SimTask:
        task = SimTask(self, target)
        self.cluster.at(self.cluster.now, task.begin)
        return task

    def flag(self) -> SimFlag:
        return SimFlag(self)

    def lock(self) -> SimLock:
        return SimLock(self)


class SimTask:
    """A spawned greenlet; its parent is the hub, so its end returns there."""

    def __init__(self, rt: SimRuntime, target: Callable[[], None]) -> None:
        self.rt = rt
        self.target = target
        self.done = False
        self._joiners: list[Callable[[Any], None]] = []
        self._g: greenlet | None = None

    def begin(self) -> None:
        self._g = greenlet(self._run, parent=getcurrent())
        self._g.switch()

    def _run(self) -> None:
        try:
            self.target()
        finally:
            self.done = True
            for wake in self._joiners:
                self.rt.cluster.at(self.rt.cluster.now, wake)

    def join(self, timeout: float | None = None) -> None:
        if self.done:
            return
        wake = self.rt._waker()
        self._joiners.append(wake)
        if timeout is not None:
            self.rt.cluster.at(self.rt.cluster.now + timeout * 1000, wake)
        self.rt._block()

    def is_alive(self) -> bool:
        return not self.done


class SimFlag:
    """threading.Event on virtual time."""

    def __init__(self, rt: SimRuntime) -> None:
        self.rt = rt
        self._set = False
        self._waiters: list[Callable[[Any], None]] = []

    def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, []
        for wake in waiters:
            self.rt.cluster.at(self.rt.cluster.now, lambda w=wake: w(True))

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        wake = self.rt._waker()
        self._waiters.append(wake)
        if timeout is not None:
            self.rt.cluster.at(self.rt.cluster.now + timeout * 1000, lambda: wake(False))
        self.rt._block()
        return self._set


class SimLock:
    """A re-entrant lock between greenlets."""

    def __init__(self, rt: SimRuntime) -> None:
        self.rt = rt
        self._owner: greenlet | None = None
        self._depth = 0
        self._waiters: list[Callable[[Any], None]] = []

    def __enter__(self) -> SimLock:
        me = getcurrent()
        while self._owner is not None and self._owner is not me:
            self._waiters.append(self.rt._waker())
            self.rt._block()
        self._owner = me
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            if self._waiters:
                wake = self._waiters.pop(0)
                self.rt.cluster.at(self.rt.cluster.now, wake)
