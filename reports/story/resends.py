"""The story of a producer's resends: a duplicate a resend left in the log, and the
resends an idempotent producer's leader recognised (KIP-98).

A real client resends a batch whose answer it never got (its request timed out,
or the leader died with the connection). Nothing in a run records the resend
itself: without idempotence it shows as a second copy of the value, in the final
log and the replica logs (offset and epoch of each copy); with idempotence, as
the leader's producer-duplicate event (broker.partition). Both are told from
those facts only -- the copies' epochs name the leaders that wrote them.
"""

from __future__ import annotations

from typing import Any

from reports.story.facts import Election, int_or, run_features, time_ns
from reports.story.lines import Cause, Step, StoryLines
from reports.story.words import rec_text, value_name
from reports.units import offsets_phrase

MAX_RECOGNISED = 5  # recognised resends told one by one; the rest are counted


def client_resend(b: StoryLines, w: dict[str, Any], part: str,
                  oks: list[dict[str, Any]]) -> list[Step]:
    """A value at two or more offsets with no network duplicate: the producer sent
    it again. Each later copy is told as the leader of its epoch appending it a
    second time, after the election that made it leader if the epoch changed.
    `oks`: the value's acknowledged sends."""
    f = b.f
    v = w.get("value")
    at = sorted((x["offset"], x.get("epoch")) for x in w.get("at") or []
                if isinstance(x, dict) and isinstance(x.get("offset"), int))
    client = next((str(o["client"]) for o in oks if o.get("client")), None)
    (o1, e1), steps = at[0], []
    first = f.election_of(part, e1)
    for o, e in at[1:]:
        el = f.election_of(part, e)
        if el is not None and e != e1:
            ln = b.election_line(el)
            ln.still[o1] = v
            steps.append(Step(ln, f"{el.leader} elected holding the first copy"))
        ack = next((op for op in oks if op.get("offset") == o), None)
        t = time_ns(ack.get("time")) if ack is not None else (el.time if el else None)
        node = el.leader if el is not None else None
        ln = b.line(f"resend:{part}:{o}", "resend", None, time=t, node=node, part=part)
        ln.values.update({o1: v, o: v})
        ln.said = _resend_text(f, v, node, (o, e), (o1, e1, first), client)
        steps.append(Step(ln, f"{node or 'the leader'} appends the resend"))
    return steps


def _resend_text(f: Any, v: Any, node: str | None, copy: tuple[int, Any],
                 first: tuple[int, Any, Election | None], client: str | None) -> str:
    (o, e), (o1, e1, el1) = copy, first
    who = f"the producer ({client})" if client else "the producer"
    by = f" by {el1.leader}" if el1 is not None else ""
    text = (f"{(node or 'The leader')} appends {value_name(v, f)} a second time, at offset "
            f"{o}" + (f" (epoch {e})" if e is not None else "") + f": {who} sent it again, "
            f"never having had an answer to the send written at offset {o1}"
            + (f" in epoch {e1}" if e1 is not None else "") + f"{by}.")
    if _idempotence(f):
        return text + (" The producer is not idempotent (enable.idempotence off), so nothing "
                       "tells the resend from a new record; an idempotent producer's batch "
                       "carries its producer id and sequence numbers, and the leader answers "
                       "a resend with the offsets it holds (KIP-98, Kafka 0.11.0).")
    return text + (f" Kafka {f.data.meta.get('protocol')} has no idempotent producer (KIP-98 "
                   "came in 0.11.0), so nothing tells the resend from a new record.")


def recognised_causes(b: StoryLines) -> list[Cause]:
    """One cause per resend an idempotent producer's leader recognised (its
    producer-duplicate event): the election that sent the producer to that leader,
    the recognition, the acknowledgement with the original offsets."""
    f = b.f
    events = sorted((it for its in f.recognised.values() for it in its),
                    key=lambda it: time_ns(it.time))
    causes = []
    for i, it in enumerate(events[:MAX_RECOGNISED]):
        part = f"{it.get('topic')}/{it.get('partition')}"
        o, last = int_or(it.get("offset"), -1), int_or(it.get("last_offset"), -1)
        held = it.get("held")
        rec = (held[0], held[1]) if isinstance(held, list) and len(held) == 2 else None
        steps = []
        el = f.election_of(part, it.get("leader_epoch"))
        # A new leader holding the batch an earlier one wrote: its election is why
        # the resend came to it (else the leader itself was resent to, after a
        # request that timed out).
        if el is not None and rec is not None and rec[0] != el.epoch:
            ln = b.election_line(el)
            ln.still[o] = rec[1]
            steps.append(Step(ln, f"{el.leader} elected holding it"))
        ln = b.line(f"recognised:{it.id}", "recognised", it, node=it.node, part=part)
        ln.said = _recognised_text(f, it, part, o, last, rec, why=i == 0)
        if i == MAX_RECOGNISED - 1 and len(events) > MAX_RECOGNISED:
            ln.said += (f" {len(events) - MAX_RECOGNISED} more resends were recognised in "
                        "this run (the timeline lists each producer-duplicate event).")
        steps.append(Step(ln, f"{it.node} recognises the resend"))
        ack = f.ack_at(part, o, None, time_ns(it.time) - 1, None)
        ack_ln = b.ack_line(ack, part) if ack is not None else None
        if ack_ln is not None:
            steps.append(Step(ack_ln, "acknowledged with the first offset"))
        what = value_name(rec[1], f) if rec is not None else f"offset {o}"
        causes.append(Cause("recognised", part, f"{what}, resent to {it.node}, stored once",
                            list(range(o, max(o, last) + 1)), steps))
    return causes


def _recognised_text(f: Any, it: Any, part: str, o: int, last: int,
                     rec: tuple[Any, Any] | None, why: bool) -> str:
    """The recognition; `why` (the first one told): how a leader knows (KIP-98)."""
    seq, n = int_or(it.get("base_sequence"), 0), int_or(it.get("count"), 1)
    seqs = f"sequence {seq}" if n == 1 else f"sequences {seq}–{seq + n - 1}"
    where = f"offset {o}" if last <= o else offsets_phrase(range(o, last + 1))
    writer = ""
    if rec is not None:
        el = f.election_of(part, rec[0])
        by = ("" if el is None else f", written by {el.leader}" if el.leader != it.node
              else ", which it wrote itself: the first attempt's answer never reached the "
                   "producer")
        writer = f" ({rec_text(rec, f)}{by})"
    return (f"{it.node} recognises a resend: producer {it.get('producer_id')} (epoch "
            f"{it.get('producer_epoch')}) sends {seqs} again, a batch it holds at {where}"
            f"{writer}. It answers with that offset and appends nothing"
            + (": the producer's last batches and their sequence numbers are part of the "
               "log, so a new leader knows them (idempotent producer, KIP-98, Kafka 0.11.0)."
               if why else "."))


def _idempotence(f: Any) -> bool:
    """Whether the run's protocol has idempotent producers (an unknown one: yes)."""
    feats = run_features(f.data.meta.get("protocol"))
    return feats is None or bool(feats.idempotence)

