"""Collect every replica's final log and state into replicas/<node>/.

A running broker answers `status` and `dump-log`. A broker that is down (or
frozen) is read from its data directory instead (`broker.storage.read_offline`);
its state.json then says `"source": "data-dir"`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broker.wire import WireError
from contract import LOG, STATE
from harness.admin import request, try_status
from harness.backends.base import Backend
from harness.rundir import RunDirWriter, write_jsonl


def _hosted(backend: Backend, node: str) -> list[tuple[str, int]]:
    return [
        (t["name"], p)
        for t in backend.spec.topics
        for p, replicas in enumerate(t["replicas"])
        if node in replicas
    ]


def collect_replicas(backend: Backend, run: RunDirWriter) -> dict[str, str]:
    """Write log.jsonl and state.json for every broker; returns node -> how."""
    how = {}
    for node in backend.brokers:
        out = run.replica_dir(node)
        status = try_status(backend.address(node), 2.0) if backend.is_reachable(node) else None
        if status is not None:
            try:
                rows = _dump_logs(backend, node, status)
            except WireError:
                status = None
            else:
                write_jsonl(out / LOG, rows)
                _write_state(out, {"node": node, "partitions": status.get("partitions", []),
                                   "source": "status"})
                how[node] = "status"
                continue
        rows, parts = _from_data_dir(backend.data_dir(node), _hosted(backend, node))
        write_jsonl(out / LOG, rows)
        _write_state(out, {"node": node, "partitions": parts, "source": "data-dir",
                           "running": False})
        how[node] = "data-dir"
    return how


def _dump_logs(backend: Backend, node: str, status: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for p in status.get("partitions", []):
        reply = request(backend.address(node),
                        {"type": "dump-log", "topic": p["topic"], "partition": p["partition"]},
                        timeout=10.0)
        if reply.get("error") is not None:
            raise WireError(f"dump-log on {node}: {reply['error']}")
        rows.extend(
            {"topic": p["topic"], "partition": p["partition"], "offset": r[0], "epoch": r[1],
             "value": r[2]}
            for r in reply.get("records", [])
        )
    return rows


def _from_data_dir(data_dir: Path | None, hosted: list[tuple[str, int]]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A stopped broker's replicas as its next start would find them. Roles are
    "none" (not serving); hw is the checkpointed HW, the one it would restart with."""
    rows: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    offline = {}
    if data_dir is not None and data_dir.is_dir():
        from broker.storage import read_offline  # the broker owns its file format

        offline = {(p["topic"], p["partition"]): p for p in read_offline(data_dir)["partitions"]}
    for topic, partition in hosted:
        p = offline.get((topic, partition), {})
        records = p.get("records", [])
        rows.extend({"topic": topic, "partition": partition, "offset": r[0], "epoch": r[1],
                     "value": r[2]} for r in records)
        parts.append({
            "topic": topic, "partition": partition, "role": "none", "leader": None,
            "leo": p.get("leo", len(records)), "hw": p.get("hw_checkpoint", 0),
            "hw_checkpoint": p.get("hw_checkpoint", 0), "epoch_cache": p.get("epoch_cache", []),
            "offline": True,
        })
    return rows, parts


def _write_state(out: Path, state: dict[str, Any]) -> None:
    (out / STATE).write_text(json.dumps(state, indent=2) + "\n")
