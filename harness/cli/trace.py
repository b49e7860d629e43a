"""`isrlab trace NAME`: a scenario run on the sim backend, printed as one row per
fetch round that changed something (harness.sim.trace) or protocol event (an
election, a role change, a truncation with its rule, an HW move, an
OffsetsForLeaderEpoch request or answer, a produce answer, a nemesis op), with
every replica's LEO and HW after it and the leader's view of its followers
(docs/catalogue.md#hw-lags-one-fetch), from the real cores; a legend under it
(reports.trace, whose rows the report shows too). The run directory keeps the
fetch rounds as trace.jsonl.

Exit status: 0 once printed, 3 if the run could not complete (what it traced
is printed all the same), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from contract import EVENTS, HISTORY
from contract.rundir import read_jsonl, readable_meta
from harness.cli import flags
from harness.errors import UsageError
from harness.progress import Progress
from harness.run.runner import RunOptions, run_scenario
from harness.scenario.loader import find_scenario, load_scenario
from harness.sim.trace import read_trace
from reports import trace as trace_table


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    t = flags.command_parser(
        sub, "trace", "a scenario on the simulator, fetch round by fetch round and "
                      "protocol event: each replica's LEO and HW",
        description="Run a scenario on the simulator and print one row per fetch round "
                    "that changed something or protocol event (election, truncation and "
                    "its rule, HW move, OffsetsForLeaderEpoch request/answer, produce "
                    "answer), with each replica's LEO/HW after it; a legend under the "
                    "table explains the notation.",
        example="isrlab trace kip101-hw-truncation-loss --protocol 0.10",
        exit_codes="0  traced\n2  bad input\n3  the run could not complete",
        docs="sim.md#trace")
    t.add_argument("scenario", metavar="NAME|PATH",
                   help="a shipped scenario (isrlab scenarios lists them) or a YAML file")
    flags.add_protocol_flag(t)
    flags.add_seed_flag(t, "the run's seed")
    t.add_argument("--variant", help="this variant of the scenario (default: its first)")
    t.add_argument("--topic", help="the partition to trace: topic (default: the workload's)")
    t.add_argument("--partition", type=flags.typed(_partition_number), metavar="N",
                   help="... and partition")
    flags.add_runs_dir_flag(t)
    flags.add_output_flags(t)
    return t


def run(args: argparse.Namespace) -> int:
    scenario = load_scenario(find_scenario(args.scenario), args.variant)
    topic = args.topic or scenario.workload["topic"]
    part = args.partition if args.partition is not None else scenario.workload["partition"]
    _require_partition(scenario.topics, topic, part)  # before anything runs
    progress = Progress(sys.stderr, quiet=args.quiet or args.json)
    record = run_scenario(scenario, RunOptions(protocol=args.protocol, backend="sim",
                                               seed=args.seed, runs_dir=args.runs_dir), progress)
    rows = [r for r in read_trace(record.run_dir)
            if r["topic"] == topic and r["partition"] == part]
    brokers = list(scenario.brokers)
    labels = {v: lab for lab, vs in (readable_meta(record.run_dir).get("labels") or {}).items()
              if isinstance(vs, list) for v in vs}
    table = trace_table.rows(read_trace(record.run_dir),
                             read_jsonl(record.run_dir, EVENTS),
                             read_jsonl(record.run_dir, HISTORY), topic, part, brokers, labels)
    if args.json:
        # "rows": the fetch rounds as trace.jsonl has them; "table": the printed rows.
        print(json.dumps({"run_dir": str(record.run_dir), "topic": topic, "partition": part,
                          "error": str(record.error) if record.error else None,
                          "rows": rows, "table": table, "legend": list(trace_table.LEGEND)}))
    else:
        print(f"{scenario.name} under {args.protocol}, {topic}/{part}, seed {args.seed} "
              f"(simulated; {len(rows)} fetch round(s) that changed something, "
              f"{len(table) - len(rows)} protocol event(s) and operation(s))")
        print(trace_table.text(table, brokers))
        print(f"run: {record.run_dir}")
    if record.error is not None:
        print(f"isrlab: {record.error}", file=sys.stderr)
        return record.error.exit_code
    return 0


def _partition_number(text: str) -> int:
    return flags.number(text, int, "a partition number", lambda n: True, "")


def _require_partition(topics: list[dict[str, Any]], topic: str, partition: int) -> None:
    """UsageError (exit 2) naming the scenario's partitions unless topic/partition
    is one of them: a trace of a partition the run does not have is empty."""
    has = "; ".join(f"topic {t['name']!r}, " + (
        "partition 0" if t["partitions"] == 1 else f"partitions 0..{t['partitions'] - 1}")
        for t in topics)
    for t in topics:
        if t["name"] == topic:
            if 0 <= partition < t["partitions"]:
                return
            raise UsageError(f"trace: topic {topic!r} has no partition {partition}; the "
                             f"scenario has {has}")
    raise UsageError(f"trace: no topic {topic!r}; the scenario has {has}")
