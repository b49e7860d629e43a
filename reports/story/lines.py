"""The story as data: its lines (one protocol fact each, linked to a timeline row),
the causes that tie lines to an anomaly, and the story they make up. The builder
(reports.story.builder) fills them in through StoryLines, which the causes built
beside it (reports.story.kept, reports.story.resends) share; the words (reports.story.words) compose
each line's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reports.story.facts import Election, Item, RunFacts, Window, time_ns

MAX_LINES = 40  # story lines shown at once; the rest fold


@dataclass
class Line:
    """One fact of the story; its text is composed once every anomaly has added to it."""

    key: str
    time: int | None
    kind: str  # ack | fault | halt | truncate | power-cycle | election | final | kept | epoch
    #            | resend | recognised
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
    # kept, epoch (reports.story.kept), a producer's resend and a recognised one
    # (reports.story.resends): the sentence, composed there
    said: str = ""

    @property
    def ref(self) -> str | None:
        return self.item.id if self.item is not None else None


@dataclass
class Step:
    line: Line
    label: str
    own_ack: bool = False  # the lost write's own acknowledgement (not part of its chain)


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
        return bool(self.kinds & {"election", "truncate", "power-cycle", "fault", "resend",
                                  "halt", "kept", "epoch", "recognised"})


@dataclass
class Story:
    lines: list[Line]
    causes: list[Cause]
    uncaused: list[str]  # anomaly kinds the story does not explain, with counts
    rules: list[tuple[str, str]] = field(default_factory=list)  # the truncation rules named
    # a valid run's records at risk and why none was lost, in a sentence (kept.gist)
    gist: str | None = None



class StoryLines:
    """One story's lines by key, made once each: what the builder and the cause
    modules beside it (kept, resends) add lines through."""

    def __init__(self, facts: RunFacts) -> None:
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
        t = time_ns(op.get("time"))
        leader = self.f.leader_at(part, t)
        ln.acks = op.get("acks")
        ln.epoch = leader.epoch if leader is not None and leader.leader == ln.node else None
        ln.isr = self.f.isr_at(part, t)
        return ln

    def election_line(self, el: Election) -> Line:
        return self.line(f"el:{el.item.id}", "election", el.item, node=el.leader, part=el.part)
