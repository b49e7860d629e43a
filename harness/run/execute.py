"""Executing scenario steps against a running cluster.

Each step kind has one method. Waits poll observable state (observer.py); an
event wait sees only events since its anchor, by default the start of the most
recent non-wait step: the action whose consequence it waits for. That keeps a
wait from matching an older event of the same shape (scenario 3 elects B twice)
while still seeing an event that happened before the wait began.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contract import CONTROLLER, PROCESS_FAULTS
from contract.history import History
from generator import Gen, cycle, once, phases, sleep
from harness.backends import admin
from harness.backends.base import Backend
from harness.errors import RunIncomplete
from harness.progress import Progress
from harness.run.observer import Observer, wait_for
from harness.scenario.steps import TIMED_FAULTS, Step
from nemesis.faults import Nemesis
from nemesis.schedule import grudge_for
from workloads.client import ClusterClient
from workloads.client_ops import ClientConsumer, ClientProducer, KafkaClients
from workloads.consumer import Consumer, FinalReadError, final_read
from workloads.continuous import ContinuousWorkload
from workloads.producer import Producer, Values
from workloads.runtime import REAL, Flag, Runtime, Task

_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a is not None and a < b,
    "le": lambda a, b: a is not None and a <= b,
    "gt": lambda a, b: a is not None and a > b,
    "ge": lambda a, b: a is not None and a >= b,
}


def _same(field_name: str, a: Any, b: Any) -> bool:
    if field_name == "isr" and isinstance(a, list) and isinstance(b, list):
        return sorted(a) == sorted(b)  # the ISR is a set
    return a == b


@dataclass
class StepContext:
    backend: Backend
    history: History
    nemesis: Nemesis
    observer: Observer
    producer: Producer | ClientProducer
    consumer: Consumer | ClientConsumer
    values: Values
    progress: Progress
    labels: dict[str, list[int]] = field(default_factory=dict)
    action_started: int = 0  # ns since run start of the latest non-wait step
    # The continuous background workload (workload `producers`/`consumers`): it
    # stops before the final read, so the read sees every send completed.
    background: ContinuousWorkload | None = None
    steps_started: float | None = None  # rt.monotonic() when the first step began
    # For `load` steps: the cluster client, the workload's settings, the run's seed.
    client: ClusterClient | None = None
    workload: dict[str, Any] = field(default_factory=dict)
    # The workload's real Kafka client (None: the builtin one), for `load` steps too.
    clients: KafkaClients | None = None
    seed: int = 0
    load: ContinuousWorkload | None = None  # the producers a `load` step started
    # Timed faults' scheduled undos (pause for: a resume), not yet done, each with
    # the flag that cancels it.
    timers: list[tuple[Task, Flag]] = field(default_factory=list)
    # Clock, connections and concurrency (the sim backend's virtual ones, or real).
    rt: Runtime = REAL

    def __post_init__(self) -> None:
        # One nemesis op at a time: a timer's resume may fire while a step's fault
        # runs, and the nemesis process has one op in flight (Jepsen's model).
        self.nemesis_lock = self.rt.lock()

    def settle_timers(self) -> None:
        """Let every scheduled undo happen (before a final read or recover)."""
        for t, _ in list(self.timers):
            t.join()
        self.timers.clear()

    def close(self) -> None:
        """A run ending (also by an error): no undo fires after this, load stops."""
        for _, cancel in self.timers:
            cancel.set()
        for t, _ in self.timers:
            t.join()
        self.timers.clear()
        if self.load is not None:
            self.load.stop()
            self.load = None
        for c in (self.producer, self.consumer):
            if c is not None:
                c.close()


def bursts(partitions: list[tuple[str, int]], size: int, every: float) -> Gen:
    """`size` sends due at the same instant, every `every` seconds: a producer
    flushing a full batch (workloads.continuous batches them into one request)."""

    def one(rng: Any) -> Gen:
        topic, partition = rng.choice(partitions)
        op = {"f": "send", "topic": topic, "partition": partition}
        return phases(sleep(every), *[once(op) for _ in range(size)])

    return cycle(one)


class StepRunner:
    def __init__(self, ctx: StepContext, where: str) -> None:
        self.ctx = ctx
        self.where = where  # the scenario file, for error messages

    def run(self, step: Step) -> None:
        ctx = self.ctx
        started = ctx.history.clock.now()
        if step.kind != "wait":
            ctx.action_started = started
        if ctx.steps_started is None:
            ctx.steps_started = ctx.rt.monotonic()
        if step.kind != "sleep":  # a schedule's sleeps would drown its faults
            where = f" (line {step.line})" if step.line else ""
            ctx.progress.line(f"step {step.index}{where}: {step.describe()}")
        try:
            if step.kind in PROCESS_FAULTS:
                nodes = self._targets(step.args)
                if "target" in step.args and step.kind != "start":
                    # A chaos schedule drew its nodes in advance: one may have gone
                    # down since (0.10-2.0 halt a broker). As Jepsen's nemesis, a
                    # fault on a process that is not running does nothing.
                    down = [n for n in nodes if not ctx.backend.is_running(n)]
                    if down:
                        ctx.progress.line(f"  {step.kind}: {', '.join(down)} not running; "
                                          "left alone")
                    nodes = [n for n in nodes if n not in down]
                    if not nodes:
                        return
                with ctx.nemesis_lock:
                    ctx.nemesis.invoke(step.kind, nodes)
                if step.args.get("for") is not None:
                    self._schedule_undo(step.kind, nodes, step.args["for"])
            elif step.kind == "load":
                self._load(step)
            elif step.kind in ("partition", "heal", "delay", "deliver"):
                with ctx.nemesis_lock:
                    self._network(step)
            elif step.kind == "recover":
                ctx.settle_timers()
                for op in ctx.nemesis.heal_all():
                    ctx.progress.line(f"  recovered: {recovery_text(op)}")
            else:
                getattr(self, "_" + step.kind.replace("-", "_"))(step, started)
        except RunIncomplete as e:
            raise RunIncomplete(f"{self.where}:{step.line}: step {step.index} "
                                f"({step.describe()}): {e}") from e

    def _targets(self, a: dict[str, Any]) -> list[str]:
        """A fault's nodes: as given, or (a chaos `leader` target) the broker the
        controller names as the partition's leader now -- if none does (an
        election under way), its first replica, so the schedule still runs."""
        if "nodes" in a:
            return list(a["nodes"])
        st = self.ctx.observer.partition(CONTROLLER, a["topic"], a["partition"])
        leader = st.get("leader") if st is not None else None
        if leader not in self.ctx.backend.brokers:
            for t in self.ctx.backend.spec.topics:
                if t["name"] == a["topic"]:
                    leader = t["replicas"][a["partition"]][0]
            self.ctx.progress.line(f"  no leader of {a['topic']}/{a['partition']} known; "
                                   f"targeting {leader}")
        return [leader]

    def _network(self, step: Step) -> None:
        ctx = self.ctx
        if step.kind == "partition":
            grudge = step.args.get("grudge")
            if grudge is None:  # isolate / cut-controller of a leader, drawn now
                grudge = grudge_for(step.args["shape"], self._targets(step.args),
                                    ctx.backend.brokers)
            ctx.nemesis.partition(grudge)
        elif step.kind == "heal":
            ctx.nemesis.heal()
        elif step.kind == "delay":
            a = step.args
            spec = {k: a[k] for k in ("from", "to", "for", "requests") if a[k] is not None}
            ctx.nemesis.delay(spec, a["plan"])
        else:
            ctx.nemesis.deliver()

    def _schedule_undo(self, kind: str, nodes: list[str], seconds: float) -> None:
        """`pause: {node: C, for: 100ms}`: the resume runs on a timer thread, so it
        comes when due whatever the following steps do meanwhile."""
        ctx, undo = self.ctx, TIMED_FAULTS[kind]
        cancel = ctx.rt.flag()

        def fire() -> None:
            if cancel.wait(seconds):
                return  # the run ended first
            with ctx.nemesis_lock:
                try:
                    ctx.nemesis.invoke(undo, nodes)
                    ctx.progress.line(f"  timed: {undo} {', '.join(nodes)} "
                                      f"({seconds * 1000:g} ms after {kind})")
                except Exception as e:  # noqa: BLE001 - said; the final read resumes it
                    ctx.progress.line(f"  timed {undo} {', '.join(nodes)} failed: {e}")

        ctx.timers.append((ctx.rt.spawn(fire, f"timed-{undo}"), cancel))

    def _load(self, step: Step) -> None:
        """Start background producers (replacing any a previous `load` started), or
        stop them. Their sends are ops of processes 100.. in the same history."""
        a, ctx = step.args, self.ctx
        if ctx.load is not None:
            ctx.load.stop()
            ctx.load = None
            ctx.progress.line("  load stopped")
        if a["stop"]:
            return
        assert ctx.client is not None
        w = ctx.workload
        parts = [(a["topic"], a["partition"])]
        burst = a["burst"]
        ctx.load = ContinuousWorkload(
            ctx.client, ctx.history, ctx.values, partitions=parts, producers=a["producers"],
            consumers=0, rate=a["rate"] or 1.0, seed=ctx.seed + step.index, acks=a["acks"],
            timeout_ms=w.get("timeout_ms", 5000), retry_ms=w.get("retry_ms", 10000),
            # A burst goes as one produce request, appended at once (a full batch).
            batch=burst or 1, linger=0.005,
            stream=bursts(parts, burst, a["every"]) if burst else None,
            clients=ctx.clients)
        ctx.load.start()

    def _sleep(self, step: Step, started: int) -> None:
        a, ctx = step.args, self.ctx
        if "until" in a:
            assert ctx.steps_started is not None
            delay = ctx.steps_started + a["until"] - ctx.rt.monotonic()
        else:
            delay = a["seconds"]
        if delay > 0:
            ctx.rt.sleep(delay)  # on the main thread: Ctrl-C interrupts it

    # -- workload ----------------------------------------------------------

    def _produce(self, step: Step, started: int) -> None:
        a, ctx = step.args, self.ctx
        for _ in range(a["n"]):
            value = ctx.values.next()
            if a["label"]:
                ctx.labels.setdefault(a["label"], []).append(value)
            op = ctx.producer.send(a["topic"], a["partition"], value, acks=a["acks"],
                                   label=a["label"])
            detail = f"offset {op['offset']}" if "offset" in op else op.get("error", "")
            ctx.progress.line(f"  send {value} -> {op['type']} {detail}".rstrip())
            if not _outcome_matches(a["expect"], op["type"]):
                raise RunIncomplete(f"send {value} expected {a['expect']}, got {op['type']}"
                                    f" ({op.get('error', 'no error')})")

    def _consume(self, step: Step, started: int) -> None:
        for _ in range(step.args["n"]):
            op = self.ctx.consumer.poll()
            self.ctx.progress.line(f"  poll -> {op['type']} {len(op.get('records', []))} "
                                   f"record(s), hw {op.get('hw')}")

    def _admin(self, step: Step, started: int) -> None:
        for node in step.args["nodes"]:
            if not self.ctx.backend.is_reachable(node):
                raise RunIncomplete(f"{node} is not running")
            admin.command(node, self.ctx.backend.address(node), step.args["op"],
                          rt=self.ctx.rt)

    # -- waits -------------------------------------------------------------

    def _wait(self, step: Step, started: int) -> None:
        a = step.args
        if a.get("running") is not None:
            backend = self.ctx.backend
            wait_for(lambda: backend.is_running(a["node"]) == a["running"], a["timeout"],
                     what=f"{a['node']} {'running' if a['running'] else 'exited'}",
                     last_seen=lambda: "running" if backend.is_running(a["node"]) else "exited",
                     rt=self.ctx.rt)
            return
        if a["event"] is not None:
            since = {"action": self.ctx.action_started, "step": started, "run": None}[a["since"]]
            ev = wait_for(
                lambda: self.ctx.observer.events(node=a["node"], type=a["event"], since=since,
                                                 match=a["conditions"]),
                a["timeout"],
                what=f"event {a['event']} on {a['node']} with {a['conditions']}",
                last_seen=lambda: self._recent_events(a["node"], since),
                rt=self.ctx.rt,
            )
            self.ctx.progress.line(f"  seen {a['event']} at {ev[0].get('time', 0) / 1e9:.3f}s")
            return
        last: dict[str, Any] = {}
        wait_for(
            lambda: self._status_holds(a, last),
            a["timeout"],
            what=f"{a['node']} {a['conditions']}",
            last_seen=lambda: last.get("seen"),
            rt=self.ctx.rt,
        )

    def _status_holds(self, a: dict[str, Any], last: dict[str, Any]) -> bool:
        obs = self.ctx.observer
        p = obs.partition(a["node"], a["topic"], a["partition"])
        last["seen"] = p if p is not None else f"{a['node']} not answering"
        if p is None:
            return False
        for name, want in a["conditions"].items():
            have = p.get(name)
            if isinstance(want, dict):
                (op, x), = want.items()
                if op == "same-as":
                    other = obs.partition(x, a["topic"], a["partition"])
                    if other is None or not _same(name, have, other.get(name)):
                        last["seen"] = {"self": p, x: other}
                        return False
                elif op in ("eq", "ne"):
                    if _same(name, have, x) != (op == "eq"):
                        return False
                elif not _COMPARE[op](have, x):
                    return False
            elif not _same(name, have, want):
                return False
        return True

    def _recent_events(self, node: str, since: int | None) -> list[dict[str, Any]]:
        evs = self.ctx.observer.events(node=node, since=since)
        return [{k: v for k, v in e.items() if k not in ("unix_ns", "incarnation", "seq")}
                for e in evs[-5:]]

    # -- the final read ----------------------------------------------------

    def _final_read(self, step: Step, started: int) -> None:
        ctx = self.ctx
        if ctx.background is not None:
            ctx.progress.line("  stopping the background workload")
            ctx.background.stop()
        if ctx.load is not None:
            ctx.progress.line("  stopping the load")
            ctx.load.stop()
            ctx.load = None
        ctx.settle_timers()
        if step.args["heal"]:
            for op in ctx.nemesis.heal_all():
                ctx.progress.line(f"  healed: {recovery_text(op)}")
        if not ctx.observer.sees_replicas:
            self._final_read_client(step)
            return
        for topic in ctx.backend.spec.topics:
            for partition, replicas in enumerate(topic["replicas"]):
                deadline = ctx.rt.monotonic() + step.args["timeout"]
                while True:
                    leader, addr = self._await_converged(
                        topic["name"], partition, replicas,
                        max(deadline - ctx.rt.monotonic(), 0.001))
                    try:
                        op = final_read(ctx.history, leader, addr, topic["name"], partition,
                                        rt=ctx.rt)
                        break
                    except FinalReadError as e:
                        # The leader moved while it was read (a session lost on a lossy
                        # network), or the read's messages were: converge and read
                        # again (the failed read is in the history as `fail`).
                        if ctx.rt.monotonic() >= deadline:
                            raise RunIncomplete(str(e)) from e
                        ctx.progress.line(f"  {e}: reading again")
                        ctx.rt.sleep(0.1)
                ctx.progress.line(f"  final read {topic['name']}/{partition} from {leader}: "
                                  f"{len(op['records'])} record(s), hw {op['hw']}")

    def _final_read_client(self, step: Step) -> None:
        """An external cluster's final read, through the workload's client: isrlab
        sees neither its replicas' convergence nor its leaders, so each partition
        is read up to the HW the client reports (workloads.client_ops)."""
        ctx = self.ctx
        assert ctx.clients is not None  # an external target always has a real client
        for topic in ctx.backend.spec.topics:
            for partition in range(topic["partitions"]):
                try:
                    op = ctx.clients.final_read(ctx.history, topic["name"], partition,
                                                step.args["timeout"])
                except FinalReadError as e:
                    raise RunIncomplete(str(e)) from e
                ctx.progress.line(f"  final read {topic['name']}/{partition} through "
                                  f"{ctx.clients.client}: {len(op['records'])} record(s), "
                                  f"hw {op['hw']}")

    def _await_converged(self, topic: str, partition: int, replicas: list[str],
                         timeout: float) -> tuple[str, str]:
        last: dict[str, Any] = {}
        return wait_for(
            lambda: self._converged(topic, partition, replicas, last),
            timeout,
            what=f"{topic}/{partition} to converge (every replica at the leader's LEO, "
                 f"leader HW = LEO)",
            last_seen=lambda: last.get("seen"),
            rt=self.ctx.rt,
        )

    def _converged(self, topic: str, partition: int, replicas: list[str],
                   last: dict[str, Any]) -> tuple[str, str] | None:
        obs = self.ctx.observer
        # A broker that is not running here exited by itself (0.10-2.0 halt a
        # follower whose log is ahead of the leader's when truncation is not
        # allowed -- handleOffsetOutOfRange, until KAFKA-7414 -- and again on every
        # restart) or was left down: it stays down, as in Kafka until an operator
        # acts. The others converge without it; its log is collected as it is.
        live = [n for n in replicas if self.ctx.backend.is_running(n)]
        view = {n: obs.partition(n, topic, partition) for n in live}
        ctrl = obs.partition(CONTROLLER, topic, partition)
        last["seen"] = {"controller": ctrl, **view,
                        **{n: "not running" for n in replicas if n not in live}}
        if ctrl is None or any(p is None for p in view.values()):
            return None
        leader = ctrl.get("leader")
        lp = view.get(leader) if leader is not None else None
        if lp is None or lp.get("role") != "leader" or lp.get("hw") != lp.get("leo"):
            return None
        for name, p in view.items():
            if name == leader:
                continue
            # The follower's own LEO is not enough: before its first fetch from this
            # leader it may hold a diverging suffix of the same length (KAFKA-10554,
            # 2.8.0: truncation on fetch). The leader counts a follower's LEO only from a
            # fetch without a diverging epoch, so both must reach the leader's LEO.
            if p.get("role") != "follower" or p.get("leader") != leader \
                    or p.get("leo") != lp.get("leo") \
                    or (lp.get("remote_leo") or {}).get(name) != lp.get("leo"):
                return None
        return leader, self.ctx.backend.address(leader)


def recovery_text(op: dict[str, Any]) -> str:
    """A recovery op (Nemesis.heal_all's) for a progress line: `heal` has no value
    (it restores every link and delivers what delays hold), the others name nodes."""
    if op["f"] == "heal":
        return "heal (every link restored, held messages delivered)"
    v = op["value"]
    return f"{op['f']} {', '.join(v) if isinstance(v, list) else v}"


def _outcome_matches(expect: str, outcome: str) -> bool:
    if expect == "any":
        return True
    if expect == "not-ok":
        return outcome != "ok"
    return outcome == expect
