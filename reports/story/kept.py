"""The story of a run without anomalies: which rule kept the acknowledged records
that were at risk.

A record is at risk when a follower holds it above its HW as it starts following
a new leader: 0.10's rule (hw: truncate to the own HW on becoming a follower,
ReplicaManager.makeFollowers) removes it there. Read only from the run's events
-- became-follower with its LEO and HW, the truncations after it with their rule,
the epoch-request-sent / epoch-response pairs (OffsetsForLeaderEpoch) -- and the
acknowledged sends of history.jsonl; never from the scenario's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reports.story.facts import Item, int_or, rule_of, run_features, time_ns
from reports.story.lines import Cause, Line, Step
from reports.story.words import MAX_VALUES, rec_text, value_name
from reports.units import offsets_phrase

if TYPE_CHECKING:
    from reports.story.builder import _Builder

# How a follower's truncation is decided, by its Kafka release and KIP.
ASKS = {
    "offsets_for_leader_epoch": "from Kafka 0.11.0 a follower truncates only to the end "
                                "offset the leader answers to OffsetsForLeaderEpoch (KIP-101)",
    "diverging_epoch": "from Kafka 2.8.0 a follower truncates only where the leader's Fetch "
                       "answer names a diverging epoch (KAFKA-10554)",
}
_NO_EPOCH = -1  # 0.11–1.1 answers carry no epoch (KIP-101); from 2.0 they do (KIP-279)


def kept_causes(b: _Builder) -> list[Cause]:
    """One "kept" cause per at-risk acknowledged record its replicas all kept."""
    f = b.f
    causes: dict[tuple[str, int], Cause] = {}
    exchanges_of: dict[str, dict[str, list[Item]]] = {}
    for part, by_node in sorted(f.became.items()):
        exchanges = exchanges_of[part] = _exchanges(f.items.values(), part)
        for node, becs in sorted(by_node.items()):
            for i, bec in enumerate(becs):
                if bec.type != "became-follower" or (
                        i and becs[i - 1].get("leader_epoch") == bec.get("leader_epoch")):
                    continue  # at risk only on following a new leader epoch
                leo, hw = int_or(bec.get("leo"), 0), int_or(bec.get("hw"), 0)
                t = time_ns(bec.time)
                risk = {o: a for o in range(hw, leo) if (a := _acked(f, part, o, t))}
                if not risk:
                    continue
                until = time_ns(becs[i + 1].time) if i + 1 < len(becs) else None
                trs = [tr for tr in f.truncs.get(part, {}).get(node, [])
                       if t <= time_ns(tr.time) and (until is None or time_ns(tr.time) < until)]
                if any(f.removes(tr, o) for tr in trs for o in risk):
                    continue  # not kept: the story of a loss, if it became one
                asked = [x for x in exchanges.get(node, [])
                         if t <= time_ns(x.time) and (until is None or time_ns(x.time) < until)]
                ln = b.line(f"kept:{bec.id}", "kept", bec, node=node, part=part)
                ln.said = _kept_text(f, bec, hw, risk, trs, asked, until)
                # shared by the records kept here; each cause adds its own ack
                steps = [Step(ln, f"{node} keeps it ({_rule(trs, asked)})")]
                for x in asked:
                    steps.append(Step(_epoch_line(b, x, part), f"{node} asks the leader"))
                for el in f.elections.get(part, []):
                    if el.leader == node and el.time > t and el.leo is not None \
                            and el.leo >= max(risk) + 1:
                        el_ln = b.election_line(el)
                        for o, a in risk.items():
                            el_ln.still[o] = a.get("value")
                        steps.append(Step(el_ln, f"{node} elected still holding it "
                                                 f"(epoch {el.epoch})"))
                        break
                for o, a in sorted(risk.items()):
                    c = causes.get((part, o))
                    if c is None:
                        c = causes[(part, o)] = Cause(
                            "kept", part, f"{value_name(a.get('value'), f)}, acknowledged "
                                          f"at {part} offset {o}, kept", [o], _ack(b, a, part, o))
                    # by identity: comparing Steps compares their lines, field by
                    # field -- quadratic over a long run's thousands of causes
                    have = {id(s) for s in c.steps}
                    c.steps += [s for s in steps if id(s) not in have]
    # Each OffsetsForLeaderEpoch answer once: (answer, the asker's LEO, its end offset).
    answers = {part: [(x, int_or(bec.get("leo") if bec else None, 0), x.get("end_offset"))
                      for node, xs in ex.items() for x in xs
                      for bec in [f.became_before(node, part, time_ns(x.time))]]
               for part, ex in exchanges_of.items()}
    for (part, o), c in causes.items():
        # Replicas holding it that asked the leader and kept it (the at-risk ones
        # are in already).
        for x, leo, end in answers.get(part, []):
            if leo > o and isinstance(end, int) and end > o:
                ln = _epoch_line(b, x, part)
                if all(s.line is not ln for s in c.steps):
                    c.steps.append(Step(ln, f"{x.node} asks the leader and keeps it"))
    return list(causes.values())


def _acked(f: Any, part: str, offset: int, before: int) -> dict[str, Any] | None:
    """The last acknowledged send at `offset` before `before`."""
    oks = [o for o in f.acks.get(part, {}).get(offset, []) if time_ns(o.get("time")) < before]
    return max(oks, key=lambda o: time_ns(o.get("time"))) if oks else None


def _ack(b: _Builder, op: dict[str, Any], part: str, offset: int) -> list[Step]:
    """The record's own acknowledgement (records kept the same way share the rest)."""
    ln = b.ack_line(op, part)
    return ([Step(ln, f"{ln.node or 'the leader'} acknowledges it", own_ack=True)]
            if ln is not None else [])


def _exchanges(items: Any, part: str) -> dict[str, list[Item]]:
    """Each node's OffsetsForLeaderEpoch answers (epoch-response events) in `part`."""
    out: dict[str, list[Item]] = {}
    for it in sorted(items, key=lambda it: time_ns(it.time)):
        if it.type == "epoch-response" and it.source == "event" and \
                f"{it.get('topic')}/{it.get('partition')}" == part:
            out.setdefault(it.node, []).append(it)
    return out


def _rule(trs: list[Item], asked: list[Item]) -> str:
    rules = [rule_of(tr) for tr in trs if rule_of(tr) and rule_of(tr) != "hw"]
    if rules:
        return f"rule {rules[0]}"
    return "it asks the leader first" if asked else "no truncation to its HW"


def _truncation(protocol: Any) -> str:
    """The protocol's truncation rule (broker.protocol), "" for an unknown protocol."""
    feats = run_features(protocol)
    return feats.truncation if feats is not None else ""


def _answer(x: Item) -> str:
    ans, end = x.get("answer_epoch"), x.get("end_offset")
    if ans == _NO_EPOCH:
        return (f"end offset {end} (the answer names no epoch: OffsetsForLeaderEpoch, "
                "KIP-101, Kafka 0.11.0)")
    return (f"epoch {ans} ends at offset {end} (the answer names its epoch: KIP-279, "
            "Kafka 2.0.0)")


def _kept_text(f: Any, bec: Item, hw: int, risk: dict[int, dict[str, Any]],
               trs: list[Item], asked: list[Item], until: int | None) -> str:
    node, leader = bec.node, bec.get("leader")
    named = [value_name(a.get("value"), f) for _, a in sorted(risk.items())]
    vals = ", ".join(named[:MAX_VALUES]) + (f", … ({len(named):,} records)"
                                           if len(named) > MAX_VALUES else "")
    where = (f"offset {min(risk)}" if len(risk) == 1 else offsets_phrase(sorted(risk)))
    text = (f"{node} follows {leader} (epoch {bec.get('leader_epoch')}) holding {vals} at "
            f"{where}, above its HW {hw}. It does not truncate to its HW, as 0.10's rule hw "
            "would (ReplicaManager.makeFollowers)")
    rules = [rule_of(tr) for tr in trs if rule_of(tr) in ASKS]
    how = ASKS.get(rules[0] if rules else ("offsets_for_leader_epoch" if asked
                                           else _truncation(f.data.meta.get("protocol"))),
                   "a follower truncates only to what its leader answers (KIP-101)")
    text += f": {how}."
    if asked:
        text += f" {leader} answers: {_answer(asked[0])}."
    for tr in trs:
        text += (f" It truncates to offset {tr.get('to')} (rule: {rule_of(tr) or '?'}), "
                 "removing nothing it acknowledged.")
    if not asked and not trs:
        text += (" No Fetch answer names a diverging epoch" if how == ASKS["diverging_epoch"]
                 else f" No answer from {leader} comes")
        text += (" before its next role change" if until is not None else " in this run")
        text += ", so it truncates nothing."
    return text + f" It keeps {vals}."


def _epoch_line(b: _Builder, x: Item, part: str) -> Line:
    """An OffsetsForLeaderEpoch answer and what the follower did with it."""
    f = b.f
    ln = b.line(f"epoch:{x.id}", "epoch", x, node=x.node, part=part)
    bec = f.became_before(x.node, part, time_ns(x.time))
    leader = bec.get("leader") if bec is not None else None
    leo = bec.get("leo") if bec is not None else None
    end = x.get("end_offset")
    ln.said = (f"{x.node} asks {leader or 'its leader'} where its epoch {x.get('requested')} "
               f"ends (OffsetsForLeaderEpoch); the answer: {_answer(x)}.")
    if isinstance(end, int) and isinstance(leo, int):
        if end >= leo:
            ln.said += f" Its log ends at {leo}: it truncates nothing."
        else:
            rec = f.removed_at(next((tr for tr in f.truncs.get(part, {}).get(x.node, [])
                                     if time_ns(tr.time) >= time_ns(x.time)), x), end)
            ln.said += (f" It truncates {offsets_phrase(range(end, leo))}"
                        + (f" ({rec_text(rec, f)} …)" if rec else "") + ".")
    return ln
