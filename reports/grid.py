"""The replica-log grid: offset rows × replica columns, per partition.

Each cell shows a record's epoch and value. Rows are marked when replicas hold
different records there (``differs``), when the checker flagged the offset as a
divergence (``divergent``), and cells holding a lost acknowledged value are
marked ``lost``. Offsets that were acknowledged but are in no replica's log any
more are ``ghost`` rows: each replica's cell says what it held there before a
truncation removed it (the truncate event's removed records) or which power
cycle dropped it. Long logs keep the interesting rows (marked ones ± context,
the start and the end) and fold the rest into gap rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checker.gridrows import add_ack, anomaly_offsets, partition_rows
from reports.rundata import Replica, RunData, pkey
from reports.story.facts import RunFacts, rule_of
from reports.units import fmt_time


@dataclass
class Cell:
    epoch: Any = None
    value: Any = None
    present: bool = False
    above_hw: bool = False
    lost: bool = False
    note: str = ""  # ghost cell: what removed it, and when
    ref: str | None = None  # ghost cell: the timeline row of what removed it


@dataclass
class Row:
    offset: int
    cells: list[Cell]
    final: Cell
    differs: bool = False
    divergent: bool = False
    gap: int = 0  # >0: a fold standing for this many hidden rows
    ghost: bool = False  # acknowledged, but in no replica's log any more
    acked: list[tuple[Any, bool]] = field(default_factory=list)  # (value, lost) acked here

    @property
    def lost(self) -> bool:
        """A value acknowledged here is lost."""
        return any(lost for _, lost in self.acked)


@dataclass
class Head:
    """A replica column's header: the broker and what its state says about it."""

    broker: str
    text: str  # one line: role, epoch, LEO, HW, ISR -- or why they are unknown
    down: bool = False  # read from its data directory: not running at the end
    stateless: bool = False  # no state for this replica: its log alone


def head(broker: str, replica: Replica | None, st: dict[str, Any]) -> Head:
    """Only what the state says: a down broker (read from its data directory)
    has no role, leader epoch or ISR, and its HW is the checkpoint it would
    restart with."""

    def num(key: str) -> Any:
        v = st.get(key)
        return "?" if v is None else v

    if replica is not None and not replica.has_state:
        return Head(broker, "no state.json · log only", stateless=True)
    if not st:
        return Head(broker, "not in its state.json · log only", stateless=True)
    if (replica is not None and replica.down) or st.get("offline"):
        ckpt = st.get("hw_checkpoint", st.get("hw"))
        text = (f"down · read from its data directory · LEO {num('leo')} · HW checkpoint "
                f"{'?' if ckpt is None else ckpt}")
        return Head(broker, text, down=True)
    text = (f"{st.get('role') or '?'} · epoch {num('leader_epoch')} · LEO {num('leo')} "
            f"· HW {num('hw')}")
    if st.get("hw_checkpoint") is not None:
        text += f" (ckpt {st['hw_checkpoint']})"
    if st.get("isr"):
        text += f" · ISR {','.join(map(str, st['isr']))}"
    return Head(broker, text)


@dataclass
class Grid:
    partition: str
    brokers: list[str]
    states: list[dict[str, Any]]
    heads: list[Head] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    hidden: int = 0
    # the checker's anomalies here: kind → the offsets they name (all shown)
    anomalies: dict[str, list[int]] = field(default_factory=dict)
    unshown: int = 0  # anomaly offsets beyond MAX_ANOMALY_ROWS (not shown)

    @property
    def anchor(self) -> str:
        """The id of the partition's heading (report.html#grid-t-2)."""
        return "grid-" + self.partition.replace("/", "-")


def _final_log(data: RunData) -> dict[str, dict[int, Any]]:
    """partition → offset → value of the final read (as the checker took it)."""
    out: dict[str, dict[int, Any]] = {}
    for op in data.history:
        if op.get("process") == "final" and op.get("f") == "poll" and op.get("type") == "ok":
            part = out.setdefault(pkey(op.get("topic"), op.get("partition")), {})
            for off, val in op.get("records") or []:
                part[int(off)] = val
    return out


def _acked(data: RunData) -> dict[str, dict[int, list[Any]]]:
    """partition → offset → the values acknowledged there, in history order."""
    out: dict[str, dict[int, list[Any]]] = {}
    for op in data.history:
        if op.get("f") == "send" and op.get("type") == "ok" and isinstance(op.get("offset"),
                                                                             int):
            add_ack(out.setdefault(pkey(op.get("topic"), op.get("partition")), {}),
                    op["offset"], op.get("value"))
    return out


def reduced_rows(data: RunData, lost: dict[str, set[Any]], must: dict[str, set[int]]
                 ) -> dict[str, dict[str, Any]]:
    """partition → checker.gridrows' grid, from the replica logs and the history: for
    a run checked before the check computed it (report-inputs.json "grid")."""
    acked, finals = _acked(data), _final_log(data)
    logs: dict[str, dict[str, dict[int, tuple[Any, Any]]]] = {}
    for b, by_part in data.logs.items():
        for part, recs in by_part.items():
            logs.setdefault(part, {})[b] = {int(r["offset"]): (r.get("epoch"), r.get("value"))
                                            for r in recs}
    return {part: partition_rows(by_broker, finals.get(part, {}), acked.get(part, {}),
                                 lost.get(part, set()), must.get(part, set()))
            for part, by_broker in logs.items()}


def ghost_cell(facts: RunFacts, broker: str, part: str, off: int) -> Cell:
    """What `broker` held at `off` before it lost it: the last truncation that removed
    the offset (with the record, when the event lists it), else the power cycle
    after which it restarted below the offset."""
    trs, pcs = facts.offset_losses(broker, part, off)
    last_tr = trs[-1] if trs else None
    last_pc = pcs[-1][0] if pcs else None
    if last_tr is not None and (last_pc is None or (last_tr.time or 0) >= (last_pc.time or 0)):
        rec = facts.removed_at(last_tr, off)
        note = f"✂ truncated {fmt_time(last_tr.time)} · rule {rule_of(last_tr) or '?'}"
        if rec is None:
            return Cell(note=note, ref=last_tr.id)
        return Cell(rec[0], rec[1], True, note=note, ref=last_tr.id)
    if last_pc is not None:
        return Cell(note=f"⚡ power-cycle {fmt_time(last_pc.time)}: not on disk",
                    ref=last_pc.id)
    return Cell()


def build(data: RunData, facts: RunFacts | None = None) -> list[Grid]:
    """One grid per partition: those with an anomaly first, then the others."""
    facts = facts or RunFacts(data)
    lost: dict[str, set[Any]] = {}
    divergent: dict[str, set[int]] = {}
    named: dict[str, dict[str, set[int]]] = {}  # partition → kind → offsets
    for a in data.anomalies:
        k = pkey(a.get("topic"), a.get("partition"))
        if a["kind"] == "lost-write":
            lost.setdefault(k, set()).add(a["witness"].get("value"))
        elif a["kind"] == "divergence":
            divergent.setdefault(k, set()).update(o["offset"] for o in a["witness"]["offsets"])
        named.setdefault(k, {}).setdefault(a["kind"], set()).update(
            anomaly_offsets(a.get("witness")))
    reduced = grid_rows(data)
    if reduced is None:  # a run checked before the check reduced them
        must = {k: set(divergent.get(k, set())) | {o for offs in named.get(k, {}).values()
                                                   for o in offs}
                for k in set(divergent) | set(named)}
        reduced = reduced_rows(data, lost, must)
    parts = sorted(set(reduced) | {p for st in data.states.values() for p in st})
    grids = [_partition_grid(data, facts, part, lost.get(part, set()),
                             divergent.get(part, set()), reduced.get(part), named.get(part, {}))
             for part in parts]
    return sorted(grids, key=lambda g: not g.anomalies)  # stable: by partition within


def grid_rows(data: RunData) -> dict[str, dict[str, Any]] | None:
    """partition → its grid as the check computed it (report-inputs.json "grid"), or
    None for a run checked before."""
    return (data.inputs or {}).get("grid")


def log_brokers(data: RunData) -> set[str]:
    """The brokers whose replica log holds a record."""
    reduced = grid_rows(data)
    if reduced is None:
        return {b for b, by_part in data.logs.items() if by_part}
    return {b for g in reduced.values() for b in g["brokers"]}


_EMPTY = {"rows": [], "hidden": 0, "epochs": [], "lost_offsets": [], "unshown": 0,
          "brokers": []}


def _partition_grid(data: RunData, facts: RunFacts, part: str, lost_p: set[Any], div_p: set[int],
                    reduced: dict[str, Any] | None, named: dict[str, set[int]]) -> Grid:
    red = reduced or _EMPTY
    # every broker under replicas/ (a RunData made without them: those with a log)
    dirs = set(data.replicas) or set(data.logs)
    brokers = sorted(b for b in dirs if b in red["brokers"] or part in data.states.get(b, {}))
    states = [data.states.get(b, {}).get(part, {}) for b in brokers]
    if lost_p:  # a witness without its offset: where the lost values were acknowledged
        named = {**named, "lost-write": named.get("lost-write", set())
                 | set(red["lost_offsets"])}

    def make(r: dict[str, Any]) -> Row:
        if "gap" in r:
            return Row(-1, [], Cell(), gap=r["gap"])
        off = r["o"]
        acked = [(v, v in lost_p) for v in r["a"]]
        if r.get("g"):
            cells = [ghost_cell(facts, b, part, off) for b in brokers]
            for c in cells:
                c.lost = c.present and c.value in lost_p
            return Row(off, cells, Cell(), ghost=True, acked=acked)
        cells = []
        for b, st in zip(brokers, states, strict=True):
            rec = r["c"].get(b)
            cells.append(Cell() if rec is None else Cell(
                rec[0], rec[1], True, isinstance(st.get("hw"), int) and off >= st["hw"],
                rec[1] in lost_p))
        fv = r.get("f")
        present = {(c.epoch, c.value) for c in cells if c.present}
        return Row(off, cells, Cell(None, fv, fv is not None), differs=len(present) > 1,
                   divergent=off in div_p, acked=acked)

    heads = [head(b, data.replicas.get(b), st) for b, st in zip(brokers, states, strict=True)]
    return Grid(part, brokers, states, heads, rows=[make(r) for r in red["rows"]],
                epochs=red["epochs"], hidden=red["hidden"],
                anomalies={k: sorted(v) for k, v in sorted(named.items())},
                unshown=red["unshown"])


# Golden-angle hues put consecutive epochs far apart, but epochs a Fibonacci
# number apart (8, 13, 21) land within ~20 degrees: each block of 8 epochs gets
# its own lightness so those stay apart too (tests/test_report_polish.py).
_EPOCH_LIGHTNESS = (86, 74, 66)


def epoch_colour(epoch: Any) -> str:
    """A stable, distinct background per leader epoch (golden-angle hues, lightness
    by block of 8 epochs)."""
    if epoch is None:
        return "#eeeeee"
    e = int(epoch)
    return (f"hsl({round((e * 137.508) % 360, 1)}, 70%, "
            f"{_EPOCH_LIGHTNESS[(e // 8) % len(_EPOCH_LIGHTNESS)]}%)")
