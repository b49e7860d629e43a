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

import itertools
from typing import Any

from reports.story.facts import Item, int_or, rule_of, run_features, time_ns
from reports.story.lines import Cause, Line, Step, StoryLines
from reports.story.words import MAX_VALUES, rec_text, value_name
from reports.units import offsets_phrase, runs_text

# How a follower's truncation is decided, by its Kafka release and KIP.
ASKS = {
    "offsets_for_leader_epoch": "from Kafka 0.11.0 a follower truncates only to the end "
                                "offset the leader answers to OffsetsForLeaderEpoch (KIP-101)",
    "diverging_epoch": "from Kafka 2.8.0 a follower truncates only where the leader's Fetch "
                       "answer names a diverging epoch (KAFKA-10554)",
}
_NO_EPOCH = -1  # 0.11–1.1 answers carry no epoch (KIP-101); from 2.0 they do (KIP-279)


def kept_causes(b: StoryLines) -> list[Cause]:
    """The "kept" causes: the at-risk acknowledged records their replicas all kept,
    one cause per run of offsets that were kept the same way (the same steps).

    Worked out over runs of offsets, not offset by offset: a long valid run holds
    hundreds of thousands of records at risk, and the check hands the report their
    runs only (RunFacts.at_risk), with the sends at the runs' ends."""
    f = b.f
    # part -> (a, b, the became-follower's time, its steps) for each run at risk
    spans: dict[str, list[tuple[int, int, int, list[Step]]]] = {}
    exchanges_of: dict[str, dict[str, list[Item]]] = {}
    texts: list[tuple[Line, tuple[Any, ...]]] = []  # each kept line, _kept_text's arguments
    for part, by_node in sorted(f.became.items()):
        exchanges = exchanges_of[part] = _exchanges(f.items.values(), part)
        for node, becs in sorted(by_node.items()):
            for i, bec in enumerate(becs):
                if bec.type != "became-follower" or (
                        i and becs[i - 1].get("leader_epoch") == bec.get("leader_epoch")):
                    continue  # at risk only on following a new leader epoch
                risk = f.at_risk(part, bec)
                if not risk:
                    continue
                t, hw = time_ns(bec.time), int_or(bec.get("hw"), 0)
                until = time_ns(becs[i + 1].time) if i + 1 < len(becs) else None
                trs = [tr for tr in f.truncs.get(part, {}).get(node, [])
                       if t <= time_ns(tr.time) and (until is None or time_ns(tr.time) < until)]
                if any(f.removes_any(tr, risk) for tr in trs):
                    continue  # not kept: the story of a loss, if it became one
                asked = [x for x in exchanges.get(node, [])
                         if t <= time_ns(x.time) and (until is None or time_ns(x.time) < until)]
                shown = _first_values(f, part, risk, t)
                count = sum(hi - lo for lo, hi in risk)
                ln = b.line(f"kept:{bec.id}", "kept", bec, node=node, part=part)
                texts.append((ln, (f, bec, hw, risk, shown, count, trs, asked, until)))
                # shared by the records kept here; each cause adds its own ack
                steps = [Step(ln, f"{node} keeps it ({_rule(trs, asked)})")]
                for x in asked:
                    steps.append(Step(_epoch_line(b, x, part), f"{node} asks the leader"))
                for el in f.elections.get(part, []):
                    if el.leader == node and el.time > t and el.leo is not None \
                            and el.leo >= risk[-1][1]:
                        el_ln = b.election_line(el)
                        for lo, hi in risk:
                            for o in range(lo, hi):
                                el_ln.still.setdefault(o, None)
                        el_ln.still.update(shown)  # the values its text names
                        steps.append(Step(el_ln, f"{node} elected still holding it "
                                                 f"(epoch {el.epoch})"))
                        break
                spans.setdefault(part, []).extend((lo, hi, t, steps) for lo, hi in risk)
    # The first kept line tells the rule against 0.10's; the gist above the story
    # names it too, so the later lines name it briefly (a 600 s chaos run has dozens).
    texts.sort(key=lambda t: time_ns(t[1][1].time))
    for i, (ln, args) in enumerate(texts):
        ln.said = _kept_text(*args, brief=i > 0)
    # Each OffsetsForLeaderEpoch answer once: (answer, the asker's LEO, its end offset).
    answers = {part: [(x, int_or(bec.get("leo") if bec else None, 0), x.get("end_offset"))
                      for node, xs in ex.items() for x in xs
                      for bec in [f.became_before(node, part, time_ns(x.time))]]
               for part, ex in exchanges_of.items()}
    causes = []
    for part, runs in spans.items():
        # Replicas holding it that asked the leader and kept it: offsets below both
        # the asker's LEO and the answer's end offset.
        told = [(x, min(leo, end)) for x, leo, end in answers.get(part, [])
                if isinstance(end, int)]
        cuts = sorted({o for lo, hi, _, _ in runs for o in (lo, hi)}
                      | {below for _, below in told})
        for lo, hi in itertools.pairwise(cuts):
            covering = [(t, steps) for a, z, t, steps in runs if a <= lo and hi <= z]
            if not covering:
                continue
            have: set[int] = set()
            chain: list[Step] = []
            for _, steps in covering:
                # by identity: comparing Steps compares their lines, field by field
                chain += [s for s in steps if id(s) not in have]
                have.update(id(s) for s in steps)
            for x, below in told:
                if below >= hi:
                    ln = _epoch_line(b, x, part)
                    if all(s.line is not ln for s in chain):
                        chain.append(Step(ln, f"{x.node} asks the leader and keeps it"))
            a = f.acked_before(part, lo, covering[0][0])
            value = a.get("value") if a is not None else None
            causes.append(Cause("kept", part, f"{value_name(value, f)}, acknowledged at {part} "
                                f"offset {lo}, kept", list(range(lo, hi)),
                                (_ack(b, a, part, lo) if a is not None else []) + chain))
    return causes


def gist(causes: list[Cause], protocol: Any) -> str | None:
    """What happened to a valid run's records at risk, in one sentence above its
    story: how many, how many times a follower held some as it followed a new
    leader, and the rule that kept them (a long run's story is many such lines)."""
    kept = [c for c in causes if c.kind == "kept"]
    if not kept:
        return None
    records = sum(len(c.offsets) for c in kept)
    times = len({s.line.key for c in kept for s in c.steps if s.line.kind == "kept"})
    rule = ASKS.get(_truncation(protocol))
    return (f"{records:,} acknowledged {'record was' if records == 1 else 'records were'} "
            f"at risk: a follower held {'it' if records == 1 else 'them'} above its HW as it "
            f"followed a new leader ({times:,} {'time' if times == 1 else 'times'}), and "
            f"{'it was' if records == 1 else 'every one was'} kept"
            + (f" -- {rule}." if rule else "."))


def _first_values(f: Any, part: str, risk: list[tuple[int, int]], t: int) -> dict[int, Any]:
    """offset -> value of the first MAX_VALUES records at risk (the ones a line names)."""
    out: dict[int, Any] = {}
    for lo, hi in risk:
        for o in range(lo, min(hi, lo + MAX_VALUES - len(out))):
            a = f.acked_before(part, o, t)
            out[o] = a.get("value") if a is not None else None
        if len(out) >= MAX_VALUES:
            break
    return out


def _ack(b: StoryLines, op: dict[str, Any], part: str, offset: int) -> list[Step]:
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


def _kept_text(f: Any, bec: Item, hw: int, risk: list[tuple[int, int]], shown: dict[int, Any],
               count: int, trs: list[Item], asked: list[Item], until: int | None,
               brief: bool = False) -> str:
    """A kept line's words; ``brief``: where its rule is the one the story's gist
    names, name it by its KIP or JIRA only."""
    node, leader = bec.node, bec.get("leader")
    named = [value_name(v, f) for _, v in sorted(shown.items())]
    vals = ", ".join(named) + (f", … ({count:,} records)" if count > MAX_VALUES else "")
    where = f"offset {risk[0][0]}" if count == 1 else f"offsets {runs_text(risk)}"
    text = (f"{node} follows {leader} (epoch {bec.get('leader_epoch')}) holding {vals} at "
            f"{where}, above its HW {hw}. It does not truncate to its HW")
    rules = [rule_of(tr) for tr in trs if rule_of(tr) in ASKS]
    protocol_rule = ASKS.get(_truncation(f.data.meta.get("protocol")))
    how = ASKS.get(rules[0] if rules else ("offsets_for_leader_epoch" if asked
                                           else _truncation(f.data.meta.get("protocol"))),
                   "a follower truncates only to what its leader answers (KIP-101)")
    if brief and how == protocol_rule:
        text += f" ({how[how.rindex('(') + 1:-1]}, as above)."
    else:
        text += f", as 0.10's rule hw would (ReplicaManager.makeFollowers): {how}."
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
    return text + (f" It keeps {'it' if count == 1 else 'them'}." if brief
                   else f" It keeps {vals}.")


def _epoch_line(b: StoryLines, x: Item, part: str) -> Line:
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
