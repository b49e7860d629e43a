"""A stand-in for broker.server / broker.controller in harness tests.

It speaks the admin and client requests of PROTOCOL.md just enough to test
process lifecycle, the events collector and the run directory without the real
broker: one in-memory log per process, the first replica of a partition leads,
nothing replicates. Same command line as the real processes (with --id: broker).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--id")
    ap.add_argument("--listen", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--controller")
    ap.add_argument("--config", required=True)
    args = ap.parse_args()
    config = json.load(open(args.config))
    node = args.id or "controller"
    if os.environ.get("STUB_FAIL_CONFIG") == node:
        print(f"unknown broker config key 'x' on {node}", file=sys.stderr)
        return 2
    if os.environ.get("STUB_CRASH") == node:
        print(f"{node}: simulated crash at startup", file=sys.stderr)
        return 1
    host, _, port = args.listen.rpartition(":")
    log: dict[tuple[str, int], list[list[int]]] = {}
    incarnation = os.urandom(4).hex()
    events: list[dict] = []
    blocked: list[str] = []

    def event(type_: str, **fields: object) -> None:
        events.append({"seq": len(events), "time": time.time_ns(), "node": node,
                       "type": type_, **fields})

    def partitions() -> list[dict]:
        out = []
        for t in config["topics"]:
            for p, replicas in enumerate(t["replicas"]):
                if args.id is not None and args.id not in replicas:
                    continue
                leo = len(log.get((t["name"], p), []))
                role = "leader" if replicas[0] == args.id else "follower"
                out.append({"topic": t["name"], "partition": p, "role": role,
                            "leader": replicas[0], "leader_epoch": 0, "leo": leo, "hw": leo,
                            "hw_checkpoint": 0, "isr": list(replicas), "epoch_cache": [[0, 0]],
                            "state": "fetching", "fsynced_leo": 0})
        return out

    def handle(req: dict) -> dict:
        kind = req.get("type")
        if kind == "status":
            st = {"error": None, "node": node, "incarnation": incarnation,
                  "protocol": config["protocol"], "partitions": partitions()}
            if args.id is None:
                st["live"] = list(config["brokers"])
            st["blocked"] = blocked  # stub only: lets tests see net-block
            return st
        if kind == "events":
            since = req.get("since", 0)
            return {"error": None, "events": events[since:], "next": len(events)}
        if kind == "metadata":
            return {"error": None, "brokers": config["brokers"], "partitions": partitions()}
        if kind == "produce":
            records = log.setdefault((req["topic"], req["partition"]), [])
            records.append([len(records), 0, req["value"]])
            event("hw-advance", topic=req["topic"], partition=req["partition"],
                  leader_epoch=0, hw=len(records))
            return {"error": None, "offset": len(records) - 1}
        if kind in ("fetch", "dump-log"):
            records = log.get((req["topic"], req["partition"]), [])
            start = req.get("offset", 0)
            page = records[start:start + req.get("max_records", 10**9)]
            return {"error": None, "records": page, "hw": len(records), "leo": len(records),
                    "leader_epoch": 0}
        if kind == "net-block":
            blocked[:] = sorted(req["peers"])
            return {"error": None, "blocked": blocked}
        if kind in ("flush", "checkpoint-hw"):
            event(kind)
            return {"error": None}
        return {"error": "INVALID_REQUEST"}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                writer.write(json.dumps(handle(json.loads(line))).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, json.JSONDecodeError):
            pass
        finally:
            writer.close()

    async def run() -> int:
        try:
            server = await asyncio.start_server(serve, host, int(port))
        except OSError:
            print(f"address in use: {args.listen}", file=sys.stderr)
            return 3
        event("started")
        if args.id is None:
            for b in config["brokers"]:
                event("broker-registered", broker=b)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        print(f"{node} listening on {args.listen}", file=sys.stderr)
        async with server:
            await stop.wait()
        return 0

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
