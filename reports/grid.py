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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reports.rundata import Replica, RunData, pkey
from reports.story.facts import RunFacts, rule_of
from reports.units import fmt_time

MAX_ROWS = 400  # rows besides the anomalies' own offsets and their context
MAX_ANOMALY_ROWS = 1000  # an anomaly's offsets shown per partition (the lowest)
MAX_GHOSTS = 200  # ghost rows per partition (the lowest offsets)
CONTEXT = 3
EDGE = 20
# The rows a fold keeps, by what they are.
PLAIN, MARKED, ANOMALY = 0, 1, 2


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
            vals = out.setdefault(pkey(op.get("topic"), op.get("partition")), {}).setdefault(
                op["offset"], [])
            if op.get("value") not in vals:
                vals.append(op.get("value"))
    return out


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


def anomaly_offsets(witness: Any) -> set[int]:
    """Every offset a witness names: the ints under an "offset" or "acked_offset"
    key and in an "offsets" list (of ints or of objects with an offset), at any depth; what
    "leo" and "hw" say about a replica's state is not an anomaly's offset."""
    out: set[int] = set()
    if isinstance(witness, dict):
        for k, v in witness.items():
            if k in ("offset", "acked_offset") and isinstance(v, int) and not isinstance(v, bool):
                out.add(v)
            elif k == "offsets" and isinstance(v, list):
                out.update(x for x in v if isinstance(x, int) and not isinstance(x, bool))
                out.update(*(anomaly_offsets(x) for x in v if isinstance(x, dict)))
            else:
                out |= anomaly_offsets(v)
    elif isinstance(witness, list):
        for x in witness:
            out |= anomaly_offsets(x)
    return out


def build(data: RunData, facts: RunFacts | None = None) -> list[Grid]:
    """One grid per partition: those with an anomaly first, then the others."""
    facts = facts or RunFacts(data)
    acked = _acked(data)
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
    finals = _final_log(data)
    parts = sorted(
        {p for logs in data.logs.values() for p in logs}
        | {p for st in data.states.values() for p in st}
    )
    grids = [_partition_grid(data, facts, part, lost.get(part, set()),
                             divergent.get(part, set()), acked.get(part, {}),
                             finals.get(part, {}), named.get(part, {})) for part in parts]
    return sorted(grids, key=lambda g: not g.anomalies)  # stable: by partition within


def _lost_offsets(acked_p: dict[int, list[Any]], lost_p: set[Any]) -> set[int]:
    """Where each lost value was acknowledged: the offset to show even when the
    replicas now hold another record there (it was overwritten, not removed)."""
    return {off for off, vals in acked_p.items() if any(v in lost_p for v in vals)}


def _partition_grid(data: RunData, facts: RunFacts, part: str, lost_p: set[Any], div_p: set[int],
                    acked_p: dict[int, list[Any]], final: dict[int, Any],
                    named: dict[str, set[int]]) -> Grid:
    brokers = sorted(
        b for b in data.logs if part in data.logs[b] or part in data.states.get(b, {})
    )
    logs = [{int(r["offset"]): r for r in data.logs[b].get(part, [])} for b in brokers]
    states = [data.states.get(b, {}).get(part, {}) for b in brokers]
    top = max([max(m, default=-1) for m in logs] + [max(final, default=-1)])
    ghosts = sorted(o for o in acked_p if o > top)[:MAX_GHOSTS]
    if lost_p:  # a witness without its offset: where the lost values were acknowledged
        named = {**named, "lost-write": named.get("lost-write", set())
                 | _lost_offsets(acked_p, lost_p)}
    must = set(div_p) | {o for offs in named.values() for o in offs}
    shown_must = set(sorted(o for o in must if 0 <= o <= top)[:MAX_ANOMALY_ROWS])
    # One cheap pass decides which offsets are worth a row (a chaos run has hundreds
    # of thousands); Row and Cell objects are made for those only.
    epochs: set[Any] = set()
    interesting = []
    for off in range(top + 1):
        present = set()
        lost_here = False
        for log in logs:
            r = log.get(off)
            if r is not None:
                present.add((r.get("epoch"), r.get("value")))
                lost_here = lost_here or r.get("value") in lost_p
        epochs.update(e for e, _ in present if e is not None)
        interesting.append(ANOMALY if off in shown_must or lost_here else
                           MARKED if len(present) > 1 else PLAIN)
    interesting += [ANOMALY] * len(ghosts)

    def make(i: int) -> Row:
        if i > top:
            off = ghosts[i - top - 1]
            cells = [ghost_cell(facts, b, part, off) for b in brokers]
            for c in cells:
                c.lost = c.present and c.value in lost_p
            return Row(off, cells, Cell(), ghost=True,
                       acked=[(v, v in lost_p) for v in acked_p[off]])
        cells = []
        for log, st in zip(logs, states, strict=True):
            r = log.get(i)
            cells.append(Cell() if r is None else Cell(
                r.get("epoch"), r.get("value"), True,
                isinstance(st.get("hw"), int) and i >= st["hw"], r.get("value") in lost_p))
        fv = final.get(i)
        present = {(c.epoch, c.value) for c in cells if c.present}
        return Row(i, cells, Cell(None, fv, fv is not None), differs=len(present) > 1,
                   divergent=i in div_p, acked=[(v, v in lost_p) for v in acked_p.get(i, [])])

    heads = [head(b, data.replicas.get(b), st) for b, st in zip(brokers, states, strict=True)]
    g = Grid(part, brokers, states, heads, epochs=sorted(epochs),
             anomalies={k: sorted(v) for k, v in sorted(named.items())},
             unshown=len({o for o in must if 0 <= o <= top} - shown_must))
    g.rows, g.hidden = _fold(interesting, make)
    return g


def _fold(interesting: list[int], make: Callable[[int], Row]) -> tuple[list[Row], int]:
    """The rows shown (made by `make(i)`) and how many are hidden: all of them up to
    MAX_ROWS, else every ANOMALY row (an anomaly's offset, a lost value, a ghost)
    with CONTEXT rows around it, then -- up to MAX_ROWS more -- the first rows
    (CONTEXT of them when there is an anomaly to show, else EDGE), the last EDGE,
    and CONTEXT rows around each MARKED one; folds stand for the rest."""
    n = len(interesting)
    if n <= MAX_ROWS:
        return [make(i) for i in range(n)], 0
    must: set[int] = set()
    for i, level in enumerate(interesting):
        if level == ANOMALY:
            must.update(range(max(i - CONTEXT, 0), min(i + CONTEXT + 1, n)))
    head = CONTEXT if must else EDGE
    extra = [*range(head), *range(n - EDGE, n),
             *(i for i, lv in enumerate(interesting) if lv == MARKED)]
    keep = set(must)
    for i in extra:  # in this order: the head, the tail, the marked rows
        if len(keep - must) >= MAX_ROWS:
            break
        if interesting[i] == MARKED:
            keep.update(range(max(i - CONTEXT, 0), min(i + CONTEXT + 1, n)))
        else:
            keep.add(i)
    out: list[Row] = []
    hidden = 0
    gap = 0
    for i in range(n):
        if i in keep:
            if gap:
                out.append(Row(-1, [], Cell(), gap=gap))
                gap = 0
            out.append(make(i))
        else:
            gap += 1
            hidden += 1
    if gap:
        out.append(Row(-1, [], Cell(), gap=gap))
    return out, hidden


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
