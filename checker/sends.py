"""Every send of every run, summarised in one query: op counts, latency,
availability per fault window, and the values acknowledged more than once.

Sends are nearly all of a history, and a send's invoke and completion share its
value (docs/run-directory.md: a unique int). Grouping the send lines by value -- a hash
aggregation, no sort -- pairs them, which gives the latency and the
completion's type and time without ordering the history by process. The pairs
are then tallied per run, fault window and latency bucket (checker.latency) in
a second aggregation of the same query, so the millions of pairs are never
stored, only the few thousand tallies collected.

A value whose lines do not form one invoke followed by at most one completion
by one process (sent twice, or a history that breaks the format) is *odd*: its
lines are read again and paired the Jepsen way, each completion with the op
before it in its process, and tallied the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checker.finallog import KEY
from checker.latency import Histogram, bucket
from checker.spark import keep, local_rows

VALUE = [*KEY, "value"]
_COUNTS = ["n_invoke", "n_ok", "n_fail", "n_info"]
_ODD = [f"odd_{c}" for c in ("topic", "partition", "value")]


@dataclass
class RunSends:
    """One run's sends."""

    sends: int = 0
    sends_ok: int = 0
    sends_fail: int = 0
    sends_info: int = 0
    lines: int = 0  # invokes and completions
    t0: int | None = None  # time of the first send line
    t1: int | None = None  # ... and of the last
    latency: Histogram = field(default_factory=Histogram)
    # fault window n (checker.figures.faults: 0 before the first) -> [sends that
    # completed in it, how many of them ok]
    windows: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class SendOps:
    runs: dict[str, RunSends] = field(default_factory=dict)
    # (run, topic, partition, value, n_ok) of the odd values (see the module
    # docstring), kept in Spark: a chaos run may have millions (resends); None
    # when there are none.
    odd: DataFrame | None = None
    # send_ops' per-value aggregate (kept): counts, times, indexes, process
    by_value: DataFrame | None = None

    def plain_pairs(self) -> DataFrame:
        """run, and each plain send (an invoke and its one completion, by one
        process): process, f, type (the completion's), started (the invoke's
        time), time, value, offset and index (the completion's). The pair the
        Jepsen way gives (a completion is its process's next line), without
        ordering the history by process; odd values are left out."""
        assert self.by_value is not None
        return self.by_value.filter(_paired()).select(
            "run", F.col("proc_lo").cast("string").alias("process"), F.lit("send").alias("f"),
            _done_type().alias("type"),
            F.col("t_invoke").alias("started"), F.col("t_done").alias("time"), "value",
            "offset", F.col("i_hi").alias("index"))

    @property
    def acked_twice(self) -> DataFrame | None:
        """(run, topic, partition, value) acknowledged more than once."""
        return None if self.odd is None else self.odd.filter(F.col("n_ok") > 1).select(*VALUE)


def send_ops(spark: SparkSession, history: DataFrame, windows: dict[str, list[tuple]]
             ) -> SendOps:
    """Summarise every send line of ``history``. ``windows``: run -> its fault
    windows' starts as (time, index, ...), in order (checker.figures.faults)."""
    t, proc = F.col("type"), F.col("process").try_cast("long")
    inv = t == "invoke"
    # A process that is not an integer as text ("p1", "07") makes its values odd:
    # a plain pair's process is then its number's text, so that no string is
    # aggregated (a min of strings turns the hash aggregation into a sort of every
    # send line: 10M lines at 10M operations).
    unnamed = F.coalesce(proc.cast("string") != F.col("process"), F.lit(True))
    # Kept: the report's client ops are its plain pairs too (SendOps.plain_pairs).
    by_value = keep(
        history.filter(F.col("f") == "send")
        .groupBy(*VALUE)
        .agg(
            *[F.count_if(t == c[2:]).alias(c) for c in _COUNTS],
            F.min("time").alias("t_lo"),
            F.max("time").alias("t_hi"),
            F.min("index").alias("i_lo"),
            F.max("index").alias("i_hi"),
            F.min(F.when(inv, F.col("index"))).alias("invoke_index"),
            F.min(proc).alias("proc_lo"),
            F.max(proc).alias("proc_hi"),
            F.max(unnamed).alias("unnamed"),
            F.min(F.when(inv, F.col("time"))).alias("t_invoke"),
            F.max(F.when(~inv, F.col("time"))).alias("t_done"),
            F.max(F.when(~inv, F.col("offset"))).alias("offset"),
        ),
        eager=False,
    )
    odd, paired = _odd(), _paired()
    rows = by_value.select(
        "run",
        *[F.when(odd, F.col(c[4:])).alias(c) for c in _ODD],
        *_COUNTS,
        "t_lo",
        "t_hi",
        F.when(paired, F.col("t_hi")).alias("d_time"),
        F.when(paired, F.col("i_hi")).alias("d_index"),
        F.when(paired, _done_type()).alias("d_type"),
        F.when(paired, F.col("t_hi") - F.col("t_lo")).alias("ns"),
    )
    out = SendOps(by_value=by_value)
    if _tally(_phased(spark, rows, windows), out):
        # Kept when first read (by the pairs' tally), for the scope's needs.
        out.odd = keep(by_value.filter(odd).select(*VALUE, "n_ok"), eager=False)
        _tally(_phased(spark, _odd_pairs(history, out.odd), windows), out)
    return out


def _n_done() -> Column:
    return F.col("n_ok") + F.col("n_fail") + F.col("n_info")


def _odd() -> Column:
    """A value whose lines are not plain: one invoke, first, then at most one
    completion, by one process named by an integer (over send_ops' per-value
    aggregate)."""
    return (
        (F.col("n_invoke") != 1)
        | (_n_done() > 1)
        | (F.col("invoke_index") != F.col("i_lo"))
        | F.col("unnamed")
        | (F.col("proc_lo") != F.col("proc_hi"))
    )


def _done_type() -> Column:
    """A plain value's completion type."""
    return (F.when(F.col("n_ok") == 1, F.lit("ok")).when(F.col("n_fail") == 1, F.lit("fail"))
            .otherwise(F.lit("info")))


def _paired() -> Column:
    """A plain value with its completion."""
    return ~_odd() & (_n_done() == 1)


# Up to this many runs with fault windows, a completion's window is an expression
# (a few comparisons per run; a single run's key is a constant, so its test folds
# away); beyond, each completion meets its run's windows in a broadcast join.
EXPRESSION_RUNS = 4


def _phased(spark: SparkSession, rows: DataFrame, windows: dict[str, list[tuple]]
            ) -> DataFrame:
    """``rows`` plus ``n``: the fault window of the completion (d_time, d_index);
    null for a row without one or a run without faults (window 0). Window n
    starts after the n-th start in ``windows`` (checker.figures.faults)."""
    tm, ix = F.col("d_time"), F.col("d_index")

    # (time, index) compared in order, without building a struct per row.
    def after(t: Column | int, i: Column | int) -> Column:
        return (tm > t) | ((tm == t) & (ix > i))

    def before(t: Column, i: Column) -> Column:
        return (tm < t) | ((tm == t) & (ix < i))

    if len(windows) <= EXPRESSION_RUNS:
        n = None
        for run, starts in windows.items():
            chain = F.lit(0)
            for k, (t, i, *_) in enumerate(starts, 1):
                chain = F.when(after(t, i), F.lit(k)).otherwise(chain)
            test = F.col("run") == run
            n = F.when(test, chain) if n is None else n.when(test, chain)
        return rows.select("*", F.when(tm.isNotNull(), n if n is not None else F.lit(None))
                           .cast("int").alias("n"))
    bounds = []
    for run, starts in windows.items():
        edges = [(None, None), *[(t, i) for t, i, *_ in starts], (None, None)]
        bounds += [(run, n, *edges[n], *edges[n + 1]) for n in range(len(edges) - 1)]
    table = local_rows(spark, bounds, "wrun string, n int, t0 long, i0 long, t1 long, i1 long")
    after_start = F.col("t0").isNull() | after(F.col("t0"), F.col("i0"))
    before_end = F.col("t1").isNull() | before(F.col("t1"), F.col("i1"))
    # Only completions look for their window; the join key of the rest is null.
    wrun = F.when(tm.isNotNull(), F.col("run")).alias("wrun")
    return (
        rows.select("*", wrun)
        .join(F.broadcast(table), "wrun", "left")
        .filter(F.col("n").isNull() | (after_start & before_end))
        .drop("wrun", "t0", "i0", "t1", "i1")
    )


def _tally(phased: DataFrame, out: SendOps) -> int:
    """Add ``phased`` (send_ops' row shape, _phased: a value's counts and odd
    key, its completion d_* and latency ns where it has one, and its fault
    window n) to ``out``, per run, fault window and latency bucket. Returns how
    many odd values it saw."""
    tallies = phased.groupBy(
        "run", "n", "d_type", bucket(F.col("ns")).alias("bucket")
    ).agg(
        F.count(_ODD[-1]).alias("n_odd"),
        *[F.sum(c).alias(c) for c in _COUNTS],
        F.min("t_lo").alias("t_lo"),
        F.max("t_hi").alias("t_hi"),
        F.count("d_time").alias("done"),
        F.count("ns").alias("timed"),
        F.max("ns").alias("ns_max"),
    ).collect()
    # Unpacked by position: a Row's attribute lookup costs ~2 us, and a swarm's
    # batch has ~750 tallies a run (~12 s of Python for 240 runs, ~1 s unpacked).
    odd = 0
    for (run, n, d_type, bkt, n_odd, n_invoke, n_ok, n_fail, n_info, t_lo, t_hi, done, timed,
         ns_max) in tallies:
        odd += n_odd
        s = out.runs.get(run)
        if s is None:
            s = out.runs[run] = RunSends()
        s.sends += n_invoke
        s.sends_ok += n_ok
        s.sends_fail += n_fail
        s.sends_info += n_info
        s.lines += n_invoke + n_ok + n_fail + n_info
        if t_lo is not None:
            s.t0 = t_lo if s.t0 is None else min(s.t0, t_lo)
            s.t1 = t_hi if s.t1 is None else max(s.t1, t_hi)
        if d_type is not None:
            w = s.windows.setdefault(n or 0, [0, 0])
            w[0] += done
            w[1] += done if d_type == "ok" else 0
        if timed:
            s.latency.add(bkt, timed, ns_max)
    return odd


def _odd_pairs(history: DataFrame, odd: DataFrame) -> DataFrame:
    """The completions of the ``odd`` values in send_ops' row shape, each paired
    with the op before it in its process among that value's lines (Jepsen: one
    op in flight per process); their lines are counted already. A shuffle join:
    the odd values are not bounded."""
    lines = history.filter(F.col("f") == "send").join(odd.select(*VALUE), VALUE, "left_semi")
    w = Window.partitionBy(*VALUE, "process").orderBy("index")
    prev_inv = F.lag("type").over(w) == "invoke"
    zero, none = F.lit(0).cast("long"), F.lit(None).cast("long")
    return lines.select(
        "run",
        *[F.lit(None).cast(ty).alias(c) for c, ty in zip(_ODD, ("string", "int", "long"),
                                                          strict=True)],
        *[zero.alias(c) for c in _COUNTS],
        none.alias("t_lo"),
        none.alias("t_hi"),
        F.col("time").alias("d_time"),
        F.col("index").alias("d_index"),
        F.col("type").alias("d_type"),
        F.when(prev_inv, F.col("time") - F.lag("time").over(w)).alias("ns"),
    ).filter(F.col("type") != "invoke")
