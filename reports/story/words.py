"""The story's words: each line's English sentence, and the names of the truncation
rules, faults and values it uses. Only phrasing: what a line says was gathered by
the builder (reports.story.builder) from the run's facts (reports.story.facts).
"""

from __future__ import annotations

from typing import Any

from contract import STORY_VALUES
from reports.story.facts import Election, Item, RunFacts, int_or, rule_of, time_ns
from reports.story.lines import Line
from reports.units import fmt_time, offsets_phrase, plural

# A truncate event's `rule` (broker.partition.TRUNCATION_RULES) in words: the
# story names the rule, and explains each rule it names once, under it.
RULES: dict[str, str] = {
    "hw": "the follower truncates to its own HW (after a restart, its HW checkpoint) "
          "without asking the leader: 0.10's only rule, later the fallback when there is "
          "no leader epoch to ask about",
    "offsets_for_leader_epoch": "the follower truncates to the end offset the leader "
                                "answers for its latest leader epoch (OffsetsForLeaderEpoch, "
                                "KIP-101; from 2.0 it asks again about older epochs until "
                                "both agree, KIP-279)",
    "diverging_epoch": "the follower truncates to where the epoch the leader named as "
                       "diverging in its Fetch answer ends (KAFKA-10554)",
    "offset_out_of_range": "the follower truncates to the leader's LEO after an "
                           "OFFSET_OUT_OF_RANGE Fetch answer",
}
FAULT_WORDS = {"down": "down", "paused": "paused", "partitioned": "cut off by a partition"}
FAULT_VERBS = {"kill": "killed", "stop": "stopped (controlled shutdown)",
               "power-cycle": "power-cycled", "pause": "paused", "partition": "partitioned"}
MAX_VALUES = STORY_VALUES  # values named in one line


def value_name(v: Any, facts: RunFacts) -> str:
    """ "value 1 (m1)": a value and the label run.json gives it, if any."""
    lab = facts.labels.get(v)
    return f"value {v} ({lab})" if lab else f"value {v}"


def rec_text(rec: tuple[Any, Any] | None, facts: RunFacts) -> str:
    """ "value 1 (m1, epoch 0)" """
    if rec is None:
        return "a record"
    epoch, value = rec
    lab = facts.labels.get(value)
    inner = ", ".join(x for x in (lab, f"epoch {epoch}" if epoch is not None else None) if x)
    return f"value {value}" + (f" ({inner})" if inner else "")



def _more(n: int) -> str:
    """ "; … 194 more" after the first MAX_VALUES of n offsets (a chaos run's loss)."""
    return f"; … {n - MAX_VALUES} more" if n > MAX_VALUES else ""


def _values(d: dict[int, Any], f: RunFacts) -> str:
    offs = sorted(d)
    vals = [d[o] for o in offs]
    if len(vals) == 1:
        return f"{value_name(vals[0], f)} at offset {offs[0]}"
    shown = ", ".join(map(str, vals[:MAX_VALUES])) + (", …" if len(vals) > MAX_VALUES else "")
    return f"values {shown} at {offsets_phrase(offs)}"


def _target(tr: Item, rule: str | None, f: RunFacts, part: str) -> str:
    to = tr.get("to")
    if rule == "hw":
        return (f"its HW checkpoint {to}" if f.hw_from_checkpoint(tr, part)
                else f"its HW {to}")
    return {
        "offsets_for_leader_epoch": f"offset {to}, the end offset the leader answered to "
                                    "OffsetsForLeaderEpoch",
        "diverging_epoch": f"offset {to}, where the diverging epoch the leader named ends",
        "offset_out_of_range": f"offset {to}, the leader's LEO (OFFSET_OUT_OF_RANGE)",
    }.get(rule or "", f"offset {to}")


def _truncate_text(ln: Line, it: Item, f: RunFacts) -> str:
    part = ln.part or ""
    frm, to = int_or(it.get("from"), 0), int_or(it.get("to"), 0)
    rule = rule_of(it)
    bec = f.became_before(it.node, part, time_ns(it.time))
    leader = bec.get("leader") if bec is not None and bec.type == "became-follower" else None
    st = f.start_before(it.node, time_ns(it.time))
    restarted = bec is not None and st is not None and not any(
        time_ns(st.time) <= time_ns(b.time) < time_ns(bec.time)
        for b in f.became.get(part, {}).get(it.node, []))
    text = it.node + (" restarts and" if restarted else "")
    text += f" follows {leader} (epoch {it.get('leader_epoch')})" if leader else ""
    text += f"; it truncates to {_target(it, rule, f, part)} (rule: {rule or '?'})"
    if frm <= to:
        text += ", removing nothing"
    else:
        known = {o: r for o, r in ln.removed.items() if r is not None}
        listed = [r for r in it.get("removed") or [] if isinstance(r, list) and len(r) == 3]
        for r in listed:
            known.setdefault(r[0], (r[1], r[2]))
        text += f", removing {offsets_phrase(range(to, frm))}"
        if known:
            shown = sorted(known.items())[:MAX_VALUES]
            if frm - to == 1:
                text += f" = {rec_text(shown[0][1], f)}"
            else:
                text += ": " + ", ".join(f"{o} = {rec_text(r, f)}" for o, r in shown)
                if frm - to > len(shown):
                    text += f", … {frm - to - len(shown)} more"
    if ln.last_copy:
        vals = [value_name(v, f) for _, v in sorted(ln.last_copy.items())[:MAX_VALUES]]
        text += f" — the last copy of {', '.join(vals)}"
    if ln.kept:
        keeps = []
        for o, (own, other_node, other) in sorted(ln.kept.items())[:MAX_VALUES]:
            k = f"{rec_text(own, f)} at offset {o}"
            if other_node and other is not None and other[1] is not None:
                k += f", where {other_node} holds {rec_text(other, f)}"
            keeps.append(k)
        text += f". It keeps {'; '.join(keeps)}"
    return text + "."


def _halt_text(it: Item, f: RunFacts, part: str) -> str:
    """Why a broker died by itself: the rule that stopped it, in Kafka's words."""
    node = it.node
    if it.get("reason") != "offset-out-of-range":
        return f"{node} halts ({it.get('reason') or 'no reason given'}) and exits."
    bec = f.became_before(node, part, time_ns(it.time))
    leader = bec.get("leader") if bec is not None and bec.type == "became-follower" else None
    return (f"{node} halts: its leader{f' {leader}' if leader else ''} answers a fetch with "
            f"OFFSET_OUT_OF_RANGE, its LEO {it.get('leader_leo')} below {node}'s own "
            f"LEO {it.get('leo')}, and with unclean leader election off Kafka stops the broker "
            "rather than truncate records away (ReplicaFetcherThread.handleOffsetOutOfRange, "
            f"0.10–2.0). {node} shuts down and stays down until it is started again.")


def _election_text(ln: Line, el: Election, f: RunFacts) -> str:
    via = el.item.get("via")
    how = (f"unclean: ISR and ELR were empty and {el.leader} was the partition's last known "
           "leader, elected on its return even after an unclean restart: KIP-966's "
           "balanced recovery" if via == "last-known-leader"
           else f"unclean: {el.leader} was not in the ISR" if el.unclean
           else f"from the ELR (KIP-966): ISR empty, {el.leader} stayed eligible"
           if via == "elr"
           else f"clean, ISR {','.join(el.isr)}" if el.isr else "clean")
    why = ""
    tr = el.trigger
    if tr is not None and tr.type == "broker-dead":
        reason = str(tr.get("reason") or "")
        why = (f" after {tr.get('broker')}'s "
               + {"session-timeout": "session timed out",
                  "controlled-shutdown": "controlled shutdown"}.get(reason, reason or "death"))
    elif tr is not None:
        why = f" when {tr.get('broker')} registered"
        if el.offline_since is not None:
            why += f" (the partition had no leader since {fmt_time(el.offline_since)})"
    text = f"The controller elects {el.leader} leader of epoch {el.epoch} ({how}){why}."
    if ln.lacks:
        leo = el.leo
        text += (f" {el.leader}'s log ends at offset {leo}: it lacks "
                 f"{_values(ln.lacks, f)}." if leo is not None else
                 f" It lacks {_values(ln.lacks, f)}.")
    if ln.holds:
        text += " It holds " + " and ".join(f"{rec_text(r, f)} at offset {o}"
                                            for o, r in sorted(ln.holds.items())[:MAX_VALUES])
        text += f", not the acknowledged {', '.join(str(v) for v in _lost_at(ln, f))}."
    if ln.still:
        text += f" It still holds {_values(ln.still, f)}."
    return text


def _lost_at(ln: Line, f: RunFacts) -> list[Any]:
    """The lost values at the offsets where an election's leader held another record."""
    out = [value_name(v, f) for o in sorted(ln.holds) for v in f.lost_values_at(ln.part, o)]
    return out or ["record"]


def line_text(ln: Line, f: RunFacts) -> str:
    """A story line's sentence, once every anomaly has added its part to the line."""
    it = ln.item
    if ln.said:  # composed where the line was made (kept, epoch, resends)
        return ln.said
    if ln.kind == "ack":
        if ln.node in (None, "None"):
            lead = "The leader"
        else:
            lead = f"{ln.node} (leader" + (f", epoch {ln.epoch})" if ln.epoch is not None
                                           else ")")
        tail = f"acks={ln.acks}" + (f", ISR {','.join(ln.isr)}" if ln.isr else "")
        over = "; ".join(w for _, w in sorted(ln.over.items()))
        return (f"{lead} acknowledges {_values(ln.values, f)} ({tail})"
                + (f", {over}" if over else "") + ".")
    if ln.kind == "fault":
        w = ln.window
        verb = FAULT_VERBS.get(w.fault, w.fault) if w else "down"
        until = f" until {fmt_time(w.end)}" if w and w.end is not None else ""
        return (f"{ln.node} is {verb}{until}: it is not there when {_values(ln.missed, f)} "
                "is written, so it never gets it.")
    if ln.kind == "power-cycle":
        fl = f.last_flush(ln.node or "", ln.part or "", time_ns(it.time) if it else 0)
        since = (f"its last fsync, at {fmt_time(fl.time)}, covered LEO {fl.get('leo')}"
                 if fl is not None else "it had fsynced no record")
        said = {ln.had.get(o) for o in ln.gone}
        one = len(ln.gone) > 1 and len(said) == 1  # the same evidence for every offset
        gone = "; ".join(f"offset {o}" + (f" = {value_name(v, f)}" if v is not None else "")
                         + (f" — {ln.had[o]}" if o in ln.had and not one else "")
                         for o, v in sorted(ln.gone.items())[:MAX_VALUES])
        gone += _more(len(ln.gone))
        if one and said != {None}:
            gone += f" — {next(iter(said))}"
        back = (f"restarts at {fmt_time(ln.restart[0].time)} with LEO {ln.restart[1]}"
                if ln.restart else "restarts")
        return (f"Power-cycle of {ln.node}: killed, and every byte not fsynced is dropped. "
                f"{ln.node} {back} ({since}), without {gone}.")
    if ln.kind == "resend" and it is not None:
        at: dict[Any, list[int]] = {}
        for o, v in sorted(ln.values.items()):
            at.setdefault(v, []).append(o)
        held = "; ".join(f"{value_name(v, f)} at {offsets_phrase(offs)}"
                         for v, offs in at.items())
        return (f"The network hands {ln.node} a produce request from {it.get('peer')} a "
                "second time (a resend whose first attempt went through), and it appends "
                f"the records again: {ln.part} holds {held}. No idempotent producer "
                "(KIP-98) tells the copy apart.")
    if ln.kind == "halt" and it is not None:
        return _halt_text(it, f, ln.part or "")
    if ln.kind == "truncate" and it is not None:
        return _truncate_text(ln, it, f)
    if ln.kind == "election" and it is not None:
        el = next((e for els in f.elections.values() for e in els if e.item is it), None)
        return _election_text(ln, el, f) if el else f"{ln.node} is elected leader."
    if ln.kind == "final" and it is not None:
        recs = it.get("records") or []
        by_off = {r[0]: r[1] for r in recs if isinstance(r, list) and len(r) == 2}
        end = max(by_off, default=-1) + 1
        count = len(by_off)
        if it.records_seen is not None:  # the check cut its records: the whole read's
            _, count, end = it.records_seen
        parts = []
        for o, v in sorted(ln.finals.items())[:MAX_VALUES]:
            if o in by_off:
                parts.append(f"offset {o} holds {value_name(by_off[o], f)}, not "
                             f"{value_name(v, f)}")
            else:
                parts.append(f"{value_name(v, f)} at offset {o} is not in it: the log ends "
                             f"at offset {end}")
        parts += [f"{value_name(v, f)} is at {offsets_phrase(offs)}"
                  for v, offs in sorted(ln.twice.items(), key=lambda x: x[1])]
        if len(ln.finals) > MAX_VALUES:
            parts[MAX_VALUES - 1] += _more(len(ln.finals))
        return (f"Final read of {ln.part}: {plural(count, 'record')}"
                + (f" ({offsets_phrase(range(end))})" if end else "")
                + "; " + "; ".join(parts) + ".")
    return ln.kind

