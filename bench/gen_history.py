"""Synthetic run directories of any size with anomalies injected at known places.

    python bench/gen_history.py OUT_DIR --ops 1000000 [--inject all|none|kind,...] [--seed N]

Writes a run directory (docs/run-directory.md, format 1) with about --ops history operations:
producers sending unique values, two consumers reading everything, a final read,
two replicas. Each injected anomaly is recorded in OUT_DIR/injected.json with the
values/offsets a checker must report, so tests and benchmarks can compare.
Streams to disk: memory stays flat up to 10M operations.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from contract import ANOMALY_KINDS, EVENTS, HISTORY, LOG, REPLICAS, RUN_JSON, STATE

KINDS = ANOMALY_KINDS  # one of each is injected with --inject all
BATCH = 100
T, P = "t", 0


class Writer:
    def __init__(self, path: Path) -> None:
        self.fh = path.open("w", buffering=1 << 20)
        self.index = 0
        self.time = 0

    def op(self, process: Any, type_: str, f: str, **kw: Any) -> None:
        self.time += 1000 + (self.index * 7919) % 50_000
        rec = {
            "index": self.index,
            "time": self.time,
            "process": process,
            "type": type_,
            "f": f,
            **kw,
        }
        self.fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self.index += 1

    def send(
        self,
        process: int,
        value: int,
        result: str,
        offset: int | None = None,
        error: str | None = None,
    ) -> None:
        base = {"topic": T, "partition": P, "value": value, "acks": "all"}
        self.op(process, "invoke", "send", **base)
        extra: dict[str, Any] = {"offset": offset} if result == "ok" else {"error": error}
        self.op(process, result, "send", **base, **extra)

    def poll(self, process: Any, offset: int, records: list[list[int]], hw: int) -> None:
        base = {"topic": T, "partition": P, "offset": offset}
        self.op(process, "invoke", "poll", **base)
        # Served by the one leader, A, in leader epoch 0 (as the replicas say).
        self.op(process, "ok", "poll", **base, records=records, hw=hw, node="A", epoch=0)


def generate(out: Path, ops: int, inject: set[str], seed: int = 1) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    # ~2 ops per send, plus 2 consumers × 2 ops per BATCH records.
    n = max(20, int(ops / (2 + 4 / BATCH)))
    values = [1_000_000 + i for i in range(n)]  # committed value at each offset
    acked_at = list(range(n))  # the offset each value's send was acked at
    sent = list(values)  # the value each send carried (the original, before injection)
    replica_b = list(values)
    extra_sends: list[tuple[int, str, str | None]] = []  # (value, result, error)
    extra_polls: list[tuple[Any, int, list[list[int]], int]] = []
    injected: list[dict[str, Any]] = []
    spot = iter(rnd.sample(range(5, n - 5), 6))

    if "lost-write" in inject:
        k = next(spot)
        lost, values[k] = values[k], 9_000_001  # another (unacked) value now at k
        replica_b[k] = values[k]
        extra_sends.append((values[k], "info", "timeout"))
        injected.append({"kind": "lost-write", "value": lost, "offset": k})
    if "divergence" in inject:
        d = next(spot)
        replica_b[d] = 9_000_002
        injected.append({"kind": "divergence", "offset": d, "replicas": ["A", "B"]})
    if "inconsistent-offset" in inject:
        j = next(spot)
        acked_at[j] = j + 1_000_000_000  # acked at an offset it never had
        injected.append(
            {
                "kind": "inconsistent-offset",
                "value": values[j],
                "acked_offset": acked_at[j],
                "committed_at": j,
            }
        )
    tail: list[int] = []
    if "duplicate" in inject:
        m = next(spot)
        tail.append(values[m])
        injected.append(
            {"kind": "duplicate", "value": values[m], "offsets": [m, n + len(tail) - 1]}
        )
    if "aborted-read" in inject:
        tail.append(9_000_003)
        extra_sends.append((9_000_003, "fail", "NOT_ENOUGH_REPLICAS"))
        off = n + len(tail) - 1
        extra_polls.append((80, off, [[off, 9_000_003]], off + 1))
        injected.append({"kind": "aborted-read", "value": 9_000_003, "offset": off})
    final = values + tail
    top = len(final)
    if "uncommitted-read" in inject:
        extra_sends.append((9_000_004, "info", "timeout"))
        extra_polls.append((81, top, [[top, 9_000_004]], top + 1))
        injected.append({"kind": "uncommitted-read", "value": 9_000_004, "offset": top})
    if "nonmonotonic-poll" in inject:
        extra_polls += [(82, 5, [[5, final[5]], [6, final[6]]], 7), (82, 5, [[5, final[5]]], 7)]
        injected.append({"kind": "nonmonotonic-poll", "process": "82", "offset": 5})
    if "poll-skip" in inject:
        extra_polls += [(83, 0, [[0, final[0]]], 1), (83, 3, [[3, final[3]]], 4)]
        injected.append({"kind": "poll-skip", "process": "83", "skipped": [1, 2]})
    if "hw-regression" in inject:
        extra_polls += [(84, 0, [[0, final[0]]], 10), (84, 1, [[1, final[1]]], 5)]
        injected.append({"kind": "hw-regression", "process": "84", "hw": [10, 5]})

    w = Writer(out / HISTORY)
    for i in range(n):
        w.send(i % 8, sent[i], "ok", acked_at[i])
        if i % BATCH == BATCH - 1:  # two consumers follow the committed log
            lo = i + 1 - BATCH
            recs = [[o, final[o]] for o in range(lo, i + 1)]
            w.poll(100, lo, recs, i + 1)
            w.poll(101, lo, recs, i + 1)
    for v, result, err in extra_sends:
        w.send(9, v, result, error=err)
    for proc, off, recs, hw in extra_polls:
        w.poll(proc, off, recs, hw)
    w.op("nemesis", "info", "kill", value=["B"])
    w.op("nemesis", "info", "start", value=["B"])
    for start in range(0, top, 10_000):  # the final read, paginated
        w.poll("final", start, [[o, final[o]] for o in range(start, min(top, start + 10_000))], top)
    w.fh.close()

    logs_b = replica_b + tail
    for broker, log, role in (("A", final, "leader"), ("B", logs_b, "follower")):
        d = out / REPLICAS / broker
        d.mkdir(parents=True, exist_ok=True)
        with (d / LOG).open("w", buffering=1 << 20) as fh:
            for o, v in enumerate(log):
                fh.write(
                    json.dumps(
                        {"topic": T, "partition": P, "offset": o, "epoch": 0, "value": v},
                        separators=(",", ":"),
                    )
                    + "\n"
                )
        state = {
            "node": broker,
            "partitions": [
                {
                    "topic": T,
                    "partition": P,
                    "role": role,
                    "leader": "A",
                    "leader_epoch": 0,
                    "leo": len(log),
                    "hw": len(log),
                    "hw_checkpoint": len(log),
                    "isr": ["A", "B"],
                    "epoch_cache": [[0, 0]],
                }
            ],
        }
        (d / STATE).write_text(json.dumps(state))
    (out / EVENTS).write_text(
        json.dumps(
            {
                "time": 1,
                "node": "ctl",
                "type": "leader-elected",
                "topic": T,
                "partition": P,
                "leader": "A",
                "epoch": 0,
            }
        )
        + "\n"
    )
    meta = {
        "run_id": out.name,
        "format_version": 1,
        "scenario": None,
        "protocol": "latest",
        "backend": "synthetic",
        "seed": seed,
        "expect": [],
        "cluster": {"brokers": ["A", "B"], "topics": [T], "replication_factor": 2},
        "workload": {"ops": w.index, "injected": sorted(inject)},
    }
    (out / RUN_JSON).write_text(json.dumps(meta, indent=2) + "\n")
    (out / "injected.json").write_text(json.dumps(injected, indent=2) + "\n")
    return injected


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--inject", default="all", help="all, none, or a comma list of kinds")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    kinds = (
        set(KINDS)
        if a.inject == "all"
        else set()
        if a.inject == "none"
        else set(a.inject.split(","))
    )
    unknown = kinds - set(KINDS)
    if unknown:
        ap.error(f"unknown anomaly kind(s): {', '.join(sorted(unknown))}")
    injected = generate(a.out, a.ops, kinds, a.seed)
    print(f"{a.out}: {len(injected)} anomalies injected (see injected.json)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
