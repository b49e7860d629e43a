"""A tiny writer of run directories (docs/run-directory.md, format 1) for tests and benchmarks.

It writes what the harness would write, op by op, so tests state a history in a
few lines instead of hard-coding files; the checker's expected output is then
derived by the test from what it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contract import EVENTS, HISTORY, LOG, REPLICAS, RUN_JSON, STATE

Record = tuple[int, int]  # (epoch, value) in a replica log; offset = position


class RunBuilder:
    def __init__(
        self,
        path: Path,
        *,
        protocol: str = "latest",
        scenario: str | None = None,
        expect: list[str] | None = None,
        brokers: tuple[str, ...] = ("A", "B"),
        topic: str = "t",
        seed: int = 1,
        acks: str = "all",
        run_id: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.topic = topic
        self.acks = acks
        self.meta: dict[str, Any] = {
            "run_id": run_id or self.path.name,
            "format_version": 1,
            "scenario": scenario,
            "protocol": protocol,
            "backend": "synthetic",
            "seed": seed,
            "cluster": {"brokers": list(brokers), "topics": [topic], "replication_factor": 2},
            "broker_config": {"min.insync.replicas": 1},
            "workload": {"acks": acks},
            "nemesis": [],
            "expect": list(expect or []),
            "started_at": "2026-01-01T00:00:00Z",
            "ended_at": "2026-01-01T00:01:00Z",
        }
        self.history: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.replicas: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {}
        self.clock = 0

    # -- history ---------------------------------------------------------
    def _op(self, process: Any, type_: str, f: str, **fields: Any) -> dict[str, Any]:
        self.clock += 1_000_000
        op = {
            "index": len(self.history),
            "time": self.clock,
            "process": process,
            "type": type_,
            "f": f,
            **fields,
        }
        self.history.append(op)
        return op

    def send(
        self,
        process: int,
        value: int,
        offset: int | None = None,
        result: str = "ok",
        error: str | None = None,
        partition: int = 0,
    ) -> RunBuilder:
        """An invoke and its completion; result ok (needs offset), fail or info."""
        base = {"topic": self.topic, "partition": partition, "value": value, "acks": self.acks}
        self._op(process, "invoke", "send", **base)
        extra: dict[str, Any] = {}
        if result == "ok":
            extra["offset"] = offset
        else:
            extra["error"] = error or ("NOT_ENOUGH_REPLICAS" if result == "fail" else "timeout")
        self._op(process, result, "send", **base, **extra)
        return self

    def poll(
        self,
        process: Any,
        offset: int,
        records: list[tuple[int, int]],
        hw: int | None = None,
        partition: int = 0,
        *,
        node: str | None = None,
        epoch: int | None = None,
    ) -> RunBuilder:
        """An invoke and its ok completion. ``node`` and ``epoch``: the leader that
        served it and its leader epoch, written only when given (a history from
        before polls carried them)."""
        base = {"topic": self.topic, "partition": partition, "offset": offset}
        self._op(process, "invoke", "poll", **base)
        hw = hw if hw is not None else (records[-1][0] + 1 if records else offset)
        served = {k: v for k, v in (("node", node), ("epoch", epoch)) if v is not None}
        self._op(process, "ok", "poll", **base, records=[list(r) for r in records], hw=hw,
                 **served)
        return self

    def final_read(self, values: list[int], partition: int = 0) -> RunBuilder:
        return self.poll("final", 0, list(enumerate(values)), partition=partition)

    def nemesis(self, f: str, nodes: list[str]) -> RunBuilder:
        self._op("nemesis", "invoke", f, value=nodes)
        self._op("nemesis", "info", f, value=nodes)
        return self

    def event(self, node: str, type_: str, **fields: Any) -> RunBuilder:
        self.clock += 1_000_000
        self.events.append({"time": self.clock, "node": node, "type": type_, **fields})
        return self

    # -- replicas --------------------------------------------------------
    def replica(
        self,
        broker: str,
        records: list[Record],
        *,
        role: str = "follower",
        hw: int | None = None,
        leader: str | None = None,
        leader_epoch: int = 0,
        isr: list[str] | None = None,
        partition: int = 0,
    ) -> RunBuilder:
        """A replica's final log (offset = position) and state."""
        log = [
            {"topic": self.topic, "partition": partition, "offset": o, "epoch": e, "value": v}
            for o, (e, v) in enumerate(records)
        ]
        leo = len(records)
        cache: list[list[int]] = []
        for o, (e, _) in enumerate(records):
            if not cache or cache[-1][0] != e:
                cache.append([e, o])
        state = {
            "topic": self.topic,
            "partition": partition,
            "role": role,
            "leader": leader or (broker if role == "leader" else None),
            "leader_epoch": leader_epoch,
            "leo": leo,
            "hw": leo if hw is None else hw,
            "hw_checkpoint": leo if hw is None else hw,
            "isr": isr or [],
            "epoch_cache": cache,
        }
        old_log, old_state = self.replicas.get(broker, ([], {"node": broker, "partitions": []}))
        old_state["partitions"].append(state)
        self.replicas[broker] = (old_log + log, old_state)
        return self

    # -- output ----------------------------------------------------------
    def write(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / RUN_JSON).write_text(json.dumps(self.meta, indent=2) + "\n")
        _write_jsonl(self.path / HISTORY, self.history)
        _write_jsonl(self.path / EVENTS, self.events)
        # a named broker the test gave no replica: an empty log, as the harness
        # writes for a broker that never started (the checker requires every one)
        empty = {b: ([], {"node": b, "source": "data-dir", "partitions": []})
                 for b in self.meta["cluster"]["brokers"] if b not in self.replicas}
        for broker, (log, state) in {**self.replicas, **empty}.items():
            d = self.path / REPLICAS / broker
            d.mkdir(parents=True, exist_ok=True)
            _write_jsonl(d / LOG, log)
            (d / STATE).write_text(json.dumps(state, indent=2) + "\n")
        return self.path


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def sample_run(root: Path) -> Path:
    """A small made-up run (a kill, a truncation, a final read) written under
    ``root``: what the checker server's warm-up and the class-data archive's
    builder check, touching the code paths of a real small check."""
    rb = RunBuilder(Path(root) / "warmup", protocol="0.10", brokers=("A", "B"))
    rb.send(0, 100, 0).send(0, 101, 1).poll(1, 0, [(0, 100), (1, 101)], 2)
    rb.nemesis("kill", ["A"]).nemesis("start", ["A"])
    rb.event("A", "truncate", topic="t", partition=0, offset=1)
    rb.replica("A", [(0, 100)], role="follower", hw=1, leader="B", leader_epoch=1)
    rb.replica("B", [(0, 100)], role="leader", hw=1, leader_epoch=1)
    rb.final_read([100])
    return rb.write()
