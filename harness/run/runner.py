"""One run of a scenario, start to finish, writing its run directory.

Order: run directory and run.json (status "running", with its owner: this
process) -> cluster up (controller, brokers, leaders known) -> events collector
-> steps -> replicas collected -> teardown (always, in a finally) -> run.json
closed. A harness killed before the end leaves a "running" run whose owner is
gone: `isrlab collect` finishes it (harness.run.collect.collect_crashed). The
harness never judges: checking is the checker's job, called by the CLI afterwards.

A run directory that cannot be written (a full disk, a read-only mount) when the
run starts is a UsageError, nothing started and nothing left behind. During the
run, the first failed write stops it (harness.run.halt) and is its error; the run
is closed as any incomplete one, run.json written into the room its directory
kept for that (contract.rundir.RESERVE).
"""

from __future__ import annotations

import importlib
import os
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract import COMPLETE, INCOMPLETE, LOGS, RUN_JSON, RUNNING
from contract.history import History
from contract.rundir import RunDirWriter, RunWriteError, RunWrites, new_run_id, utc_now
from contract.secrets import redacted_workload
from harness.backends import backend_class, make_backend, reaper
from harness.backends.base import Backend
from harness.backends.owner import Owner
from harness.backends.spec import ClusterSpec
from harness.errors import HarnessError, Interrupted, RunIncomplete, UsageError
from harness.progress import Progress, StatusTicker
from harness.run.collect import hosted_partitions, offline_replicas
from harness.run.execute import StepContext, StepRunner
from harness.run.halt import HaltingRuntime
from harness.run.watch import Watch
from harness.scenario.loader import Scenario, workload_partitions
from harness.scenario.steps import Step
from nemesis.faults import FaultWindow, Nemesis
from workloads.client import ClusterClient
from workloads.client_ops import KafkaClients
from workloads.consumer import Consumer
from workloads.continuous import ContinuousWorkload
from workloads.kafka_clients import ClientConfigError, require_client
from workloads.producer import Producer, Values


@dataclass
class RunOptions:
    protocol: str
    backend: str = "local"
    seed: int | None = None
    runs_dir: Path = Path("runs")
    backend_options: dict[str, Any] = field(default_factory=dict)
    # More run.json fields, written when the run starts (a chaos run's `chaos`
    # block); they override the scenario's (a chaos run has `scenario: null`).
    meta: dict[str, Any] = field(default_factory=dict)
    # Every this many seconds, one status line (ops/s, faults, time left) while
    # the steps run; None: none. `status_prefix` starts it ("run 2/3").
    status_every: float | None = None
    status_prefix: str = ""
    time_limit: float | None = None  # for "time left" in the status line
    # Called once the run can start (its addresses reserved), before the nodes
    # start: `reproduce` starts the checker's JVM here, to warm while the cluster
    # works -- never for a run refused before it started.
    on_start: Callable[[], None] | None = None


@dataclass
class RunRecord:
    run_id: str
    run_dir: Path
    error: HarnessError | RunWriteError | None
    elapsed: float


def kafka_clients(workload: dict[str, Any], backend: Any, run_dir: Path) -> KafkaClients | None:
    """The workload's real Kafka client (None: the builtin one), on the cluster's
    Kafka listeners, logging to the run's logs/clients.log."""
    if not workload.get("client"):
        return None
    return KafkaClients(workload["client"], backend.kafka_bootstrap(),
                        workload.get("config"), log=run_dir / LOGS / "clients.log")


def run_scenario(scenario: Scenario, opts: RunOptions, progress: Progress) -> RunRecord:
    """Run one scenario. A run that cannot complete (including Ctrl-C, a write of
    its directory that fails) is returned with `error` set and its run directory
    finalized as incomplete. Raises UsageError, before starting anything, if the
    scenario's path is not reachable under the protocol (its `reachable`), the
    cluster's addresses are taken or the run directory cannot be written."""
    session = RunSession(scenario, opts, progress)
    try:
        session.start()
        session.start_workload()
        session.run_steps()
    except (Exception, KeyboardInterrupt) as e:
        session.failed(e)
    finally:
        session.close()
    return session.record()


class RunSession:
    """One run as a session: opened (the constructor: run directory and run.json,
    nothing started, a UsageError if it cannot be), started (the cluster up), its
    workload started, its steps run, closed (always: replicas collected, teardown,
    run.json closed) -- each a method, so what a backend does differently is the
    backend's and its Watch's, never a switch here."""

    def __init__(self, scenario: Scenario, opts: RunOptions, progress: Progress) -> None:
        scenario.require_reachable(opts.protocol)  # a run there would be a verdict on nothing
        self.t0 = time.monotonic()
        self.scenario, self.opts, self.progress = scenario, opts, progress
        seed = opts.seed if opts.seed is not None else int.from_bytes(os.urandom(4), "big")
        self.seed = seed
        run_id = new_run_id(scenario.run_name, opts.protocol)
        spec = self.spec = scenario.cluster_spec(opts.protocol)
        options = dict(opts.backend_options)
        if backend_class(opts.backend).deterministic:
            options["seed"] = seed
        if scenario.workload.get("client") and backend_class(opts.backend).deterministic:
            raise UsageError(f"workload client {scenario.workload['client']}: a real Kafka "
                             f"client needs real brokers; run it on the local, docker or ssh "
                             f"backend")
        if scenario.workload.get("client"):
            try:  # a client not installed here (kcat), or a setting it refuses, is said
                # before anything starts
                require_client(scenario.workload["client"],
                               scenario.workload.get("config") or {},
                               scenario.workload.get("acks", "all"))
            except ClientConfigError as e:
                raise UsageError(str(e)) from None
        backend = self.backend = make_backend(opts.backend, spec, opts.runs_dir / run_id,
                                              **options)
        self.steps = scenario.steps_for(opts.protocol)
        backend.expect({s.kind for s in self.steps})
        # A taken address is a configuration error: fail before anything exists. The
        # addresses stay reserved for this run until its teardown (ports.reserve).
        try:
            backend.check_addresses()
        except BaseException:
            backend.release_addresses()
            raise
        # An interrupt from here until start() would leave a directory without
        # run.json, or one marked running by a harness that exited: held until then.
        reaper.hold()
        writes = self.writes = RunWrites()
        watch = self.watch = _watch(backend)
        clock = watch.clock()
        opened: list[Callable[[], None]] = []  # closes what the start opened, if it fails
        try:
            run = self.run = RunDirWriter(opts.runs_dir, run_id, writes=writes)
            # The history and events files exist before run.json says "running": a
            # harness killed right after writing it leaves a (empty) prefix to check.
            history = self.history = History(run.history, clock, writes)
            opened.append(history.close)
            collector = self.collector = watch.events_collector(clock, run.events, writes)
            opened.append(collector.stop)
            run.write_meta(**_start_meta(scenario, opts, spec, backend, self.steps, seed,
                                         clock.start_unix_ns))
        except RunWriteError as e:
            # Nothing started: what this run created goes (its id is new), and the
            # runs directory is the user's to fix.
            for close in opened:
                close()
            shutil.rmtree(opts.runs_dir / run_id, ignore_errors=True)
            backend.release_addresses()
            reaper.release()
            raise UsageError(f"{e}; nothing was started") from None
        progress.line(f"run {run.run_id}: {scenario.name} under {opts.protocol} "
                      f"on {opts.backend} (seed {seed})")
        if opts.on_start is not None:
            opts.on_start()
        self.nemesis = Nemesis(backend, history, before_fault=collector.drain,
                               on_window=lambda w: _window(progress, w))
        self.error: HarnessError | RunWriteError | None = None
        self.labels: dict[str, list[int]] = {}
        self.background: ContinuousWorkload | None = None
        self.ticker: StatusTicker | None = None
        self.observer = watch.observer(collector)
        # What the steps wait on: its sleeps end once a write of the run has failed.
        self.rt = HaltingRuntime(backend.rt, writes)
        self.ctx: StepContext | None = None
        self.up = False  # the cluster came up: from here on the run is one to keep

    def start(self) -> None:
        """The cluster up: controller, events collector, brokers, every leader known."""
        backend, spec = self.backend, self.spec
        reaper.release()
        backend.start_controller()
        self.collector.start()
        for node in spec.brokers:
            backend.start(node)
        self.watch.wait_ready(self.observer, self.rt)
        self.up = True
        self.progress.line("cluster up: " + ", ".join(f"{n}@{backend.address(n)}"
                                                      for n in spec.brokers))

    def start_workload(self) -> None:
        """The clients (isrlab's own, or the workload's real Kafka client), the
        background producers and consumers if any, the status ticker, and the steps'
        context."""
        backend, history, w, seed = self.backend, self.history, self.scenario.workload, self.seed
        client = ClusterClient(lambda: {n: backend.address(n) for n in backend.brokers
                                        if backend.is_reachable(n)}, rt=backend.rt)
        values = Values()
        clients = kafka_clients(w, backend, self.run.path)
        if w["consumers"] or w["producers"]:
            self.background = ContinuousWorkload(
                client, history, values, partitions=workload_partitions(w, self.spec.topics),
                producers=w["producers"], consumers=w["consumers"], rate=w["rate"],
                seed=w.get("seed", seed), acks=w["acks"], timeout_ms=w["timeout_ms"],
                retry_ms=w["retry_ms"], batch=w.get("batch", 1), linger=w.get("linger", 0.005),
                max_records=w.get("max_records", 100),
                poll_interval=w.get("poll_interval", 0.05), clients=clients)
            self.background.start()
        opts = self.opts
        if opts.status_every is not None:
            self.ticker = StatusTicker(self.progress, opts.status_every, opts.status_prefix,
                                       self.background, self.nemesis, opts.time_limit)
            self.ticker.start()
        self.ctx = StepContext(
            backend=backend, history=history, nemesis=self.nemesis, observer=self.observer,
            producer=Producer(client, history, 0, acks=w["acks"], timeout_ms=w["timeout_ms"],
                              retry_ms=w["retry_ms"]) if clients is None else
            clients.producer(history, 0, acks=w["acks"], timeout_ms=w["timeout_ms"],
                             retry_ms=w["retry_ms"]),
            consumer=Consumer(client, history, 1, w["topic"], w["partition"])
            if clients is None else clients.consumer(history, 1, w["topic"], w["partition"]),
            clients=clients,
            values=values, progress=self.progress, labels=self.labels,
            background=self.background, client=client, workload=w, seed=seed, rt=self.rt,
        )

    def run_steps(self) -> None:
        assert self.ctx is not None, "start_workload() first"
        runner = StepRunner(self.ctx, str(self.scenario.path))
        for step in self.steps:
            self.writes.check()
            runner.run(step)

    def failed(self, e: Exception | KeyboardInterrupt) -> None:
        """What stopped the run, as the run's error."""
        if isinstance(e, HarnessError | RunWriteError):  # Interrupted among them
            self.error = e
        elif isinstance(e, ClientConfigError):  # a setting the client refused: exit 2
            self.error = UsageError(str(e))
        elif isinstance(e, KeyboardInterrupt):
            self.error = Interrupted(str(e) or "interrupted by SIGINT; run incomplete")
        else:
            self.error = _internal_error(e, self.run, self.writes)

    def close(self) -> None:
        """Replicas collected, the cluster torn down, run.json closed: always, and
        not interruptible -- an interrupt cutting it short would leave run.json
        "running" and the cluster to the atexit reaper (on Docker, its volumes
        removed before any `isrlab collect`). Raised once it is closed."""
        run, backend, progress, writes = self.run, self.backend, self.progress, self.writes
        reaper.hold()
        # A write that failed is the run's error: whatever else went wrong after it
        # (a wait cut short, a step that could not record its op) followed from it.
        if writes.error is not None:
            self.error = writes.error
        if self.ticker is not None:
            self.ticker.stop()
        if self.ctx is not None:
            self.ctx.close()  # timed undos cancelled, a `load` stopped
        self.observer.close()
        if self.background is not None:
            self.background.stop()
        # Replicas are collected even from a failed run: its prefix is still
        # worth checking and reading.
        replicas_written = True
        try:
            how = self.watch.collect_replicas(run)
            progress.line("replicas collected: " + (", ".join(f"{n} ({h})"
                                                                for n, h in how.items())
                                                     or "none (an external cluster)"))
        except RunWriteError as e:
            replicas_written = False
            progress.line(f"replicas not collected: {e}")
        except Exception as e:  # noqa: BLE001 - must not stop the teardown below
            progress.line(f"replicas not collected: {type(e).__name__}: {e}")
        try:
            self.collector.stop()
        finally:
            backend.teardown()
            backend.release_addresses()
            # The clients' idle connections to this cluster lead nowhere now.
            backend.rt.close_idle([backend.address(n) for n in backend.nodes])
            try:
                backend.collect_logs(run.path)
            except OSError as e:
                progress.line(f"logs not collected: {e}")
            self.history.close()
            # Room for the last writes, also on a full disk.
            run.release_reserve()
            if not replicas_written:
                _unknown_replicas(run, backend, progress)
            # A run whose replicas are unknown did not complete, however its steps went.
            error = self.error = self.error or writes.error
            try:
                run.write_meta(
                    ended_at=utc_now(),
                    status=INCOMPLETE if error else COMPLETE,
                    error=str(error) if error else None,
                    fault_windows=[w.as_dict() for w in self.nemesis.windows],
                    labels=self.labels,
                )
            except RunWriteError as e:
                self.error = RunIncomplete(f"{error or e}; {RUN_JSON} could not be closed "
                                           f"({e.reason}): it still says {RUNNING}")

    def record(self) -> RunRecord:
        """The closed run; a UsageError if it never started (nothing kept)."""
        if not self.up and isinstance(self.error, UsageError):
            # A node refused its configuration or its address (another run's, say)
            # before the cluster was up: the user's to fix, and no run to keep.
            shutil.rmtree(self.run.path, ignore_errors=True)
            reaper.release(what="")
            raise UsageError(f"{self.error}; the run did not start and left nothing")
        # Interrupted while the run was closed: it is (complete or incomplete, as
        # run.json says); stop before any check.
        reaper.release(what="")
        return RunRecord(self.run.run_id, self.run.path, self.error,
                         time.monotonic() - self.t0)


def _start_meta(scenario: Scenario, opts: RunOptions, spec: ClusterSpec, backend: Backend,
                steps: list[Step], seed: int, start_unix_ns: int) -> dict[str, Any]:
    """run.json as the run starts: status "running", its owner this process."""
    meta = dict(
        scenario=scenario.name,
        scenario_file=str(scenario.path),
        description=scenario.description,
        source=scenario.source,
        protocol=opts.protocol,
        backend=opts.backend,
        seed=seed,
        cluster={
            "brokers": spec.brokers,
            "addresses": {n: backend.address(n) for n in backend.nodes},
            "topics": spec.topics,
            "replication_factor": max(len(r) for t in spec.topics for r in t["replicas"]),
        },
        broker_config=spec.broker_config,
        controller_config=spec.controller_config,
        workload=redacted_workload(scenario.workload),  # no secret is written
        nemesis=[s.as_dict() for s in steps],
        expect=scenario.expect_for(opts.protocol),
        # Judged by the harness after the check (harness.run.assertions).
        variant=scenario.variant,
        assertions=[{k: v for k, v in a.items() if v is not None}
                    for a in scenario.assertions_for(opts.protocol)],
        started_at=utc_now(),
        start_unix_ns=start_unix_ns,
        ended_at=None,
        status=RUNNING,
        # Who runs it: a "running" run whose owner is gone crashed (`isrlab collect`).
        owner=Owner.this_process().as_record(),
    )
    meta.update(backend.run_meta())
    meta.update(opts.meta)
    return meta


def _internal_error(e: Exception, run: RunDirWriter, writes: RunWrites) -> HarnessError:
    """A harness bug: still a clean teardown and a run.json that says so; the
    traceback goes to logs/harness.log, not the user's terminal. (An OSError
    on a file of the run directory is a write that failed, not a bug.)"""
    if isinstance(e, OSError) and e.filename and run.path in Path(e.filename).parents:
        writes.failed(e.filename, "the run directory", e)
    if writes.error is not None:
        return RunIncomplete(str(writes.error))  # replaced by it when the run closes
    log = run.logs / "harness.log"
    try:
        log.write_text(traceback.format_exc())
    except OSError as err:
        return RunIncomplete(f"internal error: {type(e).__name__}: {e} (no traceback: "
                             f"{log}: {err.strerror})")
    return RunIncomplete(f"internal error: {type(e).__name__}: {e} (traceback in {log})")


def _unknown_replicas(run: RunDirWriter, backend: Backend, progress: Progress) -> None:
    """The replicas of a run that could not write them: whatever was written of
    them goes (a cut replica log would read as lost records), and every broker
    gets an empty log and its partitions as "none" (`source: "unwritten"`), so
    what the run recorded is still checked -- a final log unknown, not wrong."""
    shutil.rmtree(run.replicas, ignore_errors=True)
    try:
        for node in backend.brokers:
            _, parts = offline_replicas({}, hosted_partitions(backend.spec.topics, node))
            run.write_replica(node, [], {"node": node, "partitions": parts,
                                         "source": "unwritten", "running": False})
    except RunWriteError as e:
        progress.line(f"replicas not written: {e}")


# How a run watches its cluster, by the backend's `watch` word: over the
# wire, in-process for the simulator, only through Kafka metadata for a cluster
# that is not isrlab's (harness.run.kafka_target_watch).
# "module:Class", imported when used: an existing cluster's (its SSH faults load
# paramiko) and the simulator's cost a local run nothing.
WATCHES: dict[str, str] = {
    "wire": "harness.run.watch:Watch", "in-process": "harness.run.sim_watch:SimWatch",
    "metadata": "harness.run.kafka_target_watch:KafkaTargetWatch"}


def _watch(backend: Backend) -> Watch:
    module, _, cls = WATCHES[backend.watch].partition(":")
    watch: type[Watch] = getattr(importlib.import_module(module), cls)
    return watch(backend)


def _window(progress: Progress, w: FaultWindow) -> None:
    if w.end is None:
        progress.line(f"  fault window opens: {w.node} {w.kind} ({w.fault})")
    else:
        progress.line(f"  fault window closes: {w.node} was {w.kind} for "
                      f"{(w.end - w.start) / 1e9:.2f}s")


