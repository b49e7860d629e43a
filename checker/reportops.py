"""The history lines the report's story and timeline read (reports.story.facts),
picked by the check so that rendering a report does not read history.jsonl.

The story reads few ops of a history: the nemesis ops, the final reads, the
acknowledged sends at the offsets its anomalies name (a lost write's, a
divergence's) or, in a run without anomalies, where its runs of kept records
start and end (checker.reportrisk), and the sends a witness names by index.
Those lines are written as the history has them, with their index; a final
read's records are cut to the few the story and the timeline show (FIRST_RECORDS
and those at a lost write's offset), with the whole read's counts beside them.

Which sends are wanted is decided in Spark over the parsed history (a filter on
the offsets, no shuffle); their lines are then found in history.jsonl by a byte
search for each line's start, in one forward pass of the driver (read_ops).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from contract import FINAL_PROCESS, HISTORY, NEMESIS_PROCESS, witness_part

FIRST_RECORDS = 12  # a final read's records the timeline lists (reports.render._details)
# The offsets of a run's story at most; beyond, the report reads the history itself.
MAX_OFFSETS = 20_000
_PREFIX = b'{"index":'  # every history line starts so (workloads.history)


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


def send_indexes(history: DataFrame, offsets: dict[str, dict[str, set[int]]]
                 ) -> dict[str, set[int]]:
    """run -> the indexes of the acknowledged sends at ``offsets`` (run ->
    partition -> offsets): one filter over the parsed history, no shuffle."""
    every = sorted({o for parts in offsets.values() for offs in parts.values() for o in offs})
    out: dict[str, set[int]] = {u: set() for u in offsets}
    if not every:
        return out
    rows = (history.filter((F.col("f") == "send") & (F.col("type") == "ok")
                           & F.col("offset").isin(every) & F.col("run").isin(sorted(offsets)))
            .select("run", "topic", "partition", "offset", "index").collect())
    for r in rows:
        if r.offset in offsets[r.run].get(f"{r.topic}/{r.partition}", ()):
            out[r.run].add(r["index"])  # Row.index is a tuple method
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
    of checker.sparse), and the runs with a consumer (a poll outside the final read)."""
    f, typ, proc = F.col("f"), F.col("type"), F.col("process")
    rows = sparse.filter(
        ((proc == NEMESIS_PROCESS) & (typ != "invoke"))
        | ((proc == FINAL_PROCESS) & (f == "poll") & (typ == "ok"))
        | ((f == "poll") & (proc != FINAL_PROCESS))
    ).select("run", "index", (proc == NEMESIS_PROCESS) | (proc == FINAL_PROCESS)).collect()
    out: dict[str, set[int]] = {}
    consumers: set[str] = set()
    for run, index, story in rows:
        if story:
            out.setdefault(run, set()).add(index)
        else:
            consumers.add(run)
    return out, consumers


def read_ops(run_dir: Path, indexes: set[int],
             each: Callable[[dict[str, Any]], None] = lambda op: None) -> list[dict[str, Any]]:
    """The history lines of ``indexes``, in file order, as the history has them;
    ``each`` is called on each as it is read (to cut it before the next is parsed).

    A history is written one op a line, its indexes counting up from 0
    (workloads.history), so each wanted line is found by searching the file for its
    start from the last one found (a byte search in blocks, not a line-by-line read:
    a 10M-operation history's lines take seconds in Python), then read alone. A
    history where a line is not found that way is read line by line."""
    out: list[dict[str, Any]] = []
    with open(Path(run_dir) / HISTORY, "rb") as f:
        spans = _spans(f, sorted(indexes))
        lines = (_read_at(f, a, b) for a, b in spans) if spans is not None \
            else _scanned(f, indexes)
        for raw in lines:
            try:
                op = json.loads(raw)
            except ValueError:
                continue  # a torn last line
            if isinstance(op, dict):
                each(op)
                out.append(op)
    return out


_BLOCK = 16 << 20  # read_ops' search reads the history in blocks of this many bytes


def _spans(f: BinaryIO, indexes: list[int]) -> list[tuple[int, int]] | None:
    """Where (byte offsets) the lines of ``indexes`` (ascending) are, searched
    forward; None when one is not found after the one before it."""
    f.seek(0)
    buf = b"\n" + f.read(_BLOCK)  # as if a line ended before the first
    base = -1  # the file offset of buf[0]
    pos = 0  # where the next search starts in buf

    def more() -> bool:
        nonlocal buf
        got = f.read(_BLOCK)
        buf += got
        return bool(got)

    spans = []
    for i in indexes:
        needle = b"\n%s%d," % (_PREFIX, i)
        at = buf.find(needle, pos)
        while at < 0:
            # Keep what may hold the start of a needle cut by the block's end.
            cut = max(pos, len(buf) - len(needle))
            base, buf, pos = base + cut, buf[cut:], 0
            if not more():
                return None
            at = buf.find(needle)
        end = buf.find(b"\n", at + 1)
        while end < 0 and more():
            end = buf.find(b"\n", at + 1)
        pos = len(buf) if end < 0 else end
        spans.append((base + at + 1, base + pos))
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


def trim_final(op: dict[str, Any], offsets: set[int]) -> list[int] | None:
    """Cut a final read's records to the first FIRST_RECORDS and those at
    ``offsets`` (in place); return the whole read's [records, distinct offsets,
    end offset] (None: nothing to cut)."""
    recs = op.get("records")
    if not isinstance(recs, list) or len(recs) <= FIRST_RECORDS:
        return None
    pairs = [r for r in recs if isinstance(r, list) and len(r) == 2]
    by_off = {r[0] for r in pairs}
    seen = [len(recs), len(by_off), max(by_off, default=-1) + 1]
    op["records"] = recs[:FIRST_RECORDS] + [
        r for r in recs[FIRST_RECORDS:] if isinstance(r, list) and len(r) == 2
        and r[0] in offsets]
    return seen


def story_inputs(run_dir: Path, anomalies: list[dict[str, Any]], sparse_ix: set[int],
                 send_ix: set[int], lost: dict[str, set[int]],
                 logs: dict[str, dict[str, dict[str, list[Any]]]]) -> dict[str, Any]:
    """report-inputs.json "story" of one run: {"ops": the lines, "final_records":
    index -> trim_final's counts of each cut final read, "logs": log_records'}."""
    trimmed = {}

    def cut(op: dict[str, Any]) -> None:
        if op.get("process") == FINAL_PROCESS:
            seen = trim_final(op, lost.get(f"{op.get('topic')}/{op.get('partition')}", set()))
            if seen is not None:
                trimmed[str(op.get("index"))] = seen

    ops = read_ops(run_dir, sparse_ix | send_ix | wanted(anomalies)[2], cut)
    return {"ops": ops, "final_records": trimmed, "logs": logs}
