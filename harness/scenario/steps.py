"""Scenario steps: the Step model and the validation of each step kind
(format: docs/scenarios.md)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from contract import EVENT_TYPES, NETWORK_FAULTS, PROCESS_FAULTS, ROLES
from harness.backends.base import CONTROLLER
from harness.duration import DurationError, parse_duration
from harness.validate import (
    LIMITS,
    MAX_INT64,
    Validator,
    check_topic_partition,
    empty_map,
    in_range,
)
from harness.yamlloc import LocMap
from nemesis import delays, grudges

ADMIN_OPS = ("flush", "checkpoint-hw")
# "not-ok": fail or info -- a write that must not be acknowledged, however it ends.
OUTCOMES = ("ok", "fail", "info", "not-ok", "any")
# `sleep` and `recover` carry the timed fault schedules of chaos runs (harness.chaos.runs)
# and the scenarios exported from them (harness.chaos.export).
# `load` starts (or stops) background producers between steps: a rate or bursts.
STEP_KINDS = ("produce", "consume", "wait", "admin", "final-read", "sleep", "recover", "load",
              *PROCESS_FAULTS, *NETWORK_FAULTS)
PARTITION_SHAPES = ("isolate", "split", "halves", "bridge", "cut")
# The requests between nodes a `delay` may be limited to (broker/PROTOCOL.md).
DELAY_REQUESTS = ("replica-fetch", "offsets-for-leader-epoch", "register", "heartbeat",
                  "alter-partition", "shutdown")
STEP_MODIFIERS = ("since", "before", "variants", "note")
# Process faults that take `for`: the undoing fault is scheduled that long after
# (a timer, not the next steps' duration). Only pause: its undo (SIGCONT) is
# instant, so a timer thread never waits on a broker's start-up.
TIMED_FAULTS = {"pause": "resume"}
# Broker status fields a wait may test; the controller's status has a subset
# (leader, leader_epoch, isr, partition_epoch).
STATUS_FIELDS = ("role", "leader", "leader_epoch", "leo", "hw", "hw_checkpoint", "isr",
                 "state", "fsynced_leo", "epoch_cache", "partition_epoch")
CONTROLLER_FIELDS = ("leader", "leader_epoch", "isr", "partition_epoch")
# Status fields that are offsets or epochs: integers >= 0.
COUNTER_FIELDS = ("leader_epoch", "leo", "hw", "hw_checkpoint", "fsynced_leo",
                  "partition_epoch")
# A broker's `state` of a partition: a follower's (truncating, waiting on
# OffsetsForLeaderEpoch, or fetching), else its role (broker/partition.py status).
FOLLOWER_STATES = ("truncating", "fetching")
# Event fields whose values are nodes, or offsets and epochs (contract.EVENT_TYPES).
EVENT_NODE_FIELDS = ("leader", "broker", "replica", "peer")
EVENT_COUNTER_FIELDS = ("leader_epoch", "epoch", "hw", "leo", "partition_epoch")
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "same-as")
SINCE = ("action", "step", "run")
DEFAULT_WAIT_TIMEOUT = 30.0
DEFAULT_FINAL_TIMEOUT = 60.0


@dataclass
class Step:
    index: int  # 1-based position in the file
    kind: str
    args: dict[str, Any]
    line: int
    # Run only from `since` on and under the versions older than `before` (None: no bound).
    since: str | None = None
    before: str | None = None
    note: str | None = None
    variants: list[str] | None = None  # run only in these variants (None: every one)

    def applies_to(self, protocol: str) -> bool:
        return in_range(protocol, self.since, self.before)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"step": self.index, "line": self.line, "kind": self.kind,
                             "args": self.args}
        if self.since is not None:
            d["since"] = self.since
        if self.before is not None:
            d["before"] = self.before
        if self.variants is not None:
            d["variants"] = self.variants
        if self.note:
            d["note"] = self.note
        return d

    def describe(self) -> str:
        a = self.args
        if self.kind in PROCESS_FAULTS:
            if "nodes" not in a:  # a chaos target, resolved when it runs
                return f"{self.kind} the leader of {a['topic']}/{a['partition']}"
            timed = f" for {a['for'] * 1000:g} ms" if a.get("for") is not None else ""
            return f"{self.kind} {', '.join(a['nodes'])}{timed}"
        if self.kind == "load":
            if a.get("stop"):
                return "load stop"
            how = (f"bursts of {a['burst']} every {a['every'] * 1000:g} ms" if a.get("burst")
                   else f"{a['rate']:g}/s")
            return f"load: {a['producers']} producer(s), {how}, acks {a['acks']}"
        if self.kind == "partition":
            if "grudge" not in a:
                return (f"partition ({a['shape']} the leader of {a['topic']}/"
                        f"{a['partition']})")
            return f"partition ({a['shape']}): " + "; ".join(
                f"{n} cut from {','.join(peers)}" for n, peers in a["grudge"].items())
        if self.kind == "delay":
            held = f" ({', '.join(a['requests'])})" if a.get("requests") else ""
            how = f"for {a['for']:g}s" if a.get("for") is not None else "until deliver/heal"
            return f"delay {','.join(a['from'])} -> {','.join(a['to'])}{held} {how}"
        if self.kind == "sleep":
            if "until" in a:
                return f"sleep until {a['until']:g}s after the first step"
            return f"sleep {a['seconds']:g}s"
        if self.kind == "recover":
            return "recover (heal, resume paused and start stopped brokers)"
        if self.kind == "produce":
            label = f" {a['label']}" if a.get("label") else ""
            return f"produce {a['n']}{label} (acks {a['acks']}, expect {a['expect']})"
        if self.kind == "admin":
            return f"admin {a['op']} on {', '.join(a['nodes'])}"
        if self.kind == "wait":
            if a.get("running") is not None:
                return f"wait for {a['node']} {'running' if a['running'] else 'to exit'}"
            conds = " ".join(f"{k}={_show(v)}" for k, v in a["conditions"].items())
            if a.get("event"):
                return f"wait for event {a['event']} on {a['node']} {conds}".rstrip()
            return f"wait for {a['node']} {conds}"
        if self.kind == "consume":
            return f"consume {a['n']} poll(s)"
        return self.kind


def _show(v: Any) -> str:
    if isinstance(v, dict):
        (op, x), = v.items()
        return f"{op}:{x}"
    return str(v)


def parse_steps(v: Validator, doc: LocMap, brokers: list[str], topics: list[dict[str, Any]],
                workload: dict[str, Any], declared_variants: tuple[str, ...] = ()) -> list[Step]:
    sl = v.seq(doc["steps"], doc.line_of("steps"), "steps")
    if not sl:
        raise v.err(sl.line, "steps must not be empty")
    steps = []
    for i, raw in enumerate(sl):
        line = sl.line_of(i)
        if isinstance(raw, str):
            raw_map = LocMap({raw: None})
            raw_map.line, raw_map.key_lines = line, {raw: line}
            raw = raw_map
        m = v.mapping(raw, line, "a step")
        kinds = [k for k in m if k not in STEP_MODIFIERS]
        for k in kinds:
            if k not in STEP_KINDS:
                raise v.err(m.line_of(k), f"unknown step {k!r}; known: "
                                          f"{', '.join(STEP_KINDS)}")
        if len(kinds) != 1:
            raise v.err(line, f"a step has exactly one kind, found {len(kinds)}: "
                              f"{', '.join(kinds) or 'none'}")
        kind = kinds[0]
        since, before = v.version_range(m)
        variants = None
        if "variants" in m:
            vl = m["variants"]
            vl = [vl] if isinstance(vl, str) else v.seq(vl, m.line_of("variants"), "variants")
            for name in vl:
                if name not in declared_variants:
                    known = ", ".join(declared_variants) or "none declared"
                    raise v.err(m.line_of("variants"), f"unknown variant {name!r}; "
                                                       f"this file declares: {known}")
            variants = list(vl)
        note = m.get("note")
        args = _step_args(v, kind, m[kind], m.line_of(kind), brokers, topics, workload)
        steps.append(Step(index=i + 1, kind=kind, args=args, line=line, since=since,
                          before=before, note=note if isinstance(note, str) else None,
                          variants=variants))
    return steps


def duration(v: Validator, raw: Any, line: int, what: str) -> float:
    """Seconds from a duration (harness.duration's grammar: `2`, `0.5`, `2s`, `100ms`,
    `1m30s`; more than 0, at most 7 days); FILE:LINE otherwise."""
    try:
        return parse_duration(raw, what)
    except DurationError as e:
        raise v.err(line, str(e)) from None


def _step_args(v: Validator, kind: str, raw: Any, line: int, brokers: list[str],
               topics: list[dict[str, Any]], workload: dict[str, Any]) -> dict[str, Any]:
    if kind in PROCESS_FAULTS:
        if isinstance(raw, LocMap):  # {node: C, for: 100ms}
            v.keys(raw, ("node", "for"), kind, required=("node",))
            args: dict[str, Any] = {"nodes": v.nodes(raw["node"], raw.line_of("node"), brokers,
                                                     kind)}
            if "for" in raw:
                if kind not in TIMED_FAULTS:
                    raise v.err(raw.line_of("for"), f"for applies to "
                                                    f"{', '.join(TIMED_FAULTS)} only")
                args["for"] = duration(v, raw["for"], raw.line_of("for"), f"{kind} for")
            return args
        return {"nodes": v.nodes(raw, line, brokers, kind)}
    if kind == "load":
        return _load_args(v, raw, line, topics, workload)
    if kind == "delay":
        return _delay_args(v, raw, line, brokers)
    if kind in ("heal", "recover", "deliver"):
        if raw is not None:
            raise v.err(line, f"{kind} takes no arguments")
        return {}
    if kind == "sleep":
        if isinstance(raw, LocMap):
            v.keys(raw, ("until",), "sleep", required=("until",))
            return {"until": v.seconds(raw["until"], raw.line_of("until"), "sleep until")}
        return {"seconds": v.seconds(raw, line, "sleep")}
    if kind == "partition":
        return _partition_args(v, raw, line, brokers)
    if kind == "final-read":
        m = v.mapping(raw if raw is not None else empty_map(line), line, "final-read")
        v.keys(m, ("timeout", "heal"), "final-read")
        heal = m.get("heal", True)
        if not isinstance(heal, bool):
            raise v.err(m.line_of("heal"), "heal must be true or false")
        return {"timeout": v.seconds(m.get("timeout", DEFAULT_FINAL_TIMEOUT),
                                     m.line_of("timeout"), "timeout"), "heal": heal}
    if kind == "produce":
        if raw is None or isinstance(raw, int) and not isinstance(raw, bool):
            m = empty_map(line)
            if raw is not None:
                m["n"] = raw
        else:
            m = v.mapping(raw, line, "produce")
        v.keys(m, ("n", "label", "acks", "expect", "topic", "partition"), "produce")
        expect = m.get("expect", "ok")
        if expect not in OUTCOMES:
            raise v.err(m.line_of("expect"), f"expect must be one of {', '.join(OUTCOMES)}")
        label = m.get("label")
        if label is not None:
            label = v.string(str(label), m.line_of("label"), "label")
        args = {
            "n": v.integer(m.get("n", 1), m.line_of("n"), "n", 1, LIMITS["sends"]),
            "label": label,
            "acks": v.acks(m.get("acks", workload["acks"]), m.line_of("acks")),
            "expect": expect,
            "topic": m.get("topic", workload["topic"]),
            "partition": m.get("partition", workload["partition"]),
        }
        check_topic_partition(v, m.line_of("topic"), topics, args["topic"], args["partition"])
        return args
    if kind == "consume":
        m = v.mapping(raw if raw is not None else empty_map(line), line, "consume")
        v.keys(m, ("n",), "consume")
        return {"n": v.integer(m.get("n", 1), m.line_of("n"), "n", 1, LIMITS["sends"])}
    if kind == "admin":
        m = v.mapping(raw, line, "admin")
        v.keys(m, ("op", "node"), "admin", required=("op", "node"))
        if m["op"] not in ADMIN_OPS:
            raise v.err(m.line_of("op"), f"admin op must be one of {', '.join(ADMIN_OPS)}")
        return {"op": m["op"], "nodes": v.nodes(m["node"], m.line_of("node"), brokers, "node")}
    assert kind == "wait"
    return _wait_args(v, v.mapping(raw, line, "wait"), brokers, topics, workload)


def _wait_args(v: Validator, m: LocMap, brokers: list[str], topics: list[dict[str, Any]],
               workload: dict[str, Any]) -> dict[str, Any]:
    if "node" not in m:
        raise v.err(m.line, "wait needs a node (a broker or controller)")
    node = v.nodes(m["node"], m.line_of("node"), brokers, "node", allow_controller=True)
    if len(node) != 1:
        raise v.err(m.line_of("node"), "wait takes one node")
    event = m.get("event")
    if event is not None and event not in EVENT_TYPES:
        near = difflib.get_close_matches(str(event), EVENT_TYPES, n=1)
        raise v.err(m.line_of("event"), f"unknown event {event!r}; the brokers and the "
                                        f"controller emit: {', '.join(EVENT_TYPES)}"
                                        + (f"; did you mean {near[0]!r}?" if near else ""))
    if "running" in m:
        # A process wait: the node's process is (not) running -- a broker that halts
        # by itself, whatever the controller made of it.
        extra = sorted(k for k in m if k not in ("node", "running", "timeout"))
        if extra:
            raise v.err(m.line_of(extra[0]), f"a running wait takes node, running and "
                                             f"timeout only, not {extra[0]!r}")
        if not isinstance(m["running"], bool):
            raise v.err(m.line_of("running"), "running must be true or false")
        return {"node": node[0], "event": None, "since": "action", "running": m["running"],
                "conditions": {}, "topic": None, "partition": None,
                "timeout": v.seconds(m.get("timeout", DEFAULT_WAIT_TIMEOUT),
                                     m.line_of("timeout"), "timeout")}
    since = m.get("since", "action")
    if since not in SINCE:
        raise v.err(m.line_of("since"), f"since must be one of {', '.join(SINCE)}")
    if "since" in m and event is None:
        raise v.err(m.line_of("since"), "since applies to event waits only")
    args: dict[str, Any] = {
        "node": node[0],
        "event": event,
        "since": since,
        "timeout": v.seconds(m.get("timeout", DEFAULT_WAIT_TIMEOUT), m.line_of("timeout"),
                             "timeout"),
    }
    conditions: dict[str, Any] = {}
    for k, value in m.items():
        if k in ("node", "event", "since", "timeout"):
            continue
        if event is not None:
            # Event waits match fields of the event exactly (topic/partition too).
            if isinstance(value, (dict, list)):
                raise v.err(m.line_of(k), f"event field {k!r} must be a plain value")
            _event_value(v, k, value, m.line_of(k), brokers)
            conditions[k] = value
            continue
        if k in ("topic", "partition"):
            continue
        fields = CONTROLLER_FIELDS if node[0] == CONTROLLER else STATUS_FIELDS
        if k not in fields:
            whose = "the controller's" if node[0] == CONTROLLER else "a broker's"
            raise v.err(m.line_of(k), f"unknown status field {k!r} of {whose} status; known: "
                                      f"{', '.join(fields)}")
        if isinstance(value, LocMap):
            if len(value) != 1 or next(iter(value)) not in COMPARISONS:
                raise v.err(m.line_of(k), f"a comparison is one of "
                                          f"{', '.join(COMPARISONS)}, e.g. {{ge: 2}}")
            (op, x), = value.items()
            if op == "same-as":
                v.nodes(x, m.line_of(k), brokers, "same-as", allow_controller=True)
            elif op in ("lt", "le", "gt", "ge"):
                if k not in COUNTER_FIELDS:
                    raise v.err(m.line_of(k), f"{k} {op}: only {', '.join(COUNTER_FIELDS)} "
                                              "are ordered; compare the others with eq or ne")
                v.integer(x, m.line_of(k), f"{k} {op}", minimum=-1)
            else:
                x = _status_value(v, k, x, m.line_of(k), brokers)
            value = {op: x}
        else:
            value = _status_value(v, k, value, m.line_of(k), brokers)
        conditions[k] = value
    if event is None:
        args["topic"] = m.get("topic", workload["topic"])
        args["partition"] = m.get("partition", workload["partition"])
        check_topic_partition(v, m.line_of("topic"), topics, args["topic"], args["partition"])
        if not conditions:
            raise v.err(m.line, "wait needs an event or at least one status field")
    args["conditions"] = conditions
    return args


def _status_value(v: Validator, k: str, value: Any, line: int, brokers: list[str]) -> Any:
    """A status wait's value of field `k`, checked against what the field can hold
    (FILE:LINE naming the allowed values otherwise): a wait for a value no node
    reports would only time out, after the cluster started."""
    if k in COUNTER_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT64:
            raise v.err(line, f"{k} must be an integer >= 0 (an offset or epoch), "
                              f"got {value!r}")
        return value
    if k == "role":
        if value not in ROLES:
            raise v.err(line, f"role must be one of {', '.join(ROLES)}, got {value!r}")
        return value
    if k == "state":
        states = (*FOLLOWER_STATES, *(r for r in ROLES if r != "follower"))
        if value not in states:
            raise v.err(line, f"state must be one of {', '.join(states)}, got {value!r}")
        return value
    if k == "leader":
        if value is not None and value not in brokers:
            raise v.err(line, f"leader must be one of the brokers {', '.join(brokers)} "
                              f"(or null: none), got {value!r}")
        return value
    if k == "isr":
        if not isinstance(value, list) or not value:
            raise v.err(line, f"isr must be a list of brokers, e.g. [{', '.join(brokers)}], "
                              f"got {value!r}")
        for b in value:
            if b not in brokers:
                raise v.err(line, f"isr: {b!r} is not a broker; brokers: {', '.join(brokers)}")
        if len(set(value)) != len(value):
            raise v.err(line, f"isr lists a broker twice: {list(value)}")
        return list(value)
    assert k == "epoch_cache"
    if not isinstance(value, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in e)
            for e in value):
        raise v.err(line, f"epoch_cache must be a list of [epoch, start offset] pairs of "
                          f"integers >= 0, e.g. [[0, 0], [1, 3]], got {value!r}")
    return [list(e) for e in value]


def _event_value(v: Validator, k: str, value: Any, line: int, brokers: list[str]) -> None:
    """An event wait's field whose meaning is known: a node, or an offset or epoch."""
    if k in EVENT_NODE_FIELDS and not (value in brokers or (k == "peer" and value == CONTROLLER)):
        known = ", ".join([*brokers, *([CONTROLLER] if k == "peer" else [])])
        raise v.err(line, f"event field {k} must be one of {known}, got {value!r}")
    if k in EVENT_COUNTER_FIELDS and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 0 <= value <= MAX_INT64):
        raise v.err(line, f"event field {k} must be an integer >= 0, got {value!r}")


def _partition_args(v: Validator, raw: Any, line: int, brokers: list[str]) -> dict[str, Any]:
    """`partition: halves|bridge` or `partition: {isolate: A}`, `{split: [[A], [B, C]]}`,
    `{cut: [[A], [controller]]}`; nodes are the brokers in cluster order, then the
    controller."""
    nodes = [*brokers, CONTROLLER]
    if isinstance(raw, str):
        if raw == "halves":
            return {"shape": "halves", "grudge": grudges.halves(nodes)}
        if raw == "bridge":
            return {"shape": "bridge", "grudge": grudges.bridge(nodes)}
        raise v.err(line, f"unknown partition {raw!r}; shapes: {', '.join(PARTITION_SHAPES)}")
    m = v.mapping(raw, line, "partition")
    v.keys(m, PARTITION_SHAPES, "partition")
    if len(m) != 1:
        raise v.err(line, "a partition names exactly one shape")
    (shape, arg), = m.items()
    at = m.line_of(shape)
    if shape == "isolate":
        node = v.nodes(arg, at, brokers, "isolate", allow_controller=True)
        if len(node) != 1:
            raise v.err(at, "isolate takes one node")
        return {"shape": f"isolate {node[0]}", "grudge": grudges.isolate(node[0], nodes)}
    if shape in ("halves", "bridge"):
        raise v.err(at, f"write `partition: {shape}` (it takes no arguments)")
    groups = v.seq(arg, at, shape)
    sides = [v.nodes(g, at, brokers, shape, allow_controller=True) for g in groups]
    if shape == "cut":
        if len(sides) != 2:
            raise v.err(at, "cut takes two lists of nodes: [[A], [controller]]")
        # Node names as a person writes them: `cut B from A, controller`.
        return {"shape": f"cut {', '.join(sides[0])} from {', '.join(sides[1])}",
                "grudge": grudges.cut(sides[0], sides[1], nodes)}
    if sum(len(s) for s in sides) != len({n for s in sides for n in s}):
        raise v.err(at, "split: a node is in more than one group")
    return {"shape": "split " + " | ".join(", ".join(g) for g in sides),
            "grudge": grudges.split(sides, nodes)}


def _delay_args(v: Validator, raw: Any, line: int, brokers: list[str]) -> dict[str, Any]:
    """`delay: {from: B, to: controller, for: 2s, requests: [alter-partition]}`;
    without `for` the messages are held until `deliver` or `heal`."""
    m = v.mapping(raw, line, "delay")
    v.keys(m, ("from", "to", "for", "requests"), "delay", required=("from", "to"))
    frm = v.nodes(m["from"], m.line_of("from"), brokers, "from", allow_controller=True)
    to = v.nodes(m["to"], m.line_of("to"), brokers, "to", allow_controller=True)
    if set(frm) & set(to):
        raise v.err(line, "delay: a node cannot be both in from and to")
    seconds = None
    if "for" in m:
        seconds = duration(v, m["for"], m.line_of("for"), "delay for")
    requests = None
    if "requests" in m:
        rl = m["requests"]
        requests = [rl] if isinstance(rl, str) else list(v.seq(rl, m.line_of("requests"),
                                                                "requests"))
        for r in requests:
            if r not in DELAY_REQUESTS:
                raise v.err(m.line_of("requests"), f"unknown request {r!r}; known: "
                                                   f"{', '.join(DELAY_REQUESTS)}")
    return {"from": frm, "to": to, "for": seconds, "requests": requests,
            "plan": delays.plan(frm, to, seconds, requests)}


def _load_args(v: Validator, raw: Any, line: int, topics: list[dict[str, Any]],
               workload: dict[str, Any]) -> dict[str, Any]:
    """`load: {rate: 200}`, `load: {burst: 6, every: 300ms}`, `load: stop`."""
    if raw == "stop":
        return {"stop": True}
    m = v.mapping(raw, line, "load (or `load: stop`)")
    v.keys(m, ("producers", "rate", "burst", "every", "acks", "topic", "partition"), "load")
    if "burst" in m and "rate" in m:
        raise v.err(m.line_of("rate"), "load takes a rate or a burst (with every), not both")
    if ("burst" in m) != ("every" in m):
        raise v.err(m.line, "a burst load needs both burst (records) and every (a duration)")
    args: dict[str, Any] = {
        "stop": False,
        "producers": v.integer(m.get("producers", 1), m.line_of("producers"), "producers", 1,
                               LIMITS["clients"]),
        "acks": v.acks(m.get("acks", workload["acks"]), m.line_of("acks")),
        "topic": m.get("topic", workload["topic"]),
        "partition": m.get("partition", workload["partition"]),
        "rate": None, "burst": None, "every": None,
    }
    if "burst" in m:
        args["burst"] = v.integer(m["burst"], m.line_of("burst"), "burst", 1, LIMITS["batch"])
        args["every"] = duration(v, m["every"], m.line_of("every"), "every")
    else:
        args["rate"] = v.rate(m.get("rate", workload["rate"]), m.line_of("rate"), "rate")
    check_topic_partition(v, m.line_of("topic"), topics, args["topic"], args["partition"])
    return args
