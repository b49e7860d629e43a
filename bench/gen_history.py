"""Synthetic run directories of any size with anomalies injected at known places.

    python bench/gen_history.py OUT_DIR --ops 1000000 [--inject all|none|kind,...] [--seed N]
    python bench/gen_history.py OUT_DIR --ops 100000000 --runs 10 [--jobs 2] [--seed N]

Writes a run directory (docs/run-directory.md, format 1) with about --ops history operations:
producers sending unique values, two consumers reading everything, a final read,
two replicas. Each injected anomaly is recorded in OUT_DIR/injected.json with the
values/offsets a checker must report, so tests and benchmarks can compare.

With --runs R, OUT_DIR is a batch (a night is many runs): R run directories
OUT_DIR/run-000 ... of --ops / R operations each, run k with seed --seed + k and
its own injected.json, written by --jobs worker processes.
OUT_DIR/gen-params.json records the parameters, and whether the batch is
complete (what bench/bench_checker.py compares to reuse a batch). Run again with
the same parameters, an interrupted batch resumes: its complete runs are kept.

Streams to disk: memory stays flat at any size (~22 MB a process). Progress
(runs done, operations, ops/s) goes to stderr every few seconds unless --quiet.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from contract import ANOMALY_KINDS, EVENTS, HISTORY, LOG, REPLICAS, RUN_JSON, STATE

KINDS = ANOMALY_KINDS  # one of each is injected with --inject all
BATCH = 100
T, P = "t", 0
BASE = 1_000_000  # the value committed at offset o is BASE + o, unless injected
FINAL_PAGE = 10_000  # records per poll of the final read
PARAMS = "gen-params.json"  # a batch's parameters, and whether it is complete
PROGRESS_S = 5.0

# The bulk lines are written from templates and f-strings, not json.dumps per
# line (1M operations: 14-17 -> 1.4 s of CPU). The same bytes as
# json.dumps(separators=(",", ":")) would write; tests/test_gen_history.py checks.
_TP = f'"topic":{json.dumps(T)},"partition":{P}'
_POLL_INVOKE = '{{"index":{},"time":{},"process":{},"type":"invoke","f":"poll",' + _TP + \
    ',"offset":{}}}\n'
_POLL_OK = '{{"index":{},"time":{},"process":{},"type":"ok","f":"poll",' + _TP + \
    ',"offset":{},"records":{},"hw":{},"node":"A","epoch":0}}\n'


class Writer:
    """history.jsonl, one operation at a time; ``done(k)`` is told every ~64k ops."""

    def __init__(self, path: Path, done: Callable[[int], None] | None = None) -> None:
        self.fh = path.open("w", buffering=1 << 20)
        self.index = 0
        self.time = 0
        self.done = done
        self.reported = 0

    def _tick(self) -> int:
        self.time += 1000 + (self.index * 7919) % 50_000
        self.index += 1
        return self.time

    def _progress(self) -> None:
        if self.done is not None and self.index - self.reported >= 1 << 16:
            self.done(self.index - self.reported)
            self.reported = self.index

    def op(self, process: Any, type_: str, f: str, **kw: Any) -> None:
        """Any operation, through json.dumps: for the few that are not bulk."""
        index = self.index
        rec = {"index": index, "time": self._tick(), "process": process, "type": type_,
               "f": f, **kw}
        self.fh.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def send(self, process: int, value: int, result: str, error: str) -> None:
        """A send that did not succeed (``result`` fail or info, with ``error``)."""
        base = {"topic": T, "partition": P, "value": value, "acks": "all"}
        self.op(process, "invoke", "send", **base)
        self.op(process, result, "send", **base, error=error)

    def sends(self, lo: int, hi: int, acked_at: dict[int, int]) -> None:
        """The acked sends of offsets lo..hi-1, by processes 0-7 in turn, each
        carrying the value BASE + offset and acked at acked_at.get(offset, offset).
        Inline f-strings: the bulk of the file (str.format is ~2x slower)."""
        index, t, parts = self.index, self.time, []
        for i in range(lo, hi):
            p, v = i % 8, BASE + i
            t += 1000 + (index * 7919) % 50_000
            parts.append(f'{{"index":{index},"time":{t},"process":{p},"type":"invoke",'
                         f'"f":"send",{_TP},"value":{v},"acks":"all"}}\n')
            index += 1
            t += 1000 + (index * 7919) % 50_000
            parts.append(f'{{"index":{index},"time":{t},"process":{p},"type":"ok",'
                         f'"f":"send",{_TP},"value":{v},"acks":"all",'
                         f'"offset":{acked_at.get(i, i)}}}\n')
            index += 1
        self.index, self.time = index, t
        self.fh.write("".join(parts))
        self._progress()

    def poll(self, process: Any, offset: int, records: str, hw: int) -> None:
        """A poll served by the one leader, A, in leader epoch 0 (as the replicas
        say); ``records`` is its JSON text (records_json), made once for both consumers."""
        i, proc = self.index, json.dumps(process)
        self.fh.write(_POLL_INVOKE.format(i, self._tick(), proc, offset)
                      + _POLL_OK.format(i + 1, self._tick(), proc, offset, records, hw))
        self._progress()

    def close(self) -> None:
        self.fh.close()
        if self.done is not None and self.index > self.reported:
            self.done(self.index - self.reported)


def records_json(pairs: list[tuple[int, int]] | range, at: Callable[[int], int],
                 plain: bool = False) -> str:
    """``[[offset, value], ...]`` as JSON text, for the offsets in ``pairs`` (a
    range: each offset's value from ``at``, or BASE + offset if ``plain``) or
    given pairs."""
    if not isinstance(pairs, range):
        return json.dumps([list(p) for p in pairs], separators=(",", ":"))
    if plain:
        return "[" + ",".join([f"[{o},{o + BASE}]" for o in pairs]) + "]"
    return "[" + ",".join([f"[{o},{at(o)}]" for o in pairs]) + "]"


def generate(out: Path, ops: int, inject: set[str], seed: int = 1,
             done: Callable[[float], None] | None = None) -> list[dict[str, Any]]:
    """Write one run directory at ``out``; return what was injected. ``done`` is
    told what fraction more of the run was written, every ~64k operations or
    10k records."""
    rnd = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    # ~2 ops per send, plus 2 consumers × 2 ops per BATCH records.
    n = max(20, int(ops / (2 + 4 / BATCH)))
    # Offset o commits BASE + o and its send was acked at o, but where injected:
    # the exceptions are kept, not the n values (flat memory at any size).
    committed: dict[int, int] = {}  # offset -> the value committed there instead
    acked_at: dict[int, int] = {}  # value's offset -> the offset its send was acked at
    replica_b: dict[int, int] = {}  # offset -> B's value there, where B differs
    extra_sends: list[tuple[int, str, str]] = []  # (value, result, error)
    extra_polls: list[tuple[Any, int, list[tuple[int, int]], int]] = []
    injected: list[dict[str, Any]] = []
    spot = iter(rnd.sample(range(5, n - 5), 6))
    tail: list[int] = []

    def final(o: int) -> int:
        return committed.get(o, BASE + o) if o < n else tail[o - n]

    def plain(offsets: range, changed: dict[int, int]) -> bool:
        """Whether every offset in ``offsets`` holds BASE + offset (the fast path)."""
        return offsets.stop <= n and not any(o in offsets for o in changed)

    if "lost-write" in inject:
        k = next(spot)
        committed[k] = replica_b[k] = 9_000_001  # another (unacked) value now at k
        extra_sends.append((9_000_001, "info", "timeout"))
        injected.append({"kind": "lost-write", "value": BASE + k, "offset": k})
    if "divergence" in inject:
        d = next(spot)
        replica_b[d] = 9_000_002
        injected.append({"kind": "divergence", "offset": d, "replicas": ["A", "B"]})
    if "inconsistent-offset" in inject:
        j = next(spot)
        acked_at[j] = j + 1_000_000_000  # acked at an offset it never had
        injected.append({"kind": "inconsistent-offset", "value": final(j),
                         "acked_offset": acked_at[j], "committed_at": j})
    if "duplicate" in inject:
        m = next(spot)
        tail.append(final(m))
        injected.append({"kind": "duplicate", "value": final(m), "offsets": [m, n + len(tail) - 1]})
    if "aborted-read" in inject:
        tail.append(9_000_003)
        extra_sends.append((9_000_003, "fail", "NOT_ENOUGH_REPLICAS"))
        off = n + len(tail) - 1
        extra_polls.append((80, off, [(off, 9_000_003)], off + 1))
        injected.append({"kind": "aborted-read", "value": 9_000_003, "offset": off})
    top = n + len(tail)
    if "uncommitted-read" in inject:
        extra_sends.append((9_000_004, "info", "timeout"))
        extra_polls.append((81, top, [(top, 9_000_004)], top + 1))
        injected.append({"kind": "uncommitted-read", "value": 9_000_004, "offset": top})
    if "nonmonotonic-poll" in inject:
        extra_polls += [(82, 5, [(5, final(5)), (6, final(6))], 7), (82, 5, [(5, final(5))], 7)]
        injected.append({"kind": "nonmonotonic-poll", "process": "82", "offset": 5})
    if "poll-skip" in inject:
        extra_polls += [(83, 0, [(0, final(0))], 1), (83, 3, [(3, final(3))], 4)]
        injected.append({"kind": "poll-skip", "process": "83", "skipped": [1, 2]})
    if "hw-regression" in inject:
        extra_polls += [(84, 0, [(0, final(0))], 10), (84, 1, [(1, final(1))], 5)]
        injected.append({"kind": "hw-regression", "process": "84", "hw": [10, 5]})

    # Progress by the records formatted: per offset, two send lines (3/6 of the
    # work, as the history's operations go), one consumer record, one record of
    # the final read (1/6) and two replicas' log lines (2/6).
    def share(part: float, total: int) -> Callable[[int], None]:
        return lambda k: done(part * k / total) if done is not None else None

    w = Writer(out / HISTORY, share(3 / 6, 2 * n + 4 * (n // BATCH)))
    for lo in range(0, n, BATCH):
        hi = min(n, lo + BATCH)
        w.sends(lo, hi, acked_at)  # each carries its original value
        if hi - lo == BATCH:  # two consumers follow the committed log
            recs = records_json(range(lo, hi), final, plain(range(lo, hi), committed))
            w.poll(100, lo, recs, hi)
            w.poll(101, lo, recs, hi)
    for v, result, err in extra_sends:
        w.send(9, v, result, err)
    for proc, off, pairs, hw in extra_polls:
        w.poll(proc, off, records_json(pairs, final), hw)
    w.op("nemesis", "info", "kill", value=["B"])
    w.op("nemesis", "info", "start", value=["B"])
    for start in range(0, top, FINAL_PAGE):  # the final read, paginated
        page = range(start, min(top, start + FINAL_PAGE))
        w.poll("final", start, records_json(page, final, plain(page, committed)), top)
        share(1 / 6, top)(len(page))
    w.close()

    def at_b(o: int) -> int:
        return replica_b.get(o, final(o))

    for broker, at, role in (("A", final, "leader"), ("B", at_b, "follower")):
        d = out / REPLICAS / broker
        d.mkdir(parents=True, exist_ok=True)
        with (d / LOG).open("w", buffering=1 << 20) as fh:
            for start in range(0, top, FINAL_PAGE):
                page = range(start, min(top, start + FINAL_PAGE))
                if plain(page, replica_b):  # replica_b's offsets include committed's
                    fh.write("".join([f'{{{_TP},"offset":{o},"epoch":0,"value":{o + BASE}}}\n'
                                      for o in page]))
                else:
                    fh.write("".join([f'{{{_TP},"offset":{o},"epoch":0,"value":{at(o)}}}\n'
                                      for o in page]))
                share(1 / 6, top)(len(page))
        state = {
            "node": broker,
            "partitions": [
                {
                    "topic": T,
                    "partition": P,
                    "role": role,
                    "leader": "A",
                    "leader_epoch": 0,
                    "leo": top,
                    "hw": top,
                    "hw_checkpoint": top,
                    "isr": ["A", "B"],
                    "epoch_cache": [[0, 0]],
                }
            ],
        }
        (d / STATE).write_text(json.dumps(state))
    (out / EVENTS).write_text(
        json.dumps(
            {
                "time": 1,
                "node": "ctl",
                "type": "leader-elected",
                "topic": T,
                "partition": P,
                "leader": "A",
                "epoch": 0,
            }
        )
        + "\n"
    )
    meta = {
        "run_id": out.name,
        "format_version": 1,
        "scenario": None,
        "protocol": "latest",
        "backend": "synthetic",
        "seed": seed,
        "expect": [],
        "cluster": {"brokers": ["A", "B"], "topics": [T], "replication_factor": 2},
        "workload": {"ops": w.index, "injected": sorted(inject)},
    }
    (out / RUN_JSON).write_text(json.dumps(meta, indent=2) + "\n")
    # Last: a run with its injected.json is complete (generate_batch resumes past it).
    (out / "injected.json").write_text(json.dumps(injected, indent=2) + "\n")
    return injected


def run_name(k: int) -> str:
    return f"run-{k:03d}"


def batch_params(ops: int, runs: int, inject: set[str], seed: int) -> dict[str, Any]:
    """What OUT/gen-params.json holds for a batch of these parameters (with
    ``"complete": true`` once every run is written)."""
    return {"ops": ops, "runs": runs, "inject": sorted(inject), "seed": seed,
            "runs_ops": ops // runs}


def _read_params(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / PARAMS).read_text())
    except (OSError, ValueError):
        return None


def batch_complete(out: Path, params: dict[str, Any]) -> bool:
    """Whether OUT is a complete batch of ``params`` (batch_params)."""
    return _read_params(out) == {**params, "complete": True}


def _run_complete(run: Path, seed: int) -> bool:
    try:
        return (run / "injected.json").is_file() and \
            json.loads((run / RUN_JSON).read_text())["seed"] == seed
    except (OSError, ValueError, KeyError):
        return False


_written: Any = None  # the batch's shared count of operations written, in a worker


def _init_worker(counter: Any) -> None:
    global _written
    _written = counter


def _count(k: float) -> None:
    with _written.get_lock():
        _written.value += k


def _generate_counted(out: Path, ops: int, inject: set[str], seed: int) -> int:
    return len(generate(out, ops, inject, seed, _count))


class Progress:
    """One stderr line every PROGRESS_S: runs done, operations written, ops/s."""

    def __init__(self, total: int, runs: int, quiet: bool) -> None:
        self.total, self.runs, self.quiet = total, runs, quiet
        self.t0 = self.last = time.monotonic()
        self.ops = 0

    def show(self, ops: int, runs_done: int, force: bool = False) -> None:
        self.ops = ops
        now = time.monotonic()
        if self.quiet or not (force or now - self.last >= PROGRESS_S):
            return
        self.last = now
        rate = ops / max(now - self.t0, 1e-9)
        eta = (self.total - ops) / rate if rate else 0.0
        print(f"gen_history: {runs_done}/{self.runs} runs, {ops / 1e6:,.1f}M/"
              f"{self.total / 1e6:,.1f}M ops, {rate / 1e3:,.0f}k ops/s"
              + ("" if force else f", ~{eta:,.0f} s to go"), file=sys.stderr, flush=True)


def generate_batch(out: Path, ops: int, runs: int, inject: set[str], seed: int = 1,
                   jobs: int = 1, quiet: bool = False) -> list[Path]:
    """Write ``runs`` run directories OUT/run-000 ... of ops // runs operations
    each (run k: seed + k), ``jobs`` at a time in worker processes; keep those
    already complete in an interrupted batch of the same parameters. Return
    the run directories."""
    params = batch_params(ops, runs, inject, seed)
    out.mkdir(parents=True, exist_ok=True)
    old = _read_params(out)
    resume = old is not None and {**old, "complete": False} == {**params, "complete": False}
    (out / PARAMS).write_text(json.dumps({**params, "complete": False}, indent=2) + "\n")
    each = params["runs_ops"]
    paths = [out / run_name(k) for k in range(runs)]
    # Runs of an interrupted batch of the same parameters are kept; any others
    # are written again.
    todo = [k for k in range(runs) if not (resume and _run_complete(paths[k], seed + k))]
    progress = Progress(each * len(todo), runs, quiet)
    if runs > len(todo) and not quiet:
        print(f"gen_history: {runs - len(todo)} complete runs kept", file=sys.stderr)
    counter = multiprocessing.Value("d", 0.0)  # runs written, in fractions
    with ProcessPoolExecutor(max_workers=max(1, jobs), initializer=_init_worker,
                             initargs=(counter,)) as pool:
        pending: set[Future[int]] = {pool.submit(_generate_counted, paths[k], each, inject,
                                                 seed + k) for k in todo}
        while pending:
            finished, pending = wait(pending, timeout=PROGRESS_S, return_when=FIRST_COMPLETED)
            for f in finished:
                f.result()  # a worker's error ends the batch here
            progress.show(round(counter.value * each), runs - len(pending))
    progress.show(round(counter.value * each), runs, force=True)
    (out / PARAMS).write_text(json.dumps({**params, "complete": True}, indent=2) + "\n")
    return paths


def _kinds(spec: str) -> set[str]:
    return set(KINDS) if spec == "all" else set() if spec == "none" else set(spec.split(","))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--ops", type=int, default=1000, help="operations in all (of the batch)")
    ap.add_argument("--inject", default="all", help="all, none, or a comma list of kinds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, help="write a batch of this many runs under OUT")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes for --runs")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    a = ap.parse_args(argv)
    kinds = _kinds(a.inject)
    unknown = kinds - set(KINDS)
    if unknown:
        ap.error(f"unknown anomaly kind(s): {', '.join(sorted(unknown))}")
    if a.ops < 1 or (a.runs is not None and not 1 <= a.runs <= a.ops) or a.jobs < 1:
        ap.error("--ops, --runs and --jobs must be positive, and --runs at most --ops")
    if a.runs is None:
        progress = Progress(a.ops, 1, a.quiet)
        written = 0.0  # of the run

        def done(k: float) -> None:
            nonlocal written
            written += k
            progress.show(round(written * a.ops), 0)

        injected = generate(a.out, a.ops, kinds, a.seed, done)
        progress.show(round(written * a.ops), 1, force=True)
        print(f"{a.out}: {len(injected)} anomalies injected (see injected.json)")
        return 0
    paths = generate_batch(a.out, a.ops, a.runs, kinds, a.seed, a.jobs, a.quiet)
    print(f"{a.out}: {len(paths)} runs, each with its injected.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
