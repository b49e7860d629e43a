"""Collect every replica's final log and state into replicas/<node>/.

A running broker answers `status` and `dump-log`. A broker that is down (or
frozen) is read from its data directory instead (`broker.storage.read_offline`);
its state.json then says `"source": "data-dir"`.

A run whose harness died (SIGKILL, a crashed machine's CI job) was never
collected: run.json still says "running" and its owner is gone.
`collect_crashed` (`isrlab collect`, and `isrlab check` when it meets one) stops
what is left of its cluster, reads every broker's data directory the same way,
and marks the run "crashed" (docs/run-directory.md). The data directories are
only read; a run directory that cannot be written is refused before anything is
stopped or changed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.wire import WireError
from contract import CRASHED, EVENTS, HISTORY, REPLICAS, RUNNING
from contract.rundir import RunDirWriter, read_meta, require_writable, utc_at, utc_now
from harness.backends import backend_class
from harness.backends.admin import own_status, request
from harness.backends.base import Backend
from harness.backends.owner import Liveness, Owner
from harness.errors import UsageError


def hosted_partitions(topics: list[dict[str, Any]], node: str) -> list[tuple[str, int]]:
    return [
        (t["name"], p)
        for t in topics
        for p, replicas in enumerate(t["replicas"])
        if node in replicas
    ]


def collect_replicas(backend: Backend, run: RunDirWriter) -> dict[str, str]:
    """Write log.jsonl and state.json for every broker; returns node -> how."""
    how = {}
    for node in backend.brokers:
        status = (own_status(backend.address(node), backend.cluster_id, 2.0)
                  if backend.is_reachable(node) else None)
        if status is not None:
            try:
                rows = _dump_logs(backend, node, status)
            except WireError:
                status = None
            else:
                run.write_replica(node, rows, {"node": node,
                                               "partitions": status.get("partitions", []),
                                               "source": "status"})
                how[node] = "status"
                continue
        _write_offline(run, node, backend.data_dir(node),
                       hosted_partitions(backend.spec.topics, node))
        how[node] = "data-dir"
    return how


def _write_offline(run: RunDirWriter, node: str, data_dir: Path | None,
                   hosted: list[tuple[str, int]]) -> int:
    """Write a down broker's log.jsonl and state.json from its data directory;
    returns how many records it holds."""
    rows, parts = _from_data_dir(data_dir, hosted)
    run.write_replica(node, rows, {"node": node, "partitions": parts, "source": "data-dir",
                                   "running": False})
    return len(rows)


def _dump_logs(backend: Backend, node: str, status: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for p in status.get("partitions", []):
        reply = request(backend.address(node),
                        {"type": "dump-log", "topic": p["topic"], "partition": p["partition"]},
                        timeout=10.0)
        if reply.get("error") is not None:
            raise WireError(f"dump-log on {node}: {reply['error']}")
        rows.extend(log_rows(p["topic"], p["partition"], reply.get("records", [])))
    return rows


def _from_data_dir(data_dir: Path | None, hosted: list[tuple[str, int]]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A stopped broker's replicas as its next start would find them."""
    offline = {}
    if data_dir is not None and data_dir.is_dir():
        from broker.storage import read_offline  # the broker owns its file format

        offline = {(p["topic"], p["partition"]): p for p in read_offline(data_dir)["partitions"]}
    return offline_replicas(offline, hosted)


def offline_replicas(offline: dict[tuple[str, int], dict[str, Any]],
                     hosted: list[tuple[str, int]]
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """log.jsonl rows and state.json partitions of a broker that is not serving,
    from what its files hold per partition (records, hw_checkpoint, epoch_cache).
    Roles are "none" (not serving); hw is the checkpointed HW, the one it would
    restart with."""
    rows: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for topic, partition in hosted:
        p = offline.get((topic, partition), {})
        records = p.get("records", [])
        rows.extend(log_rows(topic, partition, records))
        parts.append({
            "topic": topic, "partition": partition, "role": "none", "leader": None,
            "leo": p.get("leo", len(records)), "hw": p.get("hw_checkpoint", 0),
            "hw_checkpoint": p.get("hw_checkpoint", 0), "epoch_cache": p.get("epoch_cache", []),
            "offline": True,
        })
    return rows, parts


def log_rows(topic: str, partition: int, records: list) -> list[dict[str, Any]]:
    """log.jsonl rows of one replica's records ([offset, epoch, value] each, an
    idempotent producer's batch header [id, epoch, base seq, last seq] as a 4th
    element: its row's "producer")."""
    rows: list[dict[str, Any]] = []
    for r in records:
        row = {"topic": topic, "partition": partition, "offset": r[0], "epoch": r[1],
               "value": r[2]}
        if len(r) > 3 and r[3] is not None:
            row["producer"] = list(r[3])
        rows.append(row)
    return rows


@dataclass
class Crashed:
    """What `collect_crashed` did with one crashed run."""

    run_id: str
    run_dir: Path
    why: str  # "owner pid 1234 on host H is gone"
    stopped: list[str] = field(default_factory=list)  # what still ran, in words
    # broker -> how many records its data held (None: no data directory)
    records: dict[str, int | None] = field(default_factory=dict)
    removed: str | None = None  # the backend's leftovers removed, in words


def owner_liveness(meta: dict[str, Any]) -> tuple[Liveness, str]:
    """Whether the harness that wrote run.json (its `owner`) still runs, with the
    reason in words. A run without an owner record (an older isrlab) counts as gone."""
    owner = Owner.of_record(meta.get("owner"))
    if owner is None:
        return Liveness.GONE, "no owner recorded (run by an older isrlab)"
    return owner.liveness()


def owner_gone(run_dir: Path, meta: dict[str, Any]) -> str:
    """Why the owner of the "running" run in run_dir is gone ("owner pid 1234 on
    host H is gone"); UsageError (exit 2) if it is alive -- the run is still going,
    and collecting would pull its data from under it -- or cannot be checked from
    here (another host or PID namespace)."""
    liveness, why = owner_liveness(meta)
    if liveness is Liveness.ALIVE:
        raise UsageError(f"run {run_dir} is still going ({why}); wait until it has ended")
    if liveness is Liveness.UNKNOWN:
        raise UsageError(f"run {run_dir} is marked running and its {why}; "
                         f"run `isrlab collect {run_dir}` where it ran")
    return why


def collect_crashed(run_dir: Path, say: Callable[[str], None] = lambda _m: None
                    ) -> Crashed | None:
    """Finish a run whose harness died: stop what is left of its cluster, write
    replicas/<broker>/{log.jsonl,state.json} from each broker's data directory, set
    run.json's status to "crashed" (with `ended_at`, `collected_at` and `error`), then
    remove the backend's leftovers (Docker: containers, network, volumes).

    Returns None, touching nothing, if run.json is not "running" (the run ended, or
    was collected already). Raises UsageError (exit 2) if the run is still going
    (its owner is alive) or its owner cannot be checked from here (another host or
    PID namespace), and for a run.json without a cluster or with an unknown backend.
    Raises RunWriteError if the run directory cannot be written: exit 2 before
    anything was touched (a read-only mount), 3 if a write fails on the way (a
    full disk; run.json still says "running", so collecting can be done again)."""
    run_dir = Path(run_dir)
    meta = read_meta(run_dir)
    if meta.get("status") != RUNNING:
        return None
    why = owner_gone(run_dir, meta)
    cluster = meta.get("cluster")
    brokers = cluster.get("brokers") if isinstance(cluster, dict) else None
    topics = cluster.get("topics") if isinstance(cluster, dict) else None
    try:
        hosted = {str(b): hosted_partitions(topics, b) for b in brokers}  # type: ignore[union-attr]
    except (TypeError, KeyError, AttributeError):
        raise UsageError(f"{run_dir}/run.json: no cluster (brokers, topics with replica "
                         "lists) recorded; cannot tell which replicas to collect") from None
    backend = backend_class(str(meta.get("backend")))
    require_writable(run_dir / REPLICAS, "the crashed run's replicas, rebuilt by collect")
    run = RunDirWriter.reopen(run_dir)
    done = Crashed(run.run_id, run_dir, why)
    say(f"run {run.run_id} crashed: {why}")
    try:
        salvage = backend.salvage(run_dir, run.run_id, list(hosted))
    except OSError as e:  # Docker and ssh copy the brokers' logs and data in
        raise run.writes.failed(e.filename or run_dir, "the brokers' logs and data, "
                                "copied into the run", e) from None
    done.stopped = salvage.stopped
    if salvage.stopped:
        say(f"stopped what was left running: {', '.join(salvage.stopped)}")
    for node, parts in hosted.items():
        data_dir = salvage.data_dirs.get(node)
        n = _write_offline(run, node, data_dir, parts)
        done.records[node] = n if data_dir is not None and data_dir.is_dir() else None
    say("replicas rebuilt from the data directories: " + ", ".join(
        f"{node} ({'no data' if n is None else f'{n} records'})"
        for node, n in done.records.items()))
    run.release_reserve()  # the room the run kept to be closed in
    run.write_meta(
        status=CRASHED,
        ended_at=_last_write(run_dir) or utc_now(),
        collected_at=utc_now(),
        error=f"the harness died before the run ended ({why}); replicas rebuilt from "
              "the brokers' data directories by `isrlab collect`",
    )
    done.removed = backend.discard(run.run_id)
    if done.removed:
        say(f"removed the run's leftovers: {done.removed}")
    return done


def _last_write(run_dir: Path) -> str | None:
    """When the harness last wrote the history or the events: about when it died."""
    times = []
    for name in (HISTORY, EVENTS):
        try:
            times.append(os.stat(run_dir / name).st_mtime)
        except OSError:
            pass
    return utc_at(max(times)) if times else None
