"""The story's builder: from the run's facts, the causal story of each anomaly.

For a lost write of value v acknowledged at offset o, the story follows offset o
through the elections after the acknowledgement: which leader came in without v
at o (and why: a truncation and its rule, a power cycle, or it was down when v
was written), what it wrote there instead, which replicas then removed or kept
their copy. For a divergence at offset o, it finds the election of the newer
record's epoch, why that leader lacked the older record, and which truncation
kept the older one on the other replica. A duplicate is told by the produce
request the network handed its leader twice, or by the producer's resend
(reports.story.resends). Facts shared by several anomalies
are one line, told once.
"""

from __future__ import annotations

from typing import Any

from contract import witness_part
from reports.rundata import RunData
from reports.story.facts import Election, Item, RunFacts, int_or, rule_of, time_ns
from reports.story.kept import gist, kept_causes
from reports.story.lines import Cause, Line, Step, Story, StoryLines
from reports.story.resends import client_resend, recognised_causes
from reports.story.words import FAULT_WORDS, RULES, line_text, rec_text, value_name
from reports.units import fmt_time, offsets_phrase


class _Builder(StoryLines):
    """The causes of each anomaly, as lines and steps (the builder's own causes;
    kept and resends add theirs through the same lines)."""

    # -- shared causes -------------------------------------------------------------

    def why_lacked(self, el: Election, offset: int, t_written: int | None,
                   steps: list[Step], value: Any) -> None:
        """Why the new leader's log ended at or below `offset` when it was elected:
        the last truncation or power cycle that took the offset away, else the fault
        that kept it away while the record was written."""
        f, node, part = self.f, el.leader, el.part
        took_trs, took_pcs = f.offset_losses(node, part, offset, before=el.time)
        trs = [(time_ns(tr.time), "truncate", tr) for tr in took_trs]
        pcs = [(time_ns(loss[0].time), "power-cycle", loss) for loss in took_pcs]
        if t_written is not None:
            # Only what happened after the record was written can have removed it.
            trs = [x for x in trs if x[0] >= t_written]
            pcs = [x for x in pcs if x[0] >= t_written]
        cands = sorted(trs + pcs, key=lambda x: x[0])
        if cands:
            _, kind, what = cands[-1]
            if kind == "truncate":
                ln = self.truncate_line(what, part)
                ln.removed.setdefault(offset, f.removed_at(what, offset))
                self.halted(what, part, steps)
                steps.append(Step(ln, f"{node} truncates it (rule {rule_of(what) or '?'})"))
            else:
                pc, st, leo = what
                ln = self.line(f"pc:{pc.id}:{node}:{part}", "power-cycle", pc, node=node,
                               part=part)
                ln.gone[offset] = value
                ln.restart = (st, leo)
                evidence = self.had_it(node, part, offset, t_written, time_ns(pc.time))
                if evidence:
                    ln.had[offset] = evidence
                steps.append(Step(ln, f"power-cycle of {node} drops it"))
            return
        if t_written is not None:
            self.absent(node, part, offset, t_written, value, steps)

    def absent(self, node: str, part: str, offset: int, t_written: int, value: Any,
               steps: list[Step]) -> None:
        """The fault that kept `node` away while the record at `offset` was written."""
        w = self.f.window_at(node, t_written)
        if w is not None:
            ln = self.line(f"fault:{w.node}:{w.start}", "fault", w.item, time=w.start,
                           node=node, part=part)
            ln.missed[offset] = value
            ln.window = w
            steps.append(Step(ln, f"{node} {FAULT_WORDS.get(w.kind, w.kind)} when it was "
                                  "written"))

    def had_it(self, node: str, part: str, offset: int, t_written: int | None,
               before: int) -> str:
        """Evidence that `node` held `offset` before a power cycle."""
        f = self.f
        leos = [it for it in f.flushes.get(part, {}).get(node, [])
                + f.became.get(part, {}).get(node, [])
                if time_ns(it.time) < before and int_or(it.get("leo"), -1) > offset]
        if leos:
            it = max(leos, key=lambda x: time_ns(x.time))
            return f"{node} held it (its LEO was {it.get('leo')} at {fmt_time(it.time)})"
        if t_written is None:
            return ""
        isr = f.isr_at(part, t_written)
        for o in f.acks.get(part, {}).get(offset, []):
            if time_ns(o.get("time")) == t_written and str(o.get("acks")) in ("all", "-1") \
                    and isr and node in isr:
                return (f"{node} held it: it was acknowledged with acks=all while {node} "
                        "was in the ISR")
        return ""

    def truncate_line(self, tr: Item, part: str) -> Line:
        return self.line(f"tr:{tr.id}", "truncate", tr, node=tr.node, part=part)

    def halted(self, tr: Item, part: str, steps: list[Step]) -> None:
        """Before a truncation on a broker's restart: the halt that stopped it, if
        one did (why the broker died and had to be started again)."""
        h = self.f.halt_before_restart(tr.node, time_ns(tr.time))
        if h is not None:
            ln = self.line(f"halt:{h.id}", "halt", h, node=tr.node, part=part)
            steps.append(Step(ln, f"{tr.node} halts ({h.get('reason') or 'halt'})"))

    def write_line(self, el: Election, offset: int, over: str) -> Line | None:
        """The new leader's acknowledged write at `offset` (what took its place)."""
        later = [e.time for e in self.f.elections.get(el.part, []) if e.time > el.time]
        o = self.f.ack_at(el.part, offset, el.leader, el.time, min(later) if later else None)
        if o is None:
            return None
        ln = self.ack_line(o, el.part)
        if ln is not None:
            ln.over.setdefault(offset, over)
        return ln

    def kept_by(self, node: str, part: str, offset: int, after: int,
                kept: tuple[Any, str | None, Any], steps: list[Step]) -> None:
        """The node's last truncation after `after` that left `offset` in place."""
        f = self.f
        trs = [tr for tr in f.truncs.get(part, {}).get(node, [])
               if time_ns(tr.time) > after and int_or(tr.get("to"), -1) > offset]
        if trs:
            ln = self.truncate_line(trs[-1], part)
            ln.kept.setdefault(offset, kept)
            self.halted(trs[-1], part, steps)
            steps.append(Step(ln, f"{node}'s truncation (rule {rule_of(trs[-1]) or '?'}) "
                                  "keeps its record"))

    # -- lost-write ------------------------------------------------------------------

    def lost_write(self, a: dict[str, Any]) -> Cause | None:
        f = self.f
        w, part = witness_part(a)
        v, offset = w.get("value"), w.get("acked_offset")
        if not isinstance(offset, int):
            return None
        op = f.ops.get((w.get("op") or {}).get("index"))
        steps: list[Step] = []
        t_ack = time_ns(op.get("time")) if op else 0
        if op is not None:
            ln = self.ack_line(op, part)
            if ln is not None:
                who = "the leader" if ln.node in (None, "None") else ln.node
                steps.append(Step(ln, f"{who} acknowledges it", own_ack=True))
        els = [e for e in f.elections.get(part, []) if e.time > t_ack]
        status = [(e, f.at_election(e, offset)) for e in els]

        def lacks(st: tuple[str, Any]) -> bool:
            return st[0] == "none" or (st[0] == "record" and st[1] is not None
                                       and st[1][1] != v)

        # The last run of elections whose leader lacked it (the one that sealed the
        # loss starts it), and the first election that lacked it (where it began).
        k = len(status)
        while k > 0 and lacks(status[k - 1][1]):
            k -= 1
        origin = next((i for i, (_, st) in enumerate(status) if lacks(st)), None)
        shown: list[int] = []
        if origin is not None:
            shown.append(origin)
            if k < len(status) and k != origin:
                between = [i for i in range(origin + 1, k) if status[i][1][0] == "record"]
                shown += between[:2] + [k]
        holders = [h for h in w.get("held_by") or [] if isinstance(h, dict)
                   and h.get("offset") == offset]
        for i in shown:
            el, st = status[i]
            ln = self.election_line(el)
            if st[0] == "none":
                self.why_lacked(el, offset, t_ack if op else None, steps, v)
                ln.lacks[offset] = v
                steps.append(Step(ln, f"{el.leader} elected without it (epoch {el.epoch})"))
                names = [str(h.get("broker")) for h in holders]
                wl = self.write_line(el, offset, (
                    f"where {', '.join(names)} still {'hold' if len(names) > 1 else 'holds'} "
                    f"{value_name(v, f)}") if names
                    else f"where {value_name(v, f)} was acknowledged")
                if wl is not None:
                    steps.append(Step(wl, f"{el.leader} writes "
                                          f"{value_name(wl.values.get(offset), f)} there"))
            elif lacks(st):
                if op is not None:
                    self.absent(el.leader, part, offset, t_ack, v, steps)
                ln.holds[offset] = st[1]
                steps.append(Step(ln, f"{el.leader} elected holding another record there "
                                      f"(epoch {el.epoch})"))
            else:
                ln.still[offset] = v
                steps.append(Step(ln, f"{el.leader} elected still holding it "
                                      f"(epoch {el.epoch})"))
        # Replicas that removed their copy once a leader without it had come in.
        after = status[k][0].time if k < len(status) else (
            status[origin][0].time if origin is not None else t_ack)
        removers = [tr for node, trs in sorted(f.truncs.get(part, {}).items()) for tr in trs
                    if time_ns(tr.time) > after and f.removes(tr, offset)
                    and (f.removed_at(tr, offset) or (None, v))[1] == v]
        for tr in removers:
            ln = self.truncate_line(tr, part)
            ln.removed.setdefault(offset, f.removed_at(tr, offset))
            self.halted(tr, part, steps)
            steps.append(Step(ln, f"{tr.node} truncates it (rule {rule_of(tr) or '?'})"))
        if not holders and removers:
            last = max(removers, key=lambda tr: time_ns(tr.time))
            if f.removed_at(last, offset) is not None:
                self.truncate_line(last, part).last_copy[offset] = v
        fin = f.final.get(part)
        at = w.get("final_at_offset") if isinstance(w.get("final_at_offset"), dict) else None
        for h in holders:
            self.kept_by(str(h.get("broker")), part, offset, after, (
                (h.get("epoch"), v), str(fin.get("node")) if fin and fin.get("node") else None,
                (at.get("epoch"), at.get("value")) if at else None), steps)
        if fin is not None:
            ln = self.line(f"final:{part}", "final", fin, part=part)
            ln.finals[offset] = v
            steps.append(Step(ln, "final read"))
        title = f"{value_name(v, f)}, acknowledged at {part} offset {offset}, lost"
        return Cause("lost-write", part, title, [offset], steps)

    # -- duplicate ---------------------------------------------------------------------

    def duplicate(self, a: dict[str, Any]) -> Cause | None:
        """A value at two offsets, told by the produce request the network handed its
        leader twice (the sim's `--net-duplicate`), else by the producer's own
        resend (reports.story.resends): the second copy, the acknowledgement, the
        final read."""
        f = self.f
        w, part = witness_part(a)
        v = w.get("value")
        offsets = sorted(x["offset"] for x in w.get("at") or []
                         if isinstance(x, dict) and isinstance(x.get("offset"), int))
        if len(offsets) < 2:
            return None
        oks = [f.ops.get(s.get("index")) for s in w.get("sends") or [] if isinstance(s, dict)]
        oks = [o for o in oks if o is not None and o.get("type") == "ok"]
        resends = f.resends.get(part, {}).get(v, [])
        steps: list[Step] = []
        for it in resends:
            ln = self.line(f"resend:{it.id}", "resend", it, node=it.node, part=part)
            ln.values.update({o: v for o in offsets})
            steps.append(Step(ln, f"{it.node} handles the produce twice"))
        if not resends:
            if not any(o.get("client") for o in oks):
                return None  # isrlab's own producer does not resend: nothing to tell
            steps = client_resend(self, w, part, oks)  # a real client sent it again
        for op in oks:
            ln = self.ack_line(op, part)
            if ln is not None:
                steps.append(Step(ln, "acknowledged once"))
        fin = f.final.get(part)
        if fin is not None:
            ln = self.line(f"final:{part}", "final", fin, part=part)
            ln.twice[v] = offsets
            steps.append(Step(ln, "final read"))
        title = f"{value_name(v, f)} at {part} offsets {', '.join(map(str, offsets))}"
        return Cause("duplicate", part, title, offsets, steps)

    # -- divergence --------------------------------------------------------------------

    def divergence(self, a: dict[str, Any]) -> Cause | None:
        f = self.f
        w, part = witness_part(a)
        reps = [str(r) for r in w.get("replicas") or []]
        if len(reps) != 2:
            return None
        steps: list[Step] = []
        offsets = []
        for entry in w.get("offsets") or []:
            o = entry.get("offset")
            ra, rb = entry.get("a") or {}, entry.get("b") or {}
            if not isinstance(o, int):
                continue
            offsets.append(o)
            ea, eb = ra.get("epoch"), rb.get("epoch")
            if not (isinstance(ea, int) and isinstance(eb, int)) or ea == eb:
                continue
            (new_node, new), (old_node, old) = sorted(
                [(reps[0], ra), (reps[1], rb)], key=lambda x: -x[1]["epoch"])
            el = f.election_of(part, new["epoch"])
            if el is None:
                continue
            st = f.at_election(el, o)
            ln = self.election_line(el)
            if st[0] == "none":
                old_ack = f.ack_at(part, o, None, -1, el.time)
                t_old = (time_ns(old_ack.get("time")) if old_ack is not None
                         and old_ack.get("value") == old.get("value") else None)
                self.why_lacked(el, o, t_old, steps, old.get("value"))
                ln.lacks[o] = old.get("value")
                steps.append(Step(ln, f"{el.leader} elected without it (epoch {el.epoch})"))
                wl = self.write_line(el, o, f"where {old_node} holds "
                                            f"{rec_text((old.get('epoch'), old.get('value')), f)}")
                if wl is not None:
                    steps.append(Step(wl, f"{el.leader} writes "
                                          f"{value_name(new.get('value'), f)} there"))
            else:
                steps.append(Step(ln, f"{el.leader} elected (epoch {el.epoch})"))
            for node, rec, other_node, other in ((old_node, old, new_node, new),
                                                 (new_node, new, old_node, old)):
                if f.data.states.get(node, {}).get(part, {}).get("role") == "leader":
                    continue
                self.kept_by(node, part, o, el.time, (
                    (rec.get("epoch"), rec.get("value")), other_node,
                    (other.get("epoch"), other.get("value"))), steps)
        if not offsets:
            return None
        title = (f"replicas {reps[0]} and {reps[1]} diverge at {part} "
                 f"{offsets_phrase(offsets)}")
        return Cause("divergence", part, title, sorted(set(offsets)), steps)


def build(data: RunData, facts: RunFacts | None = None) -> tuple[Story, RunFacts]:
    f = facts or RunFacts(data)
    b = _Builder(f)
    causes: list[Cause] = []
    uncaused: dict[str, int] = {}
    for a in data.anomalies:
        kind = a.get("kind")
        cause = None
        if kind == "lost-write":
            cause = b.lost_write(a)
        elif kind == "divergence":
            cause = b.divergence(a)
        elif kind == "duplicate":
            cause = b.duplicate(a)
        if cause is None:
            uncaused[str(kind)] = uncaused.get(str(kind), 0) + 1
            continue
        causes.append(cause)
    if not data.anomalies:
        # what kept the records at risk, and the resends recognised as such
        causes = kept_causes(b) + recognised_causes(b)
    lines = sorted(b.lines.values(), key=lambda ln: (time_ns(ln.time), _KIND_ORDER.get(ln.kind, 9)))
    lines = _merge_acks(lines, causes)
    for i, ln in enumerate(lines, 1):
        ln.n = i
        ln.text = line_text(ln, f)
    causes = _group(causes)
    for c in causes:
        for s in c.steps:
            if c.title not in s.line.explains:
                s.line.explains.append(c.title)
    named = sorted({rule_of(ln.item) or "" for ln in lines
                    if ln.kind == "truncate" and ln.item is not None} & set(RULES))
    return Story(lines, causes, [f"{k} ×{n}" for k, n in uncaused.items()],
                 [(r, RULES[r]) for r in named],
                 None if data.anomalies else gist(causes, data.meta.get("protocol"))), f


# a producer's resend comes before the acknowledgement it got at the same time
_KIND_ORDER = {"fault": 0, "resend": 0.5, "ack": 1, "recognised": 2, "power-cycle": 2,
               "halt": 3, "truncate": 3, "kept": 3, "epoch": 3, "election": 4, "final": 6}


def _merge_acks(lines: list[Line], causes: list[Cause]) -> list[Line]:
    """Successive acknowledgements by one leader in one epoch, with nothing between
    them in the story, are one line ("acknowledges values 5, 6, 7 at offsets 2–4")."""
    out: list[Line] = []
    into: dict[str, Line] = {}
    for ln in lines:
        prev = out[-1] if out else None
        if (prev is not None and ln.kind == prev.kind == "ack" and not ln.over
                and not prev.over and (ln.part, ln.node, ln.epoch, str(ln.acks))
                == (prev.part, prev.node, prev.epoch, str(prev.acks))):
            prev.values.update(ln.values)
            into[ln.key] = prev
            continue
        out.append(ln)
    for c in causes:
        for s in c.steps:
            s.line = into.get(s.line.key, s.line)
    return out


def _group(causes: list[Cause]) -> list[Cause]:
    """Lost writes (or kept records) of one partition with the same steps are told
    as one cause."""
    out: list[Cause] = []
    index: dict[tuple[Any, ...], Cause] = {}
    for c in causes:
        seen: set[str] = set()
        steps = []
        for s in sorted(c.steps, key=lambda s: s.line.n):
            if s.line.key not in seen:
                seen.add(s.line.key)
                steps.append(s)
        c.steps = steps
        if c.kind not in ("lost-write", "kept"):
            out.append(c)
            continue
        # Each write has its own acknowledgement: the chain is the rest.
        key = (c.kind, c.part, tuple(s.line.key for s in c.steps if not s.own_ack))
        if key in index:
            into = index[key]
            into.offsets += c.offsets
            have = {s.line.key for s in into.steps}
            into.steps = sorted(into.steps + [s for s in c.steps if s.line.key not in have],
                                key=lambda s: s.line.n)
            continue
        index[key] = c
        out.append(c)
    for c in out:
        if c.kind in ("lost-write", "kept") and len(c.offsets) > 1:
            c.offsets.sort()
            what = ("writes lost" if c.kind == "lost-write"
                    else "acknowledged records kept")
            c.title = (f"{len(c.offsets)} {what} the same way: acknowledged at {c.part} "
                       f"{offsets_phrase(c.offsets)}")
            acks = [s for s in c.steps if s.own_ack]
            if acks:  # one step for all their acknowledgements
                first = acks[0]
                first.label = (f"{len(c.offsets)} "
                               f"{'writes' if c.kind == 'lost-write' else 'records'} "
                               "acknowledged")
                c.steps = [s for s in c.steps if not s.own_ack or s is first]
    return out


