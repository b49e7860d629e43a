"""The facts of a run, indexed for the report: its timeline items and the protocol
facts the story, the replica grid and the charts ask about.

Read only from the run directory's generic files (reports.rundata): events.jsonl
(elections, truncations with their rule and removed records, restarts, flushes,
HW moves, the controller's ISR changes), the client and nemesis ops of
history.jsonl (acknowledged sends, power cycles, faults, final reads), run.json's
fault windows and value labels, the replicas' final logs.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from broker.protocol import Features, features
from reports.rundata import RunData, pkey
from reports.units import is_number, offset_runs


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
    # a final read whose records the check cut (checker.reportops.picked): the
    # whole read's records, distinct offsets and end offset
    records_seen: tuple[int, int, int] | None = None

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)


NOISE = ("unix_ns", "incarnation", "seq", "time", "node", "type")


def part_of(fields: dict[str, Any]) -> str | None:
    """The partition ("topic/partition") an event, op or started entry names, if any."""
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


class RunFacts:
    """The run's protocol facts, indexed for the story, the grid's ghost rows and the
    charts."""

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
        self.halts: dict[str, list[Item]] = {}  # a broker that stopped itself (`halt`)
        self.controller: list[Item] = []  # broker-dead, broker-registered
        self.isr_changes: dict[str, list[Item]] = {}
        self._isr_index: dict[str, tuple[list[int], list[list[str]]]] = {}  # isr_at's
        self.nemesis: list[Item] = []
        self.power_cycles: dict[str, list[Item]] = {}
        self.final: dict[str, Item] = {}
        self.acks: dict[str, dict[int, list[dict[str, Any]]]] = {}
        # part -> value -> the sim's net-duplicated events of a produce carrying it
        self.resends: dict[str, dict[Any, list[Item]]] = {}
        # part -> an idempotent producer's resends its leader recognised (KIP-98):
        # the broker's producer-duplicate events
        self.recognised: dict[str, list[Item]] = {}
        labels = data.meta.get("labels") or {}
        self.labels = {v: lab for lab, vs in labels.items() if isinstance(vs, list) for v in vs}
        # The events the check kept for the report (checker.reportevents), each with
        # its line index, else every event of events.jsonl.
        kept = data.events_kept
        self._events([(i, e) for i, e in kept] if kept is not None
                     else list(enumerate(data.events)))
        # ROUTINE events (HW moves) the check left out: counted in the timeline's totals
        self.events_left_out = data.events_left_out
        story = data.inputs.get("story")
        # The lines the check picked for the story (checker.reportops), else all of them.
        self.trimmed = {int(i): tuple(n) for i, n in (story or {}).get("final_records",
                                                                       {}).items()}
        # part -> broker -> offset -> [epoch, value] at the anomalies' offsets; None:
        # the replica logs are searched
        self.log_at = None if story is None else story.get("logs", {})
        # became-follower event id -> its records at risk as [a, b) runs
        # (checker.reportrisk); None: found in the acknowledged sends
        self._risk = None if story is None else story.get("risk")
        self._history(data.history if story is None else story["ops"])
        self.windows = self._windows()

    # -- indexing ----------------------------------------------------------------

    def _events(self, events: list[tuple[int, dict[str, Any]]]) -> None:
        """``events``: (line index in events.jsonl, event)."""
        for i, e in sorted(events, key=lambda x: (time_ns(x[1].get("time")), x[0])):
            fields = {k: v for k, v in e.items() if k not in NOISE}
            it = Item(f"ev-{i}", time_or_none(e.get("time")), str(e.get("node")),
                      str(e.get("type")), fields, "event")
            self.items[it.id] = it
            node, typ, part = it.node, it.type, part_of(fields)
            if typ == "started":
                self.starts.setdefault(node, []).append(it)
            elif typ == "halt":
                self.halts.setdefault(node, []).append(it)
            elif typ in ("broker-dead", "broker-registered"):
                self.controller.append(it)
            elif part is None:
                continue
            elif typ == "leader-elected":
                self.elections.setdefault(part, []).append(Election(
                    it, part, str(it.get("leader")),
                    int_or(it.get("leader_epoch", it.get("epoch")), -1),
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
            elif typ == "producer-duplicate":
                self.recognised.setdefault(part, []).append(it)
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
                if time_ns(it.time) < el.time and it.type in ("leader-elected", "leader-offline")]
        since = time_ns(prev[-1].time) if prev else -1
        if prev and prev[-1].type == "leader-offline":
            el.offline_since = prev[-1].time
        cands = [it for it in self.controller
                 if since < time_ns(it.time) <= el.time
                 and it.type in ("broker-dead", "broker-registered")]
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
            part = part_of(o)
            if proc == "nemesis":
                it = self._op_item(o, "nemesis")
                self.nemesis.append(it)
                if o.get("f") == "power-cycle":
                    for n in nodes_of(o.get("value")):
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
            self.items[iid] = Item(iid, time_or_none(o.get("time")), node, typ, fields, source,
                                   records_seen=self.trimmed.get(o["index"]))
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
                      and win.node in nodes_of(it.get("value"))]
            if opener:
                win.item = min(opener, key=lambda it: abs(time_ns(it.time) - win.start))
            out.append(win)
        return out

    # -- questions ---------------------------------------------------------------

    def isr_at(self, part: str, t: int) -> list[str] | None:
        """The ISR the controller last named for `part` at or before t. Asked once
        per acknowledgement in the story (tens of thousands in a long valid run):
        a binary search over the changes that name one."""
        if part not in self._isr_index:
            named = [(time_ns(it.time), [str(x) for x in it.get("isr")])
                     for it in self.isr_changes.get(part, [])
                     if isinstance(it.get("isr"), list)]
            self._isr_index[part] = ([tn for tn, _ in named], [isr for _, isr in named])
        times, isrs = self._isr_index[part]
        i = bisect.bisect_right(times, t)
        return list(isrs[i - 1]) if i else None

    def acked_before(self, part: str, offset: int, before: int) -> dict[str, Any] | None:
        """The last acknowledged send at `offset` before `before`."""
        oks = [o for o in self.acks.get(part, {}).get(offset, [])
               if time_ns(o.get("time")) < before]
        return max(oks, key=lambda o: time_ns(o.get("time"))) if oks else None

    def at_risk(self, part: str, bec: Item) -> list[tuple[int, int]]:
        """The offsets a became-follower event's replica held above its HW ([hw, leo))
        that were acknowledged before it, as [a, b) runs: the records at risk there
        (reports.story.kept). The check computes them for a valid run (its story
        holds only the sends the story names); else from the acknowledged sends."""
        if self._risk is not None:
            return [(a, b) for a, b in self._risk.get(bec.id, [])]
        leo, hw, t = int_or(bec.get("leo"), 0), int_or(bec.get("hw"), 0), time_ns(bec.time)
        acked = self.acks.get(part, {})
        return offset_runs(o for o in range(hw, leo)
                           if any(time_ns(a.get("time")) < t for a in acked.get(o, ())))

    def election_of(self, part: str, epoch: Any) -> Election | None:
        """The election that started leader epoch `epoch` of `part`."""
        if not isinstance(epoch, int):
            return None
        return next((el for el in self.elections.get(part, []) if el.epoch == epoch), None)

    def leader_at(self, part: str, t: int) -> Election | None:
        cur = None
        for el in self.elections.get(part, []):
            if el.time > t:
                break
            cur = el
        return cur

    def start_after(self, node: str, t: int) -> Item | None:
        return next((s for s in self.starts.get(node, []) if time_ns(s.time) > t), None)

    def start_before(self, node: str, t: int) -> Item | None:
        return next((s for s in reversed(self.starts.get(node, [])) if time_ns(s.time) <= t), None)

    def halt_before_restart(self, node: str, t: int) -> Item | None:
        """The halt that ended `node`'s incarnation before the one running at t: why
        it had to be restarted (None: it was not a halt, or it has not restarted)."""
        st = self.start_before(node, t)
        if st is None:
            return None
        prev = self.start_before(node, time_ns(st.time) - 1)
        return next((h for h in reversed(self.halts.get(node, []))
                     if time_ns(h.time) < time_ns(st.time)
                     and (prev is None or time_ns(h.time) > time_ns(prev.time))), None)

    def started_leo(self, start: Item, part: str) -> tuple[int | None, int | None]:
        for p in start.get("partitions") or []:
            if isinstance(p, dict) and part_of(p) == part:
                return int_or_none(p.get("leo")), int_or_none(p.get("hw"))
        return None, None

    def removed_at(self, tr: Item, offset: int) -> tuple[int, Any] | None:
        """(epoch, value) a truncate event says it removed at `offset`, if listed."""
        for r in tr.get("removed") or []:
            if isinstance(r, list) and len(r) == 3 and r[0] == offset:
                return r[1], r[2]
        return None

    def removes(self, tr: Item, offset: int) -> bool:
        return self.removes_any(tr, [(offset, offset + 1)])

    def removes_any(self, tr: Item, runs: list[tuple[int, int]]) -> bool:
        """A truncation's removed range [to, from) meets one of the runs [a, b)."""
        to, frm = int_or(tr.get("to"), 0), int_or(tr.get("from"), 0)
        return any(max(a, to) < min(b, frm) for a, b in runs)

    def log_record(self, node: str, part: str, offset: int) -> tuple[Any, Any] | None:
        if self.log_at is not None:  # the check's (checker.reportops.log_records)
            rec = self.log_at.get(part, {}).get(node, {}).get(str(offset))
            return None if rec is None else (rec[0], rec[1])
        for r in self.data.logs.get(node, {}).get(part, []):
            if r.get("offset") == offset:
                return r.get("epoch"), r.get("value")
        return None

    def power_losses(self, node: str, part: str, after: int, before: int | None
                     ) -> list[tuple[Item, Item, int]]:
        """(power-cycle op, the restart after it, LEO it restarted with) in (after, before)."""
        out = []
        for pc in self.power_cycles.get(node, []):
            t = time_ns(pc.time)
            if t <= after or (before is not None and t >= before):
                continue
            st = self.start_after(node, t)
            if st is None or (before is not None and time_ns(st.time) >= before):
                continue
            leo, _ = self.started_leo(st, part)
            if leo is not None:
                out.append((pc, st, leo))
        return out

    def offset_losses(self, node: str, part: str, offset: int, after: int | None = None,
                      before: int | None = None
                      ) -> tuple[list[Item], list[tuple[Item, Item, int]]]:
        """What took `offset` of `part` from `node`'s log in (after, before), None for no
        bound, in time order: the truncations that removed it, and the power losses
        (power_losses) after which it restarted with its LEO at or below it."""
        trs = [tr for tr in self.truncs.get(part, {}).get(node, [])
               if (after is None or time_ns(tr.time) > after)
               and (before is None or time_ns(tr.time) < before) and self.removes(tr, offset)]
        since = -1 if after is None else after
        pcs = [loss for loss in self.power_losses(node, part, since, before) if loss[2] <= offset]
        return trs, pcs

    def record_after(self, node: str, part: str, offset: int, t: int
                     ) -> tuple[str, tuple[Any, Any] | None]:
        """What `node` held at `offset` at time t, knowing it held something there:
        the record its next truncation of that offset removed, else its final log's."""
        trs, pcs = self.offset_losses(node, part, offset, after=t)
        first_tr = trs[0] if trs else None
        first_pc = pcs[0][0] if pcs else None
        if first_pc is not None and (first_tr is None
                                     or time_ns(first_pc.time) < time_ns(first_tr.time)):
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
        t = time_ns(el.became.time if el.became else el.time)
        return self.record_after(el.leader, el.part, offset, t)

    def window_at(self, node: str, t: int) -> Window | None:
        for w in self.windows:
            if w.node == node and w.start <= t and (w.end is None or t < w.end):
                return w
        return None

    def hw_from_checkpoint(self, tr: Item, part: str) -> bool:
        """Whether the HW a truncation used is the checkpoint its node restarted with."""
        st = self.start_before(tr.node, time_ns(tr.time))
        if st is None:
            return False
        _, hw = self.started_leo(st, part)
        if hw is None or hw != tr.get("to"):
            return False
        return not any(time_ns(st.time) <= time_ns(h.time) <= time_ns(tr.time)
                       for h in self.hw_moves.get(part, {}).get(tr.node, []))

    def became_before(self, node: str, part: str, t: int) -> Item | None:
        return next((b for b in reversed(self.became.get(part, {}).get(node, []))
                     if time_ns(b.time) <= t), None)

    def last_flush(self, node: str, part: str, t: int) -> Item | None:
        return next((f for f in reversed(self.flushes.get(part, {}).get(node, []))
                     if time_ns(f.time) <= t), None)

    def ack_at(self, part: str, offset: int, node: str | None, after: int,
               before: int | None) -> dict[str, Any] | None:
        for o in self.acks.get(part, {}).get(offset, []):
            t = time_ns(o.get("time"))
            if t > after and (before is None or t < before) and (node is None
                                                                  or o.get("node") == node):
                return o
        return None

    def lost_values_at(self, part: str | None, offset: int) -> list[Any]:
        """The values of the lost writes acknowledged at `offset` of `part`."""
        return [(a.get("witness") or {}).get("value") for a in self.data.anomalies
                if a.get("kind") == "lost-write"
                and (a.get("witness") or {}).get("acked_offset") == offset
                and pkey(a.get("topic"), a.get("partition")) == part]


def time_or_none(t: Any) -> int | None:
    """An event's or op's time (ns since the run started), None when it has none."""
    return int(t) if is_number(t) else None


def time_ns(t: Any) -> int:
    """The same, 0 when it has none: a time to sort and compare by."""
    return time_or_none(t) or 0


def int_or_none(v: Any) -> int | None:
    """An offset, LEO or epoch field, None when it is not an integer."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def int_or(v: Any, default: int) -> int:
    iv = int_or_none(v)
    return default if iv is None else iv


def nodes_of(value: Any) -> list[str]:
    """The nodes a nemesis op names (its value: a list, or a dict keyed by node)."""
    return [str(x) for x in value] if isinstance(value, list | dict) else []


# Events written before truncate events carried `rule`: their `reason`.
REASON_RULE = {
    "high-watermark": "hw",
    "leader-epoch": "offsets_for_leader_epoch",
    "leader-epoch-iteration": "offsets_for_leader_epoch",
    "offset-out-of-range": "offset_out_of_range",
}


def rule_of(tr: Item) -> str | None:
    rule = tr.get("rule")
    return rule if isinstance(rule, str) else REASON_RULE.get(str(tr.get("reason")))


def run_features(protocol: Any) -> Features | None:
    """The run's protocol's rules (broker.protocol), None for an unknown protocol."""
    try:
        return features(str(protocol))
    except (KeyError, ValueError):
        return None
