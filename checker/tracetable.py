"""The trace table's rows of a simulated run (reports.trace prints and explains
them; the check computes a report's first rows, checker.reportevents): one row per
replica fetch round that changed something (trace.jsonl, harness.sim.trace) *or*
protocol event of the partition (events.jsonl) *or* produce answer and nemesis op
(history.jsonl), in time order, with every replica's LEO/HW after it.
"""

from __future__ import annotations

import re
from typing import Any

from contract import FAULT_WINDOWS

# Nemesis ops after which their nodes are down until they start again (a power
# cycle too: its node stays down until `start`).
_DOWN_FAULTS = tuple(f for f, (kind, _) in FAULT_WINDOWS.items() if kind == "down")
# OffsetsForLeaderEpoch answers from 0.11 to 1.1 carry no epoch (KIP-101): -1.
_NO_EPOCH = -1


def rows(rounds: list[dict[str, Any]], events: list[dict[str, Any]],
         history: list[dict[str, Any]], topic: str, partition: int,
         brokers: list[str], labels: dict[Any, str] | None = None) -> list[dict[str, Any]]:
    """The table's rows: {"time" (ns), "round" (or None), "node", "what" (words),
    "replicas" ({broker: "LEO/HW" cell}), "view" (the leader's view)}."""
    labels = labels or {}
    steps: list[tuple[int, int, int, dict[str, Any]]] = []
    for i, e in enumerate(events):
        if steps_of(e, topic, partition):
            steps.append((_ns(e.get("time")), 0, i, {"event": e}))
    for i, o in enumerate(history):
        if o.get("type") == "invoke":
            continue
        if (o.get("process") == "nemesis" and o.get("f") not in ("final-read",)) or (
                o.get("f") == "send" and _of_partition(o, topic, partition)):
            steps.append((_ns(o.get("time")), 1, i, {"op": o}))
    epoch_rounds = set()
    for i, r in enumerate(rounds):
        if r.get("topic") == topic and r.get("partition") == partition:
            steps.append((_ns(r.get("time")), 2, i, {"round": r}))
            if r.get("request") == "offsets-for-leader-epoch":
                epoch_rounds.add((_ns(r.get("time")), r.get("follower")))
    state: dict[str, dict[str, Any]] = {}
    view = ""
    out = []
    for t, _, _, s in sorted(steps, key=lambda x: x[:3]):
        if "round" in s:
            r = s["round"]
            state = {b: dict(x) for b, x in r["replicas"].items()}
            lead = r.get("leader")
            view = (" ".join(f"{k}={'?' if v is None else v}"
                             for k, v in lead["remote_leo"].items()) if lead else "no leader")
            node, what = str(r["follower"]), _round_words(r)
            rnd = r.get("round")
        elif "op" in s:
            o = s["op"]
            node, what = _op_words(o, labels)
            if o.get("f") in _DOWN_FAULTS:
                for n in o.get("value") if isinstance(o.get("value"), list) else []:
                    if n in state:
                        state[n] = {"role": "down", "leo": None, "hw": None}
            if o.get("type") == "ok" and isinstance(o.get("offset"), int) \
                    and o.get("node") in state:
                x = state[o["node"]]
                if isinstance(x.get("leo"), int):
                    x["leo"] = max(x["leo"], o["offset"] + 1)  # the leader appended it
            rnd = None
        else:
            e = s["event"]
            if e.get("type") == "epoch-response" and (t, e.get("node")) in epoch_rounds:
                continue  # its fetch round's row says the answer, with the state after it
            said = _event(e, state, topic, partition)
            if said is None:
                continue
            node, what = said
            if e.get("type") == "leader-elected":
                view = ""
            rnd = None
        out.append({"time": t, "round": rnd, "node": node, "what": what,
                    "replicas": {b: _cell(state.get(b)) for b in brokers}, "view": view})
    return out


def steps_of(e: dict[str, Any], topic: Any, partition: Any) -> bool:
    """Whether an event is a step of the partition's table."""
    return _of_partition(e, topic, partition) or e.get("type") in ("started", "broker-dead",
                                                                      "halt")


def shows(e: dict[str, Any], topic: Any, partition: Any,
          epoch_rounds: set[tuple[int, Any]]) -> bool:
    """Whether a step event (steps_of) makes a row of the table, ``epoch_rounds``
    being the partition's OffsetsForLeaderEpoch rounds as (time, follower): those
    rows say the answer an epoch-response event would."""
    if e.get("type") == "epoch-response" and (_ns(e.get("time")), e.get("node")) in epoch_rounds:
        return False
    return _event(e, {}, topic, partition) is not None


def _of_partition(x: dict[str, Any], topic: str, partition: int) -> bool:
    return x.get("topic") == topic and x.get("partition") == partition


def _ns(t: Any) -> int:
    return t if isinstance(t, int) else 0


def _cell(x: dict[str, Any] | None) -> str:
    if x is None:
        return ""
    if x.get("role") == "down" or x.get("leo") is None:
        return "down"
    return f"{x['leo']}/{x['hw']}" + ("*" if x.get("role") == "leader" else "")


def _round_words(r: dict[str, Any]) -> str:
    f, ans = r["follower"], r.get("answer") or ""
    if r.get("request") == "replica-fetch":
        return f"{f} fetches from offset {r.get('offset')}: {_answer_words(ans)}"
    return f"{f} gets the answer to OffsetsForLeaderEpoch: {_answer_words(ans)}"


def _answer_words(ans: str) -> str:
    """harness.sim.trace's short answer, in words ("epoch -1 ends at 2" is 0.11's
    epoch-less answer)."""
    if m := _EPOCH_ANSWER.fullmatch(ans):
        epoch, end = m.groups()
        if int(epoch) == _NO_EPOCH:
            return f"end offset {end} (0.11–1.1 answers name no epoch, KIP-101)"
        return f"epoch {epoch} ends at offset {end}"
    if m := _RECORDS_ANSWER.fullmatch(ans):
        n, hw = m.groups()
        return f"{n} record{'' if n == '1' else 's'}, leader's HW {hw}"
    if m := _DIVERGING_ANSWER.fullmatch(ans):
        return f"the leader names diverging epoch {m.group(1)}, ending at offset {m.group(2)}"
    if ans == "no answer":
        return "no answer (timed out or cut off)"
    return f"error {ans}" if ans.isupper() else ans


_EPOCH_ANSWER = re.compile(r"epoch (-?\d+) ends at (-?\d+)")
_RECORDS_ANSWER = re.compile(r"(\d+) record\(s\), hw (-?\d+)")
_DIVERGING_ANSWER = re.compile(r"diverging: epoch (-?\d+) ends at (-?\d+)")


def _op_words(o: dict[str, Any], labels: dict[Any, str]) -> tuple[str, str]:
    if o.get("process") == "nemesis":
        v = o.get("value")
        if isinstance(v, list):
            v = ", ".join(map(str, v))
        elif isinstance(v, dict) and all(isinstance(x, list) for x in v.values()):
            v = "; ".join(f"{k} from {', '.join(map(str, x))}" for k, x in v.items())  # a grudge
        elif isinstance(v, dict):  # e.g. a delay: {"from": [..], "to": [..], "for": 1.3, ..}
            v = "; ".join(f"{k} {', '.join(map(str, x)) if isinstance(x, list) else x}"
                          for k, x in v.items())
        return "nemesis", f"{o.get('f')}" + (f" {v}" if v else "")
    val = o.get("value")
    name = f"value {val}" + (f" ({labels[val]})" if val in labels else "")
    if o.get("type") == "ok":
        who = str(o.get("node") or f"client {o.get('process')}")
        return (who, f"{who} acknowledges {name} at offset {o.get('offset')} "
                     f"(acks={o.get('acks')})")
    return (f"client {o.get('process')}",
            f"produce of {name} not acknowledged ({o.get('type')}: {o.get('error')})")


def _event(e: dict[str, Any], state: dict[str, dict[str, Any]], topic: str,
           partition: int) -> tuple[str, str] | None:
    """(node, words) for one event, after applying it to `state`; None: not shown."""
    typ, node = e.get("type"), str(e.get("node"))
    x = state.setdefault(node, {"role": "none", "leo": None, "hw": None}) \
        if node != "controller" else {}
    if typ == "started":
        p = next((p for p in e.get("partitions") or []
                  if isinstance(p, dict) and _of_partition(p, topic, partition)), None)
        if p is None:
            return None
        x.update(role="none", leo=p.get("leo"), hw=p.get("hw"))
        return node, f"{node} starts with LEO {p.get('leo')}, HW {p.get('hw')} from its disk"
    if typ == "broker-dead":
        return "controller", (f"{e.get('broker')} is dead to the controller "
                              f"({e.get('reason') or 'no reason given'})")
    if typ == "halt":
        return node, f"{node} halts ({e.get('reason')})"
    if typ == "leader-elected":
        how = "unclean" if e.get("unclean") else f"ISR {','.join(e.get('isr') or [])}"
        return "controller", (f"elects {e.get('leader')} leader of epoch "
                              f"{e.get('leader_epoch')} ({how})")
    if typ in ("became-leader", "became-follower"):
        x.update(role=typ.removeprefix("became-"), leo=e.get("leo"), hw=e.get("hw"))
        whose = "" if typ == "became-leader" else f" of {e.get('leader')}"
        return node, (f"{node} becomes {x['role']}{whose} (epoch {e.get('leader_epoch')}) "
                      f"with LEO {e.get('leo')}, HW {e.get('hw')}")
    if typ == "truncate":
        frm, to = e.get("from"), e.get("to")
        x.update(leo=to, hw=min(x["hw"], to) if isinstance(x.get("hw"), int) else x.get("hw"))
        what = (f"removing {'offset ' + str(to) if frm == to + 1 else f'offsets {to}–{frm - 1}'}"
                if isinstance(frm, int) and isinstance(to, int) and frm > to
                else "removing nothing")
        return node, (f"{node} truncates to offset {to} by rule {e.get('rule') or '?'} "
                      f"({_RULE_WORDS.get(e.get('rule'), e.get('reason'))}), {what}")
    if typ == "hw-advance":
        x["hw"] = e.get("new")
        return node, f"{node}'s HW moves {e.get('old')} → {e.get('new')}"
    if typ == "epoch-request-sent":
        return node, (f"{node} asks {e.get('leader')} where its epoch {e.get('requested')} "
                      "ends (OffsetsForLeaderEpoch)")
    if typ == "epoch-response":
        ans = e.get("answer_epoch")
        said = (f"end offset {e.get('end_offset')} (0.11–1.1 answers name no epoch, KIP-101)"
                if ans == _NO_EPOCH else f"epoch {ans} ends at offset {e.get('end_offset')}")
        return node, f"{node} hears where its epoch {e.get('requested')} ends: {said}"
    if typ in ("isr-shrink", "isr-expand"):
        new = e.get("isr", e.get("new")) or []
        return node, f"ISR {','.join(e.get('old') or [])} → {','.join(new)}"
    return None


_RULE_WORDS = {
    "hw": "to its own HW, asking no one",
    "offsets_for_leader_epoch": "to the end offset the leader answered",
    "diverging_epoch": "to where the diverging epoch the leader named ends",
    "offset_out_of_range": "to the leader's LEO after OFFSET_OUT_OF_RANGE",
}
