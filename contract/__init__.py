"""isrlab's vocabulary: the names shared by the run directory, scenarios, the
harness, the checker and the reports, each defined once (docs/run-directory.md,
docs/anomalies.md). The protocol versions are the broker's own list. Reading and
writing a run directory is contract.rundir's; decoding any file isrlab reads,
contract.utf8's.
"""

from __future__ import annotations

from typing import Any

from broker.protocol import PROTOCOLS

__all__ = [
    "ANOMALIES_JSON", "ANOMALY_KINDS", "CHECK", "CLIENT_FS", "COMPLETE", "CONTROLLER", "CRASHED",
    "EVENTS", "EVENT_TYPES", "FAULT_WINDOWS",
    "FINAL_PROCESS", "FORMAT_VERSION", "HISTORY", "INCOMPLETE", "LOG", "LOGS", "NEMESIS_FS",
    "NEMESIS_PROCESS", "NETWORK_FAULTS", "OP_TYPES", "PROCESS_FAULTS", "PROTOCOLS",
    "RECOVERY_FS", "REPLICAS",
    "REPORT_HTML", "REPORT_INPUTS_JSON", "RESERVE", "ROLES", "RUN_JSON", "RUN_STATUSES",
    "RUNNING", "STATE", "STORY_VALUES",
    "SUMMARY_JSON",
    "TRACE", "UNFINISHED", "witness_part",
]

FORMAT_VERSION = 1

# -- anomaly kinds (docs/anomalies.md), in the order they are listed -----------
ANOMALY_KINDS = (
    "lost-write",
    "divergence",
    "inconsistent-offset",
    "duplicate",
    "uncommitted-read",
    "aborted-read",
    "nonmonotonic-poll",
    "poll-skip",
    "hw-regression",
)

# Values a report's story line names (the rest are counted): the check sends the
# story the acknowledged sends of that many (checker.reportrisk).
STORY_VALUES = 6


def witness_part(anomaly: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """An anomalies.json entry's witness and the partition it names, "topic/partition"
    (the anomaly's own, where the witness names none)."""
    w = anomaly.get("witness") or {}
    topic, partition = w.get("topic", anomaly.get("topic")), w.get("partition",
                                                                 anomaly.get("partition"))
    return w, f"{topic}/{partition}"


# -- run.json "status" (docs/run-directory.md) -----------------------------------
RUNNING = "running"  # written at start; still so if the harness died
COMPLETE = "complete"
INCOMPLETE = "incomplete"  # the harness ended the run early (an error, Ctrl-C)
CRASHED = "crashed"  # the harness died; `isrlab collect` rebuilt the replicas
RUN_STATUSES = (RUNNING, COMPLETE, INCOMPLETE, CRASHED)
# A run with one of these did not record all it was meant to: the checker judges
# the prefix it has (verdict "incomplete", docs/anomalies.md).
UNFINISHED = (RUNNING, INCOMPLETE, CRASHED)

# -- history.jsonl -------------------------------------------------------------
OP_TYPES = ("invoke", "ok", "fail", "info")
CLIENT_FS = ("send", "poll")
# Nemesis ops. "stop" (SIGTERM, a clean shutdown) is isrlab's addition to the
# original design's list.
PROCESS_FAULTS = ("kill", "start", "stop", "pause", "resume", "power-cycle")
# `delay` holds messages between nodes, `deliver` sends what is held (heal too).
NETWORK_FAULTS = ("partition", "heal", "delay", "deliver")
NEMESIS_FS = PROCESS_FAULTS + NETWORK_FAULTS
# What each fault does to the nodes it hits, in one place: the window it opens
# ("down": no process; "paused": frozen; "partitioned": cut off) and the op that
# ends it. A power cycle leaves its node down until `start`, like a kill (its
# disk has lost what was not flushed). The nemesis, the schedule, the charts, the
# trace table and the export read their rules from here.
FAULT_WINDOWS: dict[str, tuple[str, str]] = {
    "kill": ("down", "start"),
    "stop": ("down", "start"),
    "power-cycle": ("down", "start"),
    "pause": ("paused", "resume"),
    "partition": ("partitioned", "heal"),
}
# The ops that end a window (a scenario's `recover`): start, resume, heal.
RECOVERY_FS = tuple(dict.fromkeys(end for _, end in FAULT_WINDOWS.values()))
FINAL_PROCESS = "final"
NEMESIS_PROCESS = "nemesis"

# The controller's node name in events.jsonl and the nemesis' targets (the broker,
# which ships without isrlab, spells it in broker/controller.py).
CONTROLLER = "controller"

# -- events.jsonl "type" (docs/run-directory.md): every event a process (or the
# sim's network) emits -- what a scenario's event wait can name.
EVENT_TYPES = (
    # a broker
    "started", "flush", "hw-checkpoint", "halt",
    # a broker's partition
    "became-leader", "became-follower", "became-none", "epoch-assigned",
    "epoch-request-sent", "epoch-response", "truncate", "hw-advance", "fetch-fenced",
    # ... its idempotent producers' batches: a resend recognised, a batch refused
    "producer-duplicate", "producer-refused",
    # the controller (isr-shrink / isr-expand also a partition's leader)
    "broker-registered", "registration-refused", "broker-dead", "leader-elected",
    "leader-offline", "isr-shrink", "isr-expand",
    # any process: its own network faults
    "net-block", "net-delay", "delay-held", "delay-delivered",
    # the sim's network (broker.sim_cluster.Network)
    "net-lost", "net-duplicated",
)

# -- replicas/<broker>/state.json ----------------------------------------------
ROLES = ("leader", "follower", "none")

# -- file names of the run directory --------------------------------------------
RUN_JSON = "run.json"
HISTORY = "history.jsonl"
EVENTS = "events.jsonl"
TRACE = "trace.jsonl"  # sim runs: the fetch-round trace (harness.sim.trace)
LOGS = "logs"
REPLICAS = "replicas"
LOG = "log.jsonl"  # replicas/<broker>/log.jsonl
STATE = "state.json"  # replicas/<broker>/state.json
RESERVE = ".reserve"  # while a run goes: room kept free to close it on a full disk
CHECK = "check"
ANOMALIES_JSON = "anomalies.json"  # check/anomalies.json
SUMMARY_JSON = "summary.json"  # check/summary.json
REPORT_HTML = "report.html"  # check/report.html
# check/report-inputs.json: what the report needs of the history, reduced by the check
REPORT_INPUTS_JSON = "report-inputs.json"
ASSERTIONS_JSON = "assertions.json"  # check/assertions.json: a scenario's figure assertions
