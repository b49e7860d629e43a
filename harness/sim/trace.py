"""The fetch-round trace of a simulated run: after each replica fetch round, every
replica's LEO and HW and what the leader knows of its followers (their LEOs as
its last fetches from them said) -- docs/catalogue.md#hw-lags-one-fetch's walk,
from the real cores.

The sim backend writes it to the run directory as trace.jsonl, one row per
round that changed something (an idle long poll changes nothing and is left
out); reports.trace merges it with the run's events into the table
`isrlab trace NAME` prints and the report shows.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import orjson

from broker.sim_cluster import SimCluster
from contract import TRACE
from contract.rundir import RunFile, RunWriteError, RunWrites, read_jsonl

__all__ = ["TRACE", "Tracer", "read_trace"]


class Tracer:
    """Collects the rows of one simulated run into `path` as they happen. A failed
    write is reported to `writes` (never raised into the simulator's event loop);
    the file then gets nothing more."""

    def __init__(self, cluster: SimCluster, path: Path, writes: RunWrites | None = None) -> None:
        self.cluster = cluster
        self._file = RunFile(path, "the fetch-round trace", writes or RunWrites(),
                             truncate=True, buffer=1 << 16)  # closed by close()
        self._last: dict[tuple[str, int], Any] = {}
        self.rounds = 0
        cluster.on_fetch_round = self.fetch_round

    def fetch_round(self, follower: str, req: dict[str, Any],
                    resp: dict[str, Any] | None) -> None:
        self.rounds += 1
        key = (req["topic"], req["partition"])
        # The state as tuples first: most rounds are idle long polls that change
        # nothing, and build no row.
        replicas = []
        leader = None
        nodes = self.cluster.nodes
        for name in self.cluster.brokers:
            node = nodes[name]
            p = node.core.partitions.get(key) if node.up else None
            if p is None:
                if node.up or key in node.store.partitions:
                    replicas.append((name, "down", None, None))
                continue
            replicas.append((name, p.role, p.log.leo, p.hw))
            if p.role == "leader":
                leader = (name, p.leader_epoch, tuple(p.isr),
                          tuple((r, rr.leo) for r, rr in sorted(p.remotes.items())))
        state = (tuple(replicas), leader)
        if self._last.get(key) == state:
            return  # nothing moved: an idle long poll
        self._last[key] = state
        row = {"time": round(self.cluster.now * 1_000_000), "round": self.rounds,
               "topic": key[0], "partition": key[1], "follower": follower,
               "request": req["type"], "offset": req.get("offset"),
               "answer": _answer(resp),
               "leader": None if leader is None else {
                   "node": leader[0], "leader_epoch": leader[1], "isr": list(leader[2]),
                   "remote_leo": dict(leader[3])},
               "replicas": {n: {"role": role, "leo": leo, "hw": hw}
                            for n, role, leo, hw in replicas}}
        if self._file.error is None:
            with contextlib.suppress(RunWriteError):  # reported: the run stops
                self._file.write(orjson.dumps(row) + b"\n")

    def close(self) -> None:
        self._file.close()


def _answer(resp: dict[str, Any] | None) -> str:
    if resp is None:
        return "no answer"
    if resp.get("error"):
        return str(resp["error"])
    if "end_offset" in resp:
        return f"epoch {resp.get('leader_epoch')} ends at {resp['end_offset']}"
    if resp.get("diverging_epoch"):
        d = resp["diverging_epoch"]
        return f"diverging: epoch {d['epoch']} ends at {d['end_offset']}"
    return f"{len(resp.get('records', []))} record(s), hw {resp.get('hw')}"


def read_trace(run_dir: Path) -> list[dict[str, Any]]:
    """The trace's rows ([] without one; a last line cut by a full disk left out:
    contract.rundir.read_jsonl's rules)."""
    return read_jsonl(run_dir, TRACE)
