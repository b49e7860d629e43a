"""The causal story at the top of a report: what happened to the data, and why.

Built only from generic facts of the run directory -- events.jsonl (elections,
truncations with their rule and removed records, restarts, flushes), the nemesis
ops of history.jsonl (power cycles, faults), the replicas' final logs and states
and the anomalies' witnesses -- never from what a scenario is known to do.

For a lost write of value v acknowledged at offset o, the story follows offset o
through the elections after the acknowledgement: which leader came in without v
at o (and why: a truncation and its rule, a power cycle, or it was down when v
was written), what it wrote there instead, which replicas then removed or kept
their copy. For a divergence at offset o, it finds the election of the newer
record's epoch, why that leader lacked the older record, and which truncation
kept the older one on the other replica. Each line links to its row in the
report's timeline (`Timeline.items`); facts shared by several anomalies are told
once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from reports.rundata import RunData, pkey
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
# Events written before truncate events carried `rule`: their `reason`.
REASON_RULE = {
    "high-watermark": "hw",
    "leader-epoch": "offsets_for_leader_epoch",
    "leader-epoch-iteration": "offsets_for_leader_epoch",
    "offset-out-of-range": "offset_out_of_range",
}
FAULT_WORDS = {"down": "down", "paused": "paused", "partitioned": "cut off by a partition"}
FAULT_VERBS = {"kill": "killed", "stop": "stopped (controlled shutdown)",
               "power-cycle": "power-cycled", "pause": "paused", "partition": "partitioned"}
MAX_LINES = 40  # story lines shown at once; the rest fold
MAX_VALUES = 6  # values named in one line


# -- the timeline: events, nemesis ops and the client ops the story names ------------


@dataclass
class Item:
    """One row of the report's timeline."""

    id: str  # HTML anchor: ev-<n> (events.jsonl line), op-<index> (history.jsonl)
    time: int | None
    node: str
    type: str
    fields: dict[str, Any]
    source: str  # event | nemesis | client | final
    in_story: bool = False

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)


NOISE = ("unix_ns", "incarnation", "seq", "time", "node", "type")


def _part(fields: dict[str, Any]) -> str | None:
    if "topic" in fields and "partition" in fields:
        return pkey(fields["topic"], fields["partition"])
    return None


@dataclass
class Election:
    item: Item
    part: str
    leader: str
    epoch: int
    isr: list[str]
    unclean: bool
    became: Item | None = None  # the new leader's became-leader event
    # the controller event that led to it: a broker-dead (session timeout,
    # controlled shutdown) or a broker-registered (a replica of an offline partition)
    trigger: Item | None = None
    offline_since: int | None = None  # the partition had no leader from then on

    @property
    def time(self) -> int:
        return self.item.time or 0

    @property
    def leo(self) -> int | None:
        leo = self.became.get("leo") if self.became else None
        return leo if isinstance(leo, int) else None


@dataclass
class Window:
    node: str
    kind: str  # down | paused | partitioned
    fault: str
    start: int
    end: int | None
    item: Item | None = None  # the nemesis op that opened it


class Facts:
    """The run's protocol facts, indexed for the story (and the grid's ghost rows)."""

    def __init__(self, data: RunData) -> None:
        self.data = data
        self.items: dict[str, Item] = {}
        self.ops: dict[int, dict[str, Any]] = {}
        self.elections: dict[str, list[Election]] = {}
        self.truncs: dict[str, dict[str, list[Item]]] = {}
        self.became: dict[str, dict[str, list[Item]]] = {}
        self.hw_moves: dict[str, dict[str, list[Item]]] = {}
        self.flushes: dict[str, dict[str, list[Item]]] = {}
        self.starts: dict[str, list[Item]] = {}
        self.controller: list[Item] = []  # broker-dead, broker-registered
        self.isr_changes: dict[str, list[Item]] = {}
        self.nemesis: list[Item] = []
        self.power_cycles: dict[str, list[Item]] = {}
        self.final: dict[str, Item] = {}
        self.acks: dict[str, dict[int, list[dict[str, Any]]]] = {}
        # part -> value -> the sim's net-duplicated events of a produce carrying it
        self.resends: dict[str, dict[Any, list[Item]]] = {}
        labels = data.meta.get("labels") or {}
        self.labels = {v: lab for lab, vs in labels.items() if isinstance(vs, list) for v in vs}
        self._events(data.events)
        self._history(data.history)
        self.windows = self._windows()

    # -- indexing ----------------------------------------------------------------

    def _events(self, events: list[dict[str, Any]]) -> None:
        order = sorted(range(len(events)), key=lambda i: (_t(events[i].get("time")), i))
        for i in order:
            e = events[i]
            fields = {k: v for k, v in e.items() if k not in NOISE}
            it = Item(f"ev-{i}", _t_or_none(e.get("time")), str(e.get("node")),
                      str(e.get("type")), fields, "event")
            self.items[it.id] = it
            node, typ, part = it.node, it.type, _part(fields)
            if typ == "started":
                self.starts.setdefault(node, []).append(it)
            elif typ in ("broker-dead", "broker-registered"):
                self.controller.append(it)
            elif part is None:
                continue
            elif typ == "leader-elected":
                self.elections.setdefault(part, []).append(Election(
                    it, part, str(it.get("leader")), _int(it.get("leader_epoch",
                                                                 it.get("epoch")), -1),
                    [str(x) for x in it.get("isr") or []], bool(it.get("unclean"))))
            elif typ == "truncate":
                self.truncs.setdefault(part, {}).setdefault(node, []).append(it)
            elif typ in ("became-leader", "became-follower", "became-none"):
                self.became.setdefault(part, {}).setdefault(node, []).append(it)
            elif typ == "hw-advance":
                self.hw_moves.setdefault(part, {}).setdefault(node, []).append(it)
            elif typ == "flush":
                self.flushes.setdefault(part, {}).setdefault(node, []).append(it)
            elif typ == "net-duplicated" and it.get("request") == "produce":
                for v in it.get("values") or []:
                    self.resends.setdefault(part, {}).setdefault(v, []).append(it)
            if node == "controller" and typ in ("leader-elected", "isr-shrink", "isr-expand",
                                                "leader-offline"):
                self.isr_changes.setdefault(part, []).append(it)
        for part, els in self.elections.items():
            for el in els:
                el.became = next(
                    (b for b in self.became.get(part, {}).get(el.leader, [])
                     if b.type == "became-leader" and b.get("leader_epoch") == el.epoch), None)
                self._trigger(el)

    def _trigger(self, el: Election) -> None:
        """The broker-dead or broker-registered event since the partition's previous
        leader change that this election answers (the latest one)."""
        prev = [it for it in self.isr_changes.get(el.part, [])
                if _t(it.time) < el.time and it.type in ("leader-elected", "leader-offline")]
        since = _t(prev[-1].time) if prev else -1
        if prev and prev[-1].type == "leader-offline":
            el.offline_since = prev[-1].time
        cands = [it for it in self.controller
                 if since < _t(it.time) <= el.time and it.type in ("broker-dead",
                                                                 "broker-registered")]
        if prev and prev[-1].type == "leader-offline":
            # it is the partition's comeback: which broker came back
            cands = [it for it in cands if it.type == "broker-registered"] or cands
        else:
            cands = [it for it in cands if it.type == "broker-dead"] or cands
        el.trigger = cands[-1] if cands else None

    def _history(self, history: list[dict[str, Any]]) -> None:
        for o in history:
            idx = o.get("index")
            if not isinstance(idx, int):
                continue
            self.ops[idx] = o
            proc, typ = o.get("process"), o.get("type")
            if typ == "invoke":
                continue
            part = _part(o)
            if proc == "nemesis":
                it = self._op_item(o, "nemesis")
                self.nemesis.append(it)
                if o.get("f") == "power-cycle":
                    for n in _nodes(o.get("value")):
                        self.power_cycles.setdefault(n, []).append(it)
            elif proc == "final" and typ == "ok" and part is not None:
                self.final[part] = self._op_item(o, "final")
            elif o.get("f") == "send" and typ == "ok" and part is not None and isinstance(
                    o.get("offset"), int):
                self.acks.setdefault(part, {}).setdefault(o["offset"], []).append(o)

    def _op_item(self, o: dict[str, Any], source: str) -> Item:
        iid = f"op-{o['index']}"
        if iid not in self.items:
            fields = {k: v for k, v in o.items() if k not in ("index", "time", "process", "f")}
            node = "nemesis" if source == "nemesis" else (
                "final read" if source == "final" else f"client {o.get('process')}")
            typ = str(o.get("f")) if source == "nemesis" else f"{o.get('f')} {o.get('type')}"
            self.items[iid] = Item(iid, _t_or_none(o.get("time")), node, typ, fields, source)
        return self.items[iid]

    def op_item(self, index: Any) -> Item | None:
        o = self.ops.get(index) if isinstance(index, int) else None
        return self._op_item(o, "client") if o is not None else None

    def _windows(self) -> list[Window]:
        out = []
        for w in self.data.meta.get("fault_windows") or []:
            if not isinstance(w, dict) or not isinstance(w.get("start"), int):
                continue
            win = Window(str(w.get("node")), str(w.get("kind")), str(w.get("fault")),
                         w["start"], w.get("end") if isinstance(w.get("end"), int) else None)
            opener = [it for it in self.nemesis if it.type == win.fault
                      and win.node in _nodes(it.get("value"))]
            if opener:
                win.item = min(opener, key=lambda it: abs(_t(it.time) - win.start))
            out.append(win)
        return out

    # -- questions ---------------------------------------------------------------

    def isr_at(self, part: str, t: int) -> list[str] | None:
        isr = None
        for it in self.isr_changes.get(part, []):
            if _t(it.time) > t:
                break
            if isinstance(it.get("isr"), list):
                isr = [str(x) for x in it.get("isr")]
        return isr

    def leader_at(self, part: str, t: int) -> Election | None:
        cur = None
        for el in self.elections.get(part, []):
            if el.time > t:
                break
            cur = el
        return cur

    def start_after(self, node: str, t: int) -> Item | None:
        return next((s for s in self.starts.get(node, []) if _t(s.time) > t), None)

    def start_before(self, node: str, t: int) -> Item | None:
        return next((s for s in reversed(self.starts.get(node, [])) if _t(s.time) <= t), None)

    def started_leo(self, start: Item, part: str) -> tuple[int | None, int | None]:
        for p in start.get("partitions") or []:
            if isinstance(p, dict) and _part(p) == part:
                return _int_or_none(p.get("leo")), _int_or_none(p.get("hw"))
        return None, None

    def removed_at(self, tr: Item, offset: int) -> tuple[int, Any] | None:
        """(epoch, value) a truncate event says it removed at `offset`, if listed."""
        for r in tr.get("removed") or []:
            if isinstance(r, list) and len(r) == 3 and r[0] == offset:
                return r[1], r[2]
        return None

    def removes(self, tr: Item, offset: int) -> bool:
        return _int(tr.get("to"), 0) <= offset < _int(tr.get("from"), 0)

    def log_record(self, node: str, part: str, offset: int) -> tuple[Any, Any] | None:
        for r in self.data.logs.get(node, {}).get(part, []):
            if r.get("offset") == offset:
                return r.get("epoch"), r.get("value")
        return None

    def power_losses(self, node: str, part: str, after: int, before: int | None
                     ) -> list[tuple[Item, Item, int]]:
        """(power-cycle op, the restart after it, LEO it restarted with) in (after, before)."""
        out = []
        for pc in self.power_cycles.get(node, []):
            t = _t(pc.time)
            if t <= after or (before is not None and t >= before):
                continue
            st = self.start_after(node, t)
            if st is None or (before is not None and _t(st.time) >= before):
                continue
            leo, _ = self.started_leo(st, part)
            if leo is not None:
                out.append((pc, st, leo))
        return out

    def record_after(self, node: str, part: str, offset: int, t: int
                     ) -> tuple[str, tuple[Any, Any] | None]:
        """What `node` held at `offset` at time t, knowing it held something there:
        the record its next truncation of that offset removed, else its final log's."""
        trs = [tr for tr in self.truncs.get(part, {}).get(node, [])
               if _t(tr.time) > t and self.removes(tr, offset)]
        pcs = [(pc, st) for pc, st, leo in self.power_losses(node, part, t, None)
               if leo <= offset]
        first_tr = trs[0] if trs else None
        first_pc = pcs[0][0] if pcs else None
        if first_pc is not None and (first_tr is None or _t(first_pc.time) < _t(first_tr.time)):
            return "unknown", None
        if first_tr is not None:
            rec = self.removed_at(first_tr, offset)
            return ("record", rec) if rec else ("unknown", None)
        rec = self.log_record(node, part, offset)
        return ("record", rec) if rec else ("unknown", None)

    def at_election(self, el: Election, offset: int) -> tuple[str, tuple[Any, Any] | None]:
        """("none", None): the new leader's log ended at or below `offset`;
        ("record", (epoch, value)): what it held there; ("unknown", None)."""
        leo = el.leo
        if leo is None:
            return "unknown", None
        if leo <= offset:
            return "none", None
        return self.record_after(el.leader, el.part, offset, _t(el.became.time if el.became
                                                               else el.time))

    def window_at(self, node: str, t: int) -> Window | None:
        for w in self.windows:
            if w.node == node and w.start <= t and (w.end is None or t < w.end):
                return w
        return None

    def hw_from_checkpoint(self, tr: Item, part: str) -> bool:
        """Whether the HW a truncation used is the checkpoint its node restarted with."""
        st = self.start_before(tr.node, _t(tr.time))
        if st is None:
            return False
        _, hw = self.started_leo(st, part)
        if hw is None or hw != tr.get("to"):
            return False
        return not any(_t(st.time) <= _t(h.time) <= _t(tr.time)
                       for h in self.hw_moves.get(part, {}).get(tr.node, []))

    def became_before(self, node: str, part: str, t: int) -> Item | None:
        return next((b for b in reversed(self.became.get(part, {}).get(node, []))
                     if _t(b.time) <= t), None)

    def last_flush(self, node: str, part: str, t: int) -> Item | None:
        return next((f for f in reversed(self.flushes.get(part, {}).get(node, []))
                     if _t(f.time) <= t), None)

    def ack_at(self, part: str, offset: int, node: str | None, after: int,
               before: int | None) -> dict[str, Any] | None:
        for o in self.acks.get(part, {}).get(offset, []):
            t = _t(o.get("time"))
            if t > after and (before is None or t < before) and (node is None
                                                                  or o.get("node") == node):
                return o
        return None

    def value_name(self, v: Any) -> str:
        lab = self.labels.get(v)
        return f"value {v} ({lab})" if lab else f"value {v}"


def _t(t: Any) -> int:
    return int(t) if isinstance(t, int | float) and not isinstance(t, bool) else 0


def _t_or_none(t: Any) -> int | None:
    return int(t) if isinstance(t, int | float) and not isinstance(t, bool) else None


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _nodes(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(x) for x in value]
    if isinstance(value, dict):
        return [str(x) for x in value]
    return []


def rule_of(tr: Item) -> str | None:
    rule = tr.get("rule")
    return rule if isinstance(rule, str) else REASON_RULE.get(str(tr.get("reason")))


def rec_text(rec: tuple[Any, Any] | None, facts: Facts) -> str:
    """ "value 1 (m1, epoch 0)" """
    if rec is None:
        return "a record"
    epoch, value = rec
    lab = facts.labels.get(value)
    inner = ", ".join(x for x in (lab, f"epoch {epoch}" if epoch is not None else None) if x)
    return f"value {value}" + (f" ({inner})" if inner else "")


# -- the story -------------------------------------------------------------------------


@dataclass
class Line:
    """One fact of the story; its text is composed once every anomaly has added to it."""

    key: str
    time: int | None
    kind: str  # ack | fault | truncate | power-cycle | election | final
    item: Item | None
    node: str | None = None
    part: str | None = None
    explains: list[str] = field(default_factory=list)
    n: int = 0
    text: str = ""
    # what anomalies added
    values: dict[int, Any] = field(default_factory=dict)  # ack: offset -> value
    over: dict[int, str] = field(default_factory=dict)  # ack: offset -> what others hold there
    lacks: dict[int, Any] = field(default_factory=dict)  # election: offset -> value it lacks
    holds: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # election: other record
    still: dict[int, Any] = field(default_factory=dict)  # election: value it still holds
    removed: dict[int, tuple[Any, Any] | None] = field(default_factory=dict)  # truncate
    last_copy: dict[int, Any] = field(default_factory=dict)  # truncate: offset -> value
    # truncate: offset -> (its record there, the node holding another, that record)
    kept: dict[int, tuple[Any, str | None, Any]] = field(default_factory=dict)
    gone: dict[int, Any] = field(default_factory=dict)  # power-cycle: offset -> value
    had: dict[int, str] = field(default_factory=dict)  # power-cycle: offset -> evidence
    missed: dict[int, Any] = field(default_factory=dict)  # fault: offset -> value
    finals: dict[int, Any] = field(default_factory=dict)  # final: offset -> lost value
    twice: dict[Any, list[int]] = field(default_factory=dict)  # final: value -> its offsets
    acks: Any = None  # ack: the producer's acks
    epoch: int | None = None  # ack: the acknowledging leader's epoch
    isr: list[str] | None = None  # ack: the ISR when it was acknowledged
    window: Window | None = None  # fault
    restart: tuple[Item, int] | None = None  # power-cycle: the restart and its LEO

    @property
    def ref(self) -> str | None:
        return self.item.id if self.item is not None else None


@dataclass
class Step:
    line: Line
    label: str


@dataclass
class Cause:
    """Why one anomaly (or a group of lost writes with the same causes) happened."""

    kind: str
    part: str
    title: str
    offsets: list[int]
    steps: list[Step]

    @property
    def kinds(self) -> set[str]:
        return {s.line.kind for s in self.steps}

    @property
    def explained(self) -> bool:
        """Whether a protocol step (election, truncation, power cycle, fault) is named."""
        return bool(self.kinds & {"election", "truncate", "power-cycle", "fault", "resend"})


@dataclass
class Story:
    lines: list[Line]
    causes: list[Cause]
    uncaused: list[str]  # anomaly kinds the story does not explain, with counts
    rules: list[tuple[str, str]] = field(default_factory=list)  # the truncation rules named


class _Builder:
    def __init__(self, facts: Facts) -> None:
        self.f = facts
        self.lines: dict[str, Line] = {}

    def line(self, key: str, kind: str, item: Item | None, time: int | None = None,
             node: str | None = None, part: str | None = None) -> Line:
        if key not in self.lines:
            t = time if time is not None else (item.time if item else None)
            self.lines[key] = Line(key, t, kind, item, node, part)
            if item is not None:
                item.in_story = True
        return self.lines[key]

    def ack_line(self, op: dict[str, Any], part: str) -> Line | None:
        """The line of one acknowledged send (shared by the lost write it acknowledged
        and the write that later took its offset)."""
        it = self.f.op_item(op.get("index"))
        if it is None:
            return None
        node = op.get("node")
        ln = self.line(f"ack:{it.id}", "ack", it, node=None if node is None else str(node),
                       part=part)
        if isinstance(op.get("offset"), int):
            ln.values[op["offset"]] = op.get("value")
        t = _t(op.get("time"))
        leader = self.f.leader_at(part, t)
        ln.acks = op.get("acks")
        ln.epoch = leader.epoch if leader is not None and leader.leader == ln.node else None
        ln.isr = self.f.isr_at(part, t)
        return ln

    # -- shared causes -------------------------------------------------------------

    def why_lacked(self, el: Election, offset: int, t_written: int | None,
                   steps: list[Step], value: Any) -> None:
        """Why the new leader's log ended at or below `offset` when it was elected:
        the last truncation or power cycle that took the offset away, else the fault
        that kept it away while the record was written."""
        f, node, part = self.f, el.leader, el.part
        trs = [(_t(tr.time), "truncate", tr) for tr in f.truncs.get(part, {}).get(node, [])
               if _t(tr.time) < el.time and f.removes(tr, offset)]
        pcs = [(_t(pc.time), "power-cycle", (pc, st, leo))
               for pc, st, leo in f.power_losses(node, part, -1, el.time) if leo <= offset]
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
                steps.append(Step(ln, f"{node} truncates it (rule {rule_of(what) or '?'})"))
            else:
                pc, st, leo = what
                ln = self.line(f"pc:{pc.id}:{node}:{part}", "power-cycle", pc, node=node,
                               part=part)
                ln.gone[offset] = value
                ln.restart = (st, leo)
                evidence = self.had_it(node, part, offset, t_written, _t(pc.time))
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
                if _t(it.time) < before and _int(it.get("leo"), -1) > offset]
        if leos:
            it = max(leos, key=lambda x: _t(x.time))
            return f"{node} held it (its LEO was {it.get('leo')} at {fmt_time(it.time)})"
        if t_written is None:
            return ""
        isr = f.isr_at(part, t_written)
        for o in f.acks.get(part, {}).get(offset, []):
            if _t(o.get("time")) == t_written and str(o.get("acks")) in ("all", "-1") \
                    and isr and node in isr:
                return (f"{node} held it: it was acknowledged with acks=all while {node} "
                        "was in the ISR")
        return ""

    def truncate_line(self, tr: Item, part: str) -> Line:
        return self.line(f"tr:{tr.id}", "truncate", tr, node=tr.node, part=part)

    def election_line(self, el: Election) -> Line:
        return self.line(f"el:{el.item.id}", "election", el.item, node=el.leader, part=el.part)

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
               if _t(tr.time) > after and _int(tr.get("to"), -1) > offset]
        if trs:
            ln = self.truncate_line(trs[-1], part)
            ln.kept.setdefault(offset, kept)
            steps.append(Step(ln, f"{node}'s truncation (rule {rule_of(trs[-1]) or '?'}) "
                                  "keeps its record"))

    # -- lost-write ------------------------------------------------------------------

    def lost_write(self, a: dict[str, Any]) -> Cause | None:
        f = self.f
        w = a.get("witness") or {}
        part = pkey(w.get("topic", a.get("topic")), w.get("partition", a.get("partition")))
        v, offset = w.get("value"), w.get("acked_offset")
        if not isinstance(offset, int):
            return None
        op = f.ops.get((w.get("op") or {}).get("index"))
        steps: list[Step] = []
        t_ack = _t(op.get("time")) if op else 0
        if op is not None:
            ln = self.ack_line(op, part)
            if ln is not None:
                who = "the leader" if ln.node in (None, "None") else ln.node
                steps.append(Step(ln, f"{who} acknowledges it"))
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
                    f"{f.value_name(v)}") if names else f"where {f.value_name(v)} was acknowledged")
                if wl is not None:
                    steps.append(Step(wl, f"{el.leader} writes "
                                          f"{f.value_name(wl.values.get(offset))} there"))
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
                    if _t(tr.time) > after and f.removes(tr, offset)
                    and (f.removed_at(tr, offset) or (None, v))[1] == v]
        for tr in removers:
            ln = self.truncate_line(tr, part)
            ln.removed.setdefault(offset, f.removed_at(tr, offset))
            steps.append(Step(ln, f"{tr.node} truncates it (rule {rule_of(tr) or '?'})"))
        if not holders and removers:
            last = max(removers, key=lambda tr: _t(tr.time))
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
        title = f"{f.value_name(v)}, acknowledged at {part} offset {offset}, lost"
        return Cause("lost-write", part, title, [offset], steps)

    # -- duplicate ---------------------------------------------------------------------

    def duplicate(self, a: dict[str, Any]) -> Cause | None:
        """A value at two offsets, told by the produce request the network handed its
        leader twice (the sim's `--net-duplicate`): the ack, the second copy, the
        final read. Without such an event the story has nothing to tell."""
        f = self.f
        w = a.get("witness") or {}
        part = pkey(w.get("topic", a.get("topic")), w.get("partition", a.get("partition")))
        v = w.get("value")
        offsets = sorted(x["offset"] for x in w.get("at") or []
                         if isinstance(x, dict) and isinstance(x.get("offset"), int))
        resends = f.resends.get(part, {}).get(v, [])
        if len(offsets) < 2 or not resends:
            return None
        steps: list[Step] = []
        for s in w.get("sends") or []:
            op = f.ops.get(s.get("index")) if isinstance(s, dict) else None
            ln = self.ack_line(op, part) if op is not None and op.get("type") == "ok" else None
            if ln is not None:
                steps.append(Step(ln, "acknowledged once"))
        for it in resends:
            ln = self.line(f"resend:{it.id}", "resend", it, node=it.node, part=part)
            ln.values.update({o: v for o in offsets})
            steps.append(Step(ln, f"{it.node} handles the produce twice"))
        fin = f.final.get(part)
        if fin is not None:
            ln = self.line(f"final:{part}", "final", fin, part=part)
            ln.twice[v] = offsets
            steps.append(Step(ln, "final read"))
        title = f"{f.value_name(v)} at {part} offsets {', '.join(map(str, offsets))}"
        return Cause("duplicate", part, title, offsets, steps)

    # -- divergence --------------------------------------------------------------------

    def divergence(self, a: dict[str, Any]) -> Cause | None:
        f = self.f
        w = a.get("witness") or {}
        part = pkey(w.get("topic", a.get("topic")), w.get("partition", a.get("partition")))
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
            el = next((e for e in f.elections.get(part, []) if e.epoch == new["epoch"]), None)
            if el is None:
                continue
            st = f.at_election(el, o)
            ln = self.election_line(el)
            if st[0] == "none":
                old_ack = f.ack_at(part, o, None, -1, el.time)
                t_old = (_t(old_ack.get("time")) if old_ack is not None
                         and old_ack.get("value") == old.get("value") else None)
                self.why_lacked(el, o, t_old, steps, old.get("value"))
                ln.lacks[o] = old.get("value")
                steps.append(Step(ln, f"{el.leader} elected without it (epoch {el.epoch})"))
                wl = self.write_line(el, o, f"where {old_node} holds "
                                            f"{rec_text((old.get('epoch'), old.get('value')), f)}")
                if wl is not None:
                    steps.append(Step(wl, f"{el.leader} writes "
                                          f"{f.value_name(new.get('value'))} there"))
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


def build(data: RunData, facts: Facts | None = None) -> tuple[Story, Facts]:
    f = facts or Facts(data)
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
    lines = sorted(b.lines.values(), key=lambda ln: (_t(ln.time), _KIND_ORDER.get(ln.kind, 9)))
    lines = _merge_acks(lines, causes)
    for i, ln in enumerate(lines, 1):
        ln.n = i
        ln.text = _text(ln, f)
    causes = _group(causes)
    for c in causes:
        for s in c.steps:
            if c.title not in s.line.explains:
                s.line.explains.append(c.title)
    named = sorted({rule_of(ln.item) or "" for ln in lines
                    if ln.kind == "truncate" and ln.item is not None} & set(RULES))
    return Story(lines, causes, [f"{k} ×{n}" for k, n in uncaused.items()],
                 [(r, RULES[r]) for r in named]), f


_KIND_ORDER = {"fault": 0, "ack": 1, "resend": 2, "power-cycle": 2, "truncate": 3,
               "election": 4, "final": 6}


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
    """Lost writes of one partition with the same steps are told as one cause."""
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
        if c.kind != "lost-write":
            out.append(c)
            continue
        key = (c.part, tuple(s.line.key for s in c.steps))
        if key in index:
            index[key].offsets += c.offsets
            continue
        index[key] = c
        out.append(c)
    for c in out:
        if c.kind == "lost-write" and len(c.offsets) > 1:
            c.title = (f"{len(c.offsets)} writes, acknowledged at {c.part} "
                       f"{offsets_phrase(c.offsets)}, lost")
    return out


# -- the words ---------------------------------------------------------------------------


def _values(d: dict[int, Any], f: Facts) -> str:
    offs = sorted(d)
    vals = [d[o] for o in offs]
    if len(vals) == 1:
        return f"{f.value_name(vals[0])} at offset {offs[0]}"
    shown = ", ".join(map(str, vals[:MAX_VALUES])) + (", …" if len(vals) > MAX_VALUES else "")
    return f"values {shown} at {offsets_phrase(offs)}"


def _target(tr: Item, rule: str | None, f: Facts, part: str) -> str:
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


def _truncate_text(ln: Line, it: Item, f: Facts) -> str:
    part = ln.part or ""
    frm, to = _int(it.get("from"), 0), _int(it.get("to"), 0)
    rule = rule_of(it)
    bec = f.became_before(it.node, part, _t(it.time))
    leader = bec.get("leader") if bec is not None and bec.type == "became-follower" else None
    st = f.start_before(it.node, _t(it.time))
    restarted = bec is not None and st is not None and not any(
        _t(st.time) <= _t(b.time) < _t(bec.time)
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
        vals = [f.value_name(v) for _, v in sorted(ln.last_copy.items())[:MAX_VALUES]]
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


def _election_text(ln: Line, el: Election, f: Facts) -> str:
    how = (f"unclean: {el.leader} was not in the ISR" if el.unclean
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


def _lost_at(ln: Line, f: Facts) -> list[Any]:
    """The lost values at the offsets where an election's leader held another record."""
    out = []
    for o in sorted(ln.holds):
        for a in f.data.anomalies:
            w = a.get("witness") or {}
            if a.get("kind") == "lost-write" and w.get("acked_offset") == o and \
                    pkey(a.get("topic"), a.get("partition")) == ln.part:
                out.append(f.value_name(w.get("value")))
    return out or ["record"]


def _text(ln: Line, f: Facts) -> str:
    it = ln.item
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
        fl = f.last_flush(ln.node or "", ln.part or "", _t(it.time) if it else 0)
        since = (f"its last fsync, at {fmt_time(fl.time)}, covered LEO {fl.get('leo')}"
                 if fl is not None else "it had fsynced no record")
        gone = "; ".join(f"offset {o}" + (f" = {f.value_name(v)}" if v is not None else "")
                         + (f" — {ln.had[o]}" if o in ln.had else "")
                         for o, v in sorted(ln.gone.items()))
        back = (f"restarts at {fmt_time(ln.restart[0].time)} with LEO {ln.restart[1]}"
                if ln.restart else "restarts")
        return (f"Power-cycle of {ln.node}: killed, and every byte not fsynced is dropped. "
                f"{ln.node} {back} ({since}), without {gone}.")
    if ln.kind == "resend" and it is not None:
        at: dict[Any, list[int]] = {}
        for o, v in sorted(ln.values.items()):
            at.setdefault(v, []).append(o)
        held = "; ".join(f"{f.value_name(v)} at {offsets_phrase(offs)}"
                         for v, offs in at.items())
        return (f"The network hands {ln.node} a produce request from {it.get('peer')} a "
                "second time (a resend whose first attempt went through), and it appends "
                f"the records again: {ln.part} holds {held}. No idempotent producer "
                "(KIP-98) tells the copy apart.")
    if ln.kind == "truncate" and it is not None:
        return _truncate_text(ln, it, f)
    if ln.kind == "election" and it is not None:
        el = next((e for els in f.elections.values() for e in els if e.item is it), None)
        return _election_text(ln, el, f) if el else f"{ln.node} is elected leader."
    if ln.kind == "final" and it is not None:
        recs = it.get("records") or []
        by_off = {r[0]: r[1] for r in recs if isinstance(r, list) and len(r) == 2}
        end = max(by_off, default=-1) + 1
        parts = []
        for o, v in sorted(ln.finals.items()):
            if o in by_off:
                parts.append(f"offset {o} holds {f.value_name(by_off[o])}, not "
                             f"{f.value_name(v)}")
            else:
                parts.append(f"{f.value_name(v)} at offset {o} is not in it: the log ends "
                             f"at offset {end}")
        parts += [f"{f.value_name(v)} is at {offsets_phrase(offs)}"
                  for v, offs in sorted(ln.twice.items(), key=lambda x: x[1])]
        return (f"Final read of {ln.part}: {plural(len(by_off), 'record')}"
                + (f" ({offsets_phrase(range(end))})" if end else "")
                + "; " + "; ".join(parts) + ".")
    return ln.kind


@dataclass
class Headline:
    cls: str  # data-loss | data-diverged | data-anomaly | data-clean
    text: str
    expectation: str
    verdict: str


def _kip(description: Any) -> str | None:
    m = re.search(r"\(([^()]+)\)\s*\.?\s*$", str(description or ""))
    return m.group(1) if m else None


def _partition_offsets(anomalies: list[dict[str, Any]], kind: str, key: str
                       ) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for a in anomalies:
        if a.get("kind") != kind:
            continue
        w = a.get("witness") or {}
        part = pkey(a.get("topic"), a.get("partition"))
        if key == "acked_offset" and isinstance(w.get(key), int):
            out.setdefault(part, []).append(w[key])
        elif key == "offsets":
            out.setdefault(part, []).extend(o.get("offset") for o in w.get("offsets") or []
                                            if isinstance(o.get("offset"), int))
    return out


def _where(parts: dict[str, list[int]]) -> str:
    return "; ".join(f"{p} {offsets_phrase(offs)}" for p, offs in sorted(parts.items()))


def headline(data: RunData) -> Headline:
    s = data.summary
    found: dict[str, int] = dict(s.get("found") or {})
    protocol = data.meta.get("protocol") or s.get("protocol")
    scenario = data.meta.get("scenario") or s.get("scenario")
    pieces = []
    lost = found.get("lost-write", 0)
    if lost:
        where = _where(_partition_offsets(data.anomalies, "lost-write", "acked_offset"))
        pieces.append(f"{plural(lost, 'acknowledged write')} lost" + (f" ({where})" if where
                                                                      else ""))
    div = found.get("divergence", 0)
    if div:
        pairs = sorted({" and ".join(map(str, (a.get("witness") or {}).get("replicas") or []))
                        for a in data.anomalies if a.get("kind") == "divergence"})
        where = _where(_partition_offsets(data.anomalies, "divergence", "offsets"))
        pieces.append(f"replicas {', '.join(pairs) or '?'} diverge" + (f" ({where})" if where
                                                                       else ""))
    others = [f"{k} ×{n}" for k, n in found.items() if k not in ("lost-write", "divergence")]
    if others:
        pieces.append(("other anomalies: " if pieces else "") + ", ".join(others))
    if lost:
        cls = "data-loss"
    elif div:
        cls = "data-diverged"
    elif found:
        cls = "data-anomaly"
    else:
        cls = "data-clean"
        pieces.append("No acknowledged write lost; the replicas agree")
    text = "; ".join(pieces)
    verdict = str(s.get("verdict"))
    expected = list(s.get("expected") or [])
    unexpected = list(s.get("unexpected") or [])
    missing = list(s.get("missing") or [])
    kip = _kip(data.meta.get("description"))
    tail = f" ({kip})" if kip else ""
    if found and not unexpected and scenario:
        what = ("the loss and divergence" if lost and div else "the loss" if lost
                else "the divergence" if div else "what")
        text += f" — {what} this scenario documents for {protocol}{tail}"
    elif found and not unexpected:
        text += f" — allowed by this run's expect ({', '.join(expected)})"
    elif unexpected:
        text += f" — not expected under {protocol}"
    if verdict == "incomplete":
        unjudged = list(s.get("unjudged") or [])
        exp = ("Incomplete: the run did not finish, and only what it recorded was checked"
               + (f"; {', '.join(unjudged)}, expected, not judged" if unjudged else ""))
    elif verdict == "valid":
        exp = (f"As expected: scenario {scenario} documents "
               f"{', '.join(expected) if expected else 'no anomaly'} under {protocol}"
               if scenario else
               f"Allowed: this run expects {', '.join(expected) if expected else 'nothing'}")
    elif verdict == "not-reproduced":
        exp = (f"Not reproduced: scenario {scenario} documents {', '.join(missing)} under "
               f"{protocol}{tail}, and the run did not show it")
    elif unexpected:
        exp = (f"Not expected: {', '.join(unexpected)} "
               f"{'is' if len(unexpected) == 1 else 'are'} not allowed under {protocol}"
               + (f" by scenario {scenario}" if scenario else ""))
    else:
        exp = f"Not as scenario {scenario} documents under {protocol}"
    failed = [a for a in data.assertions if not a.get("ok")]
    if failed:
        exp += ("; " if verdict != "invalid" or unexpected else ": ") + "; ".join(
            f"assertion {a.get('text')} failed, was {a.get('value')}" for a in failed)
    elif data.assertions and verdict == "valid":
        exp += f", and its {plural(len(data.assertions), 'figure assertion')} hold"
    return Headline(cls, text, exp, verdict)
