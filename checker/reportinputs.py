"""The report's inputs that grow with the history, computed in the check's Spark
job from the history it has parsed, so that rendering a report reads kilobytes
(check/report-inputs.json, docs/run-directory.md) instead of the history.

The client ops as the charts draw them (checker.clientops defines them and
computes the same in Python; tests/test_report_inputs.py requires both equal):
each invoke paired with its completion (checker.clientops.ops_of), then per run its counts and
latency range, every op when there are few, else the lanes' bins, the ok
latencies' envelope per bin and an even sample of the failures; and the
completions per throughput bin. The bins' width follows the run's last time:
its last completion, nemesis op, final read or event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checker import clientops as co
from checker.output import write_json
from checker.sends import VALUE, SendOps
from checker.spark import keep, local_rows
from contract import CHECK, FINAL_PROCESS, NEMESIS_PROCESS, REPORT_INPUTS_JSON

_OP_FIELDS = ("process", "f", "type", "start", "end", "value", "offset", "index")


def client_ops(history: DataFrame, sends: SendOps, sparse: DataFrame) -> DataFrame:
    """run, and each completed client op: process, f, type, start and end
    (seconds), value, offset, index (its completion's), latency (ms).

    An op is an invoke and its completion. The plain sends, nearly all
    of a history, come paired from checker.sends (paired by value, no sort); the
    rest -- polls, odd sends -- are paired here over their process's lines. A
    client's lines that are not sends are polls (checker.load rejects any other
    op), all of them among checker.sparse's rows: read there, not in the whole
    history."""
    cols = ["run", "process", "f", "type", "time", "value", "offset", "index"]
    rest = sparse.filter((F.col("process") != NEMESIS_PROCESS) & (F.col("f") != "send")
                         ).select(*cols)
    if sends.odd is not None:
        rest = rest.unionByName(history.filter(F.col("f") == "send").join(
            sends.odd.select(*VALUE), VALUE, "left_semi").select(*cols))
    w = Window.partitionBy("run", "process").orderBy("index")
    invoke = F.coalesce(F.col("type") == "invoke", F.lit(False))
    rows = rest.select(
        "run", F.coalesce("process", F.lit("None")).alias("process"), "f", "type", "time",
        "value", "offset", "index", invoke.alias("inv"),
        F.lag(invoke).over(w).alias("after_invoke"), F.lag("time").over(w).alias("started"))
    paired = rows.filter(~F.col("inv") & F.coalesce("after_invoke", F.lit(False))
                         & F.col("time").isNotNull() & F.col("started").isNotNull())
    ops = sends.plain_pairs().filter(F.col("time").isNotNull() & F.col("started").isNotNull()
                                     ).unionByName(paired.drop("inv", "after_invoke"))
    start, end = F.col("started") / 1e9, F.col("time") / 1e9
    return ops.select("run", "process", "f", "type", start.alias("start"), end.alias("end"),
                      "value", "offset", "index",
                      F.greatest((end - start) * 1e3, F.lit(1e-3)).alias("lat"))


def report_inputs(spark: SparkSession, history: DataFrame, sends: SendOps, sparse: DataFrame,
                  last_events: dict[str, int]) -> dict[str, dict[str, Any]]:
    """run (URI) -> its report inputs: {"client_ops": checker.clientops' reduction}.

    ``sends``: checker.sends' pairing; ``sparse``: checker.sparse's rows (nemesis
    ops, polls); ``last_events``: each run's last event time
    (checker.load.Inputs.last_events)."""
    ops = keep(client_ops(history, sends, sparse), eager=False)
    runs = {r.run: r for r in ops.groupBy("run").agg(
        F.count("*").alias("ops"), F.count_if(F.col("type") != "ok").alias("not_ok"),
        F.max("end").alias("end"), F.min("lat").alias("lat_min"),
        F.max("lat").alias("lat_max"),
        F.sort_array(F.collect_set("process")).alias("processes")).collect()}
    others = sparse.filter(
        ((F.col("process") == NEMESIS_PROCESS) & (F.col("type") != "invoke"))
        | ((F.col("process") == FINAL_PROCESS) & (F.col("type") == "ok")
           & F.col("topic").isNotNull() & F.col("partition").isNotNull())
    ).groupBy("run").agg(F.max("time").alias("t")).collect()
    ends: dict[str, float] = {}
    for u, t in [*last_events.items(), *((r.run, r.t) for r in others)]:
        if t is not None:
            ends[u] = max(ends.get(u, 0.0), t / 1e9)
    for u, r in runs.items():
        ends[u] = max(ends.get(u, 0.0), r.end)
    out: dict[str, dict[str, Any]] = {u: co.reduce([], end) for u, end in ends.items()}
    few = [u for u, r in runs.items() if r.ops <= max(co.MAX_TIMELINE_OPS, co.MAX_POINTS)]
    if few:  # every op listed: reduced here by the same code as the report's
        listed: dict[str, list[dict[str, Any]]] = {u: [] for u in few}
        for row in ops.filter(F.col("run").isin(few)).orderBy("run", "index").collect():
            listed[row.run].append({k: row[k] for k in _OP_FIELDS})
        out.update({u: co.reduce(listed[u], ends[u]) for u in few})
    big = {u: r for u, r in runs.items() if u not in few}
    if big:
        for u, r in big.items():
            out[u].update(count=r.ops, not_ok=r.not_ok, processes=list(r.processes),
                          latency_min=r.lat_min, latency_max=r.lat_max)
        t1 = {u: co.edge(ends[u]) for u in big}
        widths = local_rows(spark, [
            (u, t / co.LANE_BINS, t / co.LATENCY_BINS, co.throughput_width(t),
             int(t / co.throughput_width(t)) + 1) for u, t in t1.items()],
            "run string, lane_w double, lat_w double, tp_w double, nbins int")
        binned = ops.join(F.broadcast(widths), "run")  # the big runs' ops only
        _lanes_and_throughput(binned, out)
        _latency(binned, out)
        _failed(spark, ops, big, out)
    return {u: {"client_ops": c} for u, c in out.items()}


def _bin(t: str, width: str, n: int | str) -> Any:
    last = F.lit(n - 1) if isinstance(n, int) else F.col(n) - 1
    return F.least(F.floor(F.col(t) / F.col(width)).cast("int"), last)


def _lanes_and_throughput(binned: DataFrame, out: dict[str, dict[str, Any]]) -> None:
    """The lanes and the throughput chart from one aggregation of the ops: per
    process, outcome, the lane bins an op starts and ends in, and its throughput
    bin -- a few thousand rows the driver rolls up (sums of counts, minimums of
    first indexes and of outcome ranks, as checker.clientops computes them)."""
    rows = binned.groupBy(
        "run", "process", "type", "nbins", _bin("start", "lane_w", co.LANE_BINS).alias("b0"),
        _bin("end", "lane_w", co.LANE_BINS).alias("b1"), _bin("end", "tp_w", "nbins").alias("tb"),
    ).agg(F.count("*").alias("n"), F.min("index").alias("first")).collect()
    worst: dict[tuple[str, str], dict[int, int]] = {}
    ends: dict[tuple[str, str, int], dict[str, list[int]]] = {}  # type -> [n, first]
    first: dict[tuple[str, str], int] = {}
    counts: dict[str, dict[str, list[int]]] = {}
    for r in rows:
        key = (r.run, r.process)
        rank = 0 if r.type == "fail" else 2 if r.type == "ok" else 1
        bins = worst.setdefault(key, {})
        for b in range(r.b0, r.b1 + 1):
            bins[b] = min(bins.get(b, rank), rank)
        done = ends.setdefault((*key, r.b1), {}).setdefault(r.type, [0, r.first])
        done[0] += r.n
        done[1] = min(done[1], r.first)
        first[key] = min(first.get(key, r.first), r.first)
        if r.type in co.TYPES:
            counts.setdefault(r.run, {}).setdefault(r.type, [0] * r.nbins)[r.tb] += r.n
    for (u, proc), _ in sorted(first.items(), key=lambda kv: kv[1]):
        out[u]["lanes"][proc] = [
            [b, k, [[t, n] for t, (n, _) in sorted(ends.get((u, proc, b), {}).items(),
                                                   key=lambda tv: tv[1][1])]]
            for b, k in sorted(worst[(u, proc)].items())]
    for u, by_type in counts.items():
        out[u]["throughput"] = {t: by_type[t] for t in co.TYPES if t in by_type}


def _latency(binned: DataFrame, out: dict[str, dict[str, Any]]) -> None:
    lats = F.sort_array(F.collect_list("lat"))
    rows = (binned.filter(F.col("type") == "ok")
            .groupBy("run", F.floor(F.col("end") / F.col("lat_w")).cast("int").alias("b"))
            .agg(lats.alias("l"))
            .select("run", "b", F.col("l")[0].alias("lo"),
                    F.col("l")[F.floor(F.size("l") / 2)].alias("mid"),
                    F.element_at("l", -1).alias("hi"))
            .collect())
    for r in sorted(rows, key=lambda r: r.b):
        out[r.run]["latency"].append([r.b, r.lo, r.mid, r.hi])


def _failed(spark: SparkSession, ops: DataFrame, runs: dict[str, Any],
            out: dict[str, dict[str, Any]]) -> None:
    picks = [(u, i) for u, r in runs.items()
             for i in co.sample_positions(r.not_ok, co.MAX_POINTS // 2)]
    if not picks:
        return
    w = Window.partitionBy("run").orderBy("index")
    failed = ops.filter(F.col("type") != "ok").withColumn("i", F.row_number().over(w) - 1)
    chosen = local_rows(spark, picks, "run string, i int")
    for r in failed.join(chosen, ["run", "i"]).orderBy("run", "index").collect():
        out[r.run]["failed"].append({"f": r.f, "type": r.type, "start": r.start, "end": r.end})


def write_report_inputs(run_dir: Path, inputs: dict[str, Any] | None, checked_at: str) -> None:
    """check/report-inputs.json of one run, for the check of `checked_at` (the
    report uses it only beside the summary.json of that check). A run with no
    line the inputs count gets the reduction of nothing."""
    body = {"checked_at": checked_at, "client_ops": co.reduce([], 0.0), **(inputs or {})}
    write_json(Path(run_dir) / CHECK / REPORT_INPUTS_JSON, body, indent=None)
