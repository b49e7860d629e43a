"""The history lines the report's story and timeline read (reports.story.facts),
picked by the check so that rendering a report does not read history.jsonl.

The story reads few ops of a history: the nemesis ops, the final reads, the
acknowledged sends at the offsets its anomalies name (a lost write's, a
divergence's) or, in a run without anomalies, where its runs of kept records
start and end (checker.reportrisk), and the sends a witness names by index.
Those lines are written as the history has them, with their index; a final
read's records are cut to the few the story and the timeline show (FIRST_RECORDS
and those at a lost write's offset), with the whole read's counts beside them.

Which sends are wanted, and each final read's cut records and counts, come from
one filter over the parsed history in Spark (picked, no shuffle); the lines are
then found in history.jsonl by a binary search of its bytes (read_ops) and
parsed -- a final read's without the records Spark already cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from contract import FINAL_PROCESS, HISTORY, NEMESIS_PROCESS, witness_part

FIRST_RECORDS = 12  # a final read's records the timeline lists (reports.render._details)
# The offsets of a run's story at most; beyond, the report reads the history itself.
MAX_OFFSETS = 20_000
_PREFIX = b'{"index":'  # every history line starts so (contract.history)


def wanted(anomalies: list[dict[str, Any]]
           ) -> tuple[dict[str, set[int]], dict[str, set[int]], set[int]]:
    """What the story asks of the history about a run's listed anomalies:
    partition -> the offsets whose acknowledged sends it reads; partition -> a lost
    write's offsets (of its final read); the indexes witnesses name."""
    offsets: dict[str, set[int]] = {}
    lost: dict[str, set[int]] = {}
    indexes: set[int] = set()
    for a in anomalies:
        w, part = witness_part(a)
        if a.get("kind") == "lost-write":
            if isinstance(w.get("acked_offset"), int):
                offsets.setdefault(part, set()).add(w["acked_offset"])
                lost.setdefault(part, set()).add(w["acked_offset"])
            i = (w.get("op") or {}).get("index")
            if isinstance(i, int):
                indexes.add(i)
        elif a.get("kind") == "divergence":
            offsets.setdefault(part, set()).update(
                e["offset"] for e in w.get("offsets") or []
                if isinstance(e, dict) and isinstance(e.get("offset"), int))
        elif a.get("kind") == "duplicate":
            indexes.update(s["index"] for s in w.get("sends") or []
                           if isinstance(s, dict) and isinstance(s.get("index"), int))
    return offsets, lost, indexes


class Picked(NamedTuple):
    """What one scan of the parsed history picks for the story of one run."""

    sends: set[int]  # the indexes of the acknowledged sends at the wanted offsets
    # index -> (a final read's records cut to what the story shows, trim's counts:
    # [records, distinct offsets, end offset] of the whole read, None if not cut)
    finals: dict[int, tuple[list[Any], list[int] | None]]


def picked(history: DataFrame, offsets: dict[str, dict[str, set[int]]],
           lost: dict[str, dict[str, set[int]]]) -> dict[str, Picked]:
    """run -> what the story reads of the parsed history, for the runs of
    ``offsets`` (run -> partition -> offsets whose acknowledged sends it reads);
    ``lost``: run -> partition -> a lost write's offsets, kept in its final read.

    One filter over the parsed history, no shuffle: the sends, and each final
    read cut in Spark to its first FIRST_RECORDS and the records at lost offsets
    with the whole read's counts -- so the driver never parses a final read's
    records (10,000 a poll, 3.3 s in Python at 10M operations)."""
    out = {u: Picked(set(), {}) for u in offsets}
    if not offsets:
        return out
    every = sorted({o for parts in offsets.values() for offs in parts.values() for o in offs})
    keep_at = sorted({o for parts in lost.values() for offs in parts.values() for o in offs})
    f, typ = F.col("f"), F.col("type")
    send = (f == "send") & (typ == "ok") & F.col("offset").isin(every)
    final = (F.col("process") == FINAL_PROCESS) & (f == "poll") & (typ == "ok")
    recs = F.coalesce(F.col("records"), F.array())
    pairs = F.filter(recs, lambda r: F.size(r) == 2)
    offs = F.transform(pairs, lambda r: r[0])
    n = F.size(recs)
    kept = F.slice(recs, 1, FIRST_RECORDS)
    if keep_at:
        kept = F.concat(kept, F.filter(F.slice(recs, FIRST_RECORDS + 1, F.greatest(n, F.lit(1))),
                                       lambda r: (F.size(r) == 2) & r[0].isin(keep_at)))
    rows = (history.filter((send | final) & F.col("run").isin(sorted(offsets)))
            .select("run", "topic", "partition", "offset", "index", final.alias("final"),
                    F.when(final, kept).alias("kept"),
                    F.when(final & (n > FIRST_RECORDS), F.array(
                        n, F.size(F.array_distinct(offs)),
                        F.coalesce(F.array_max(offs), F.lit(-1)) + 1)).alias("seen"))
            .collect())
    for r in rows:
        part = f"{r.topic}/{r.partition}"
        if r.final:
            at = lost.get(r.run, {}).get(part, set())
            cut = [list(x) for i, x in enumerate(r.kept) if i < FIRST_RECORDS or x[0] in at]
            out[r.run].finals[r["index"]] = (cut, r.seen)  # Row.index is a tuple method
        elif r.offset in offsets[r.run].get(part, ()):
            out[r.run].sends.add(r["index"])
    return out


def log_records(logs: DataFrame, offsets: dict[str, dict[str, set[int]]]
                ) -> dict[str, dict[str, dict[str, dict[str, list[Any]]]]]:
    """run -> partition -> broker -> offset -> [epoch, value]: the replicas' final
    records at ``offsets`` (run -> partition -> offsets), where the story looks
    at what a replica held at an anomaly's offset (RunFacts.log_record); each
    broker's first record there, as the report's search finds it."""
    every = sorted({o for parts in offsets.values() for offs in parts.values() for o in offs})
    out: dict[str, dict[str, dict[str, dict[str, list[Any]]]]] = {u: {} for u in offsets}
    if not every:
        return out
    rows = (logs.filter(F.col("offset").isin(every) & F.col("run").isin(sorted(offsets)))
            .select("run", "broker", "topic", "partition", "offset", "epoch", "value")
            .collect())
    for r in rows:
        part = f"{r.topic}/{r.partition}"
        if r.offset in offsets[r.run].get(part, ()):
            out[r.run].setdefault(part, {}).setdefault(r.broker, {}).setdefault(
                str(r.offset), [r.epoch, r.value])
    return out


def sparse_indexes(sparse: DataFrame) -> tuple[dict[str, set[int]], set[str]]:
    """run -> the indexes of its nemesis completions and final reads (the few rows
    of checker.sparse), and the runs with a consumer (a poll outside the final
    read). A consumer's polls are counted out in Spark -- one row per run, not
    one per poll (196k polls at 10M operations)."""
    f, typ, proc = F.col("f"), F.col("type"), F.col("process")
    story = ((proc == NEMESIS_PROCESS) & (typ != "invoke")) \
        | ((proc == FINAL_PROCESS) & (f == "poll") & (typ == "ok"))
    rows = (sparse.filter(story | ((f == "poll") & (proc != FINAL_PROCESS)))
            .select("run", F.when(story, F.col("index")).alias("index"))
            .distinct().collect())
    out: dict[str, set[int]] = {}
    consumers: set[str] = set()
    for run, index in rows:
        if index is not None:
            out.setdefault(run, set()).add(index)
        else:
            consumers.add(run)
    return out, consumers


def read_ops(run_dir: Path, indexes: set[int],
             parse: Callable[[bytes], Any] = json.loads) -> list[dict[str, Any]]:
    """The history lines of ``indexes``, in file order, each as ``parse`` reads it.

    A history is written one op a line, its indexes counting up from 0
    (contract.history), so each wanted line is found by a binary search of the
    file's bytes for the first line whose index is not below it, from the line
    found before it -- some thirty short reads a line, where a line-by-line or
    byte search reads the whole file (a 10M-operation history is 1.6 GB). A
    history where a line is not found that way is read line by line."""
    out: list[dict[str, Any]] = []
    with open(Path(run_dir) / HISTORY, "rb") as f:
        spans = _spans(f, sorted(indexes))
        lines = (_read_at(f, a, b) for a, b in spans) if spans is not None \
            else _scanned(f, indexes)
        for raw in lines:
            try:
                op = parse(raw)
            except ValueError:
                continue  # a torn last line
            if isinstance(op, dict):
                out.append(op)
    return out


_PROBE = 4096  # the bytes a probe of read_ops' search reads at first


def _line_from(f: BinaryIO, pos: int, size: int) -> tuple[int, int] | None:
    """(start, index) of the first line that starts at ``pos`` or after it; None
    at the end of the file; (start, -1) for a line that does not start as a
    history line does."""
    if pos > 0:
        f.seek(pos - 1)  # a line starts at pos if the byte before it ends one
        got, skip = b"", -1
        while skip < 0:
            more = f.read(max(_PROBE, len(got)))
            if not more:
                return None
            skip = more.find(b"\n")
            if skip >= 0:
                skip += len(got)
            got += more
        pos += skip
        head = got[skip + 1:]
    else:
        f.seek(0)
        head = b""
    if len(head) < 32:
        f.seek(pos + len(head))
        head += f.read(32)
    if pos >= size or not head:
        return None
    end = head.find(b",", len(_PREFIX))
    if not head.startswith(_PREFIX) or end < 0:
        return pos, -1
    try:
        return pos, int(head[len(_PREFIX):end])
    except ValueError:
        return pos, -1


def _line_end(f: BinaryIO, start: int) -> int:
    """Where the line starting at ``start`` ends (after its newline, or at the
    end of the file)."""
    f.seek(start)
    at = start
    while chunk := f.read(max(_PROBE, at - start)):
        nl = chunk.find(b"\n")
        if nl >= 0:
            return at + nl + 1
        at += len(chunk)
    return at


def _spans(f: BinaryIO, indexes: list[int]) -> list[tuple[int, int]] | None:
    """Where (byte offsets) the lines of ``indexes`` (ascending) are, each
    searched for after the one before it; None when one is not found so."""
    size = f.seek(0, 2)
    spans = []
    lo = 0  # a line starts here, and no wanted line before it
    for i in indexes:
        hi = size
        # The first line starting in [lo, hi] whose index is at least i: every
        # line start below lo has a smaller index, none is in (hi, first after hi).
        while lo < hi:
            mid = (lo + hi) // 2
            got = _line_from(f, mid, size)
            if got is None or got[1] >= i:
                hi = mid
            elif got[1] < 0:
                return None
            else:
                lo = got[0] + 1
        got = _line_from(f, lo, size)
        if got is None or got[1] != i:
            return None
        end = _line_end(f, got[0])
        spans.append((got[0], end))
        lo = end
    return spans


def _read_at(f: BinaryIO, start: int, end: int) -> bytes:
    f.seek(start)
    return f.read(end - start)


def _scanned(f: BinaryIO, indexes: set[int]) -> Iterator[bytes]:
    """The lines of ``indexes`` of a history read line by line."""
    f.seek(0)
    for line in f:
        if not line.startswith(_PREFIX):
            continue
        end = line.find(b",", len(_PREFIX))
        try:
            if int(line[len(_PREFIX):end]) in indexes:
                yield line
        except ValueError:
            continue  # a torn last line


_RECORDS = re.compile(rb'"records"\s*:\s*\[')


def _without_records(raw: bytes, n: int) -> bytes | None:
    """The line ``raw`` with its records (``n`` of them, as Spark parsed them)
    written as an empty list; None where the line is not written so simply."""
    m = _RECORDS.search(raw)
    if m is None:
        return None
    a = m.end() - 1
    q = raw.find(b'"', a)  # the next key: records hold numbers only
    b = raw.rfind(b"]", a, len(raw) if q < 0 else q)
    body = raw[a:b + 1]
    if b < 0 or body.count(b"[") != n + 1 or body.count(b"]") != n + 1:
        return None
    return raw[:a] + b"[]" + raw[b + 1:]


def _parse_cut(finals: dict[int, tuple[list[Any], list[int] | None]]
               ) -> Callable[[bytes], Any]:
    """read_ops' parse of a story's lines: a final read Spark cut (Picked.finals)
    gets its cut records, and its line is parsed without the rest."""
    def parse(raw: bytes) -> Any:
        try:
            i = int(raw[len(_PREFIX):raw.find(b",", len(_PREFIX))])
        except ValueError:
            i = None
        kept, seen = finals.get(i, (None, None))
        short = _without_records(raw, seen[0]) if seen is not None else None
        op = json.loads(short if short is not None else raw)
        if isinstance(op, dict) and seen is not None and "records" in op:
            op["records"] = kept
        return op
    return parse


def story_inputs(run_dir: Path, anomalies: list[dict[str, Any]], sparse_ix: set[int],
                 picks: Picked, logs: dict[str, dict[str, dict[str, list[Any]]]]
                 ) -> dict[str, Any]:
    """report-inputs.json "story" of one run: {"ops": the lines, "final_records":
    index -> the whole read's counts of each cut final read (Picked.finals),
    "logs": log_records'}."""
    ops = read_ops(run_dir, sparse_ix | picks.sends | wanted(anomalies)[2],
                   _parse_cut(picks.finals))
    trimmed = {str(i): seen for i, (_, seen) in picks.finals.items() if seen is not None}
    return {"ops": ops, "final_records": trimmed, "logs": logs}
