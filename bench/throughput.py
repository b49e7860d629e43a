"""The reference broker's throughput with the built-in workload: acknowledged records/s.

    python bench/throughput.py [--seconds 20] [--producers 8] [--batch 500]
                               [--linger 0.005] [--partitions 3] [--acks all] [--port P]
                               [--client confluent-kafka|kafka-python [--client-config K=V]]

A local cluster of 3 brokers, one topic of `--partitions` partitions with
replication factor 3 (loopback), the continuous workload of a chaos run
(workloads.continuous: seeded sends, batched as Kafka's producer batches them,
one history op pair per record, consumers polling) at an unreachable target
rate, so the producers are the limit; no faults. It runs through the same
runner as every run (harness.run.runner), so the number includes writing the
history. Prints the acknowledged records per second over the steady part (from
the first acknowledgement to the last), the sends by outcome, and the batch
sizes; `--batch 1` gives the unbatched figure (one record per request).

With `--client` the producers and consumers are that real Kafka client's, over
the brokers' Kafka listeners (workloads/client_ops.py): each producer hands its
batches of values to its client, which batches them as it does (librdkafka's
linger.ms 5 ms), and waits for their delivery reports; it also prints the
sockets left in TIME_WAIT on the brokers' ports when the run ends.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contract import PROTOCOLS  # noqa: E402
from harness.chaos.runs import TOPIC, ChaosConfig  # noqa: E402
from harness.cli.flags import client_config_item  # noqa: E402
from harness.progress import Progress  # noqa: E402
from harness.run.runner import RunOptions, run_scenario  # noqa: E402
from harness.scenario.loader import Scenario  # noqa: E402
from harness.scenario.steps import DEFAULT_FINAL_TIMEOUT, Step  # noqa: E402
from nemesis.schedule import parse_faults  # noqa: E402
from workloads.kafka_clients import CLIENTS  # noqa: E402


def scenario(seconds: float, args: argparse.Namespace) -> Scenario:
    cfg = ChaosConfig(protocol=args.protocol, time_limit=seconds, faults=parse_faults("kill"),
                      partitions=args.partitions, producers=args.producers,
                      consumers=args.partitions)
    acks: int | str = "all" if args.acks == "all" else int(args.acks)
    workload = {"acks": acks, "timeout_ms": 5000, "retry_ms": 10000, "topic": TOPIC,
                "partition": 0, "consumers": args.partitions, "producers": args.producers,
                "rate": args.rate, "partitions": "all", "batch": args.batch,
                "linger": args.linger, "max_records": 500}
    if args.client:
        workload["client"] = args.client
        workload["config"] = dict(args.client_config)
    steps = [Step(index=1, kind="sleep", args={"until": seconds}, line=0),
             Step(index=2, kind="final-read", args={"timeout": DEFAULT_FINAL_TIMEOUT,
                                                    "heal": True}, line=0)]
    return Scenario(name="throughput", description="throughput: no faults", path=Path("bench"),
                    brokers=cfg.broker_names(), topics=cfg.topics(), broker_config={},
                    controller_config={}, workload=workload,
                    expect={p: [] for p in PROTOCOLS}, steps=steps)


def measure(history: Path) -> dict[str, float]:
    oks, first, last = 0, None, None
    outcomes: dict[str, int] = {}
    batch_sizes: dict[int, int] = {}  # time of the completion -> records: one batch
    with open(history, encoding="utf-8") as f:
        for line in f:
            op = json.loads(line)
            if op["f"] != "send" or op["type"] == "invoke":
                continue
            outcomes[op["type"]] = outcomes.get(op["type"], 0) + 1
            if op["type"] == "ok":
                oks += 1
                t = op["time"]
                first = t if first is None else min(first, t)
                last = t if last is None else max(last, t)
                batch_sizes[t] = batch_sizes.get(t, 0) + 1
    span = (last - first) / 1e9 if first is not None and last is not None else 0.0
    sizes = sorted(batch_sizes.values())
    return {"acked": oks, "seconds": round(span, 2),
            "acked_per_s": round(oks / span) if span > 0 else 0,
            "outcomes": outcomes, "batches": len(sizes),
            "median_batch": sizes[len(sizes) // 2] if sizes else 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--linger", type=float, default=0.005)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rate", type=float, default=1e6, help="target (a ceiling)")
    ap.add_argument("--acks", default="all")
    ap.add_argument("--protocol", default="latest", choices=PROTOCOLS)
    ap.add_argument("--port", type=int, default=19492)
    ap.add_argument("--keep", type=Path, help="keep the run directory under this directory")
    ap.add_argument("--client", choices=CLIENTS, help="a real Kafka client's workload")
    ap.add_argument("--client-config", dest="client_config", action="extend", default=[],
                    type=client_config_item, metavar="KEY=VALUE|@FILE")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="isrlab-throughput-") as tmp:
        runs = args.keep or Path(tmp)
        t0 = time.monotonic()
        record = run_scenario(scenario(args.seconds, args), RunOptions(
            protocol=args.protocol, seed=1, runs_dir=runs,
            backend_options={"port": args.port}), Progress(sys.stderr, quiet=True))
        if record.error is not None:
            print(f"run did not complete: {record.error}", file=sys.stderr)
            return 3
        out = measure(record.run_dir / "history.jsonl")
        out.update(protocol=args.protocol, producers=args.producers, batch=args.batch,
                   linger=args.linger, partitions=args.partitions, acks=args.acks,
                   run_seconds=round(time.monotonic() - t0, 1),
                   history_mb=round((record.run_dir / "history.jsonl").stat().st_size / 1e6, 1))
        out["time_wait"] = time_wait(args.port)
        if args.client:
            out["client"] = args.client
        print(json.dumps(out))
    return 0


def time_wait(port: int) -> int:
    """Sockets in TIME_WAIT to or from the cluster's ports (each node's and its Kafka
    listener's: port, port + 1), from /proc/net/tcp."""
    ports = {port, port + 1}
    n = 0
    with open("/proc/net/tcp", encoding="ascii") as f:
        next(f)
        for line in f:
            cols = line.split()
            local, remote, state = cols[1], cols[2], cols[3]
            if state == "06" and (int(local.split(":")[1], 16) in ports
                                  or int(remote.split(":")[1], 16) in ports):
                n += 1
    return n


if __name__ == "__main__":
    raise SystemExit(main())
