"""Read the JSON-lines files of many runs into Spark DataFrames.

Every file of every run is read by one scan per file type; the run a row
belongs to is derived from the file's path, so a tree of hundreds of runs is one
scan, not hundreds. Each line is parsed with an explicit schema and checked
against the format's vocabulary; a run with a bad line is set aside with a
RunDirError naming run, file and line (its first bad line: Inputs.bad) and its
rows are dropped, so the rest of the batch is checked as if it had not been
given. A torn last line (contract.rundir.torn_tail) is excluded from the data
and reported, not an error. Spark's readers decode a byte that is not UTF-8 as
U+FFFD, which would pass for text that was written (a label) or for another
value (`unknown op f="partition"` for a process "nemes\ufffdis"): no such file
gets here, checker.rundir.read_rundir has set its run aside at that byte
(contract.rundir.check_utf8).

Each input is parsed once and kept (a local checkpoint: typed rows in memory,
spilling to disk) for the queries that read it. The first of them,
checker.facts, fills the kept copies and counts the bad lines in the same pass;
only then is the raw text read again, to name the bad line. ``run`` is the run
directory as Spark names it (a ``file:`` URI); Inputs.run_keys maps it back to
the RunDir key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checker import schemas
from checker.facts import LOG_FIELDS, Facts, bad_record, collect_facts
from checker.rundir import RunDir
from checker.spark import keep, local_rows
from contract import (
    CLIENT_FS,
    CONTROLLER,
    EVENTS,
    HISTORY,
    LOG,
    NEMESIS_FS,
    NEMESIS_PROCESS,
    OP_TYPES,
    REPLICAS,
)
from contract.rundir import RunDirError, find_line

LAST_EVENT = "last_event"  # load_events' column: a run's last event time (ns)


@dataclass
class Inputs:
    """The parsed inputs of all runs being checked; ``run`` is the run dir's URI."""

    history: DataFrame  # run, index, time, process, type, f, topic, partition, value, ...
    logs: DataFrame  # run, broker, topic, partition, offset, epoch, value
    states: DataFrame  # run, broker, topic, partition, role, leader, leader_epoch, leo, hw, ...
    # The same rows as Python dicts: read in the driver without a Spark job.
    state_rows: list[dict[str, Any]]
    # run (URI) -> its event figures (load_events); None: no run has events.
    events: dict[str, dict[str, int]] | None
    run_keys: dict[str, str]  # run (URI, as in the DataFrames) -> RunDir key
    # RunDir key -> the first bad line of a run set aside (its rows are not in the
    # DataFrames above). Every run given, when none is left to check.
    bad: dict[str, RunDirError] = field(default_factory=dict)
    # run (URI) -> the time (ns) of its last event: where the report's charts end
    last_events: dict[str, int] = field(default_factory=dict)


def uri_to_path(uri: str) -> str:
    """Spark's file URI (``file:/a%20b``) as the plain local path Python uses; a
    plain path (the single-run key, see _run_uri) is returned as is."""
    if not uri.startswith("file:"):
        return uri
    return unquote(re.sub(r"^file:(//)?", "", uri))


def _run_uri(runs: dict[str, RunDir], inner: Column) -> Column:
    """The run directory's URI: the file's URI minus ``inner``, its path inside the
    run (as a column, URI-encoded like the file path). A substring per row is
    cheap; decoding happens once per run in Python (uri_to_path). A single run
    needs no per-row work at all: its key is a constant."""
    if len(runs) == 1:
        return F.lit(next(iter(runs)))
    path = F.col("file")
    return path.substr(F.lit(1), F.length(path) - F.length(inner))


def _literal(paths: list[str]) -> list[str]:
    """Paths as Hadoop glob patterns that match only themselves: a run directory
    under /tmp/night[1]/ is read as named, where '[1]' would be a character class
    (the file "does not exist"). Spark's internal option to turn globbing off
    reads some files twice when a path holds a bracket."""
    return [re.sub(r"([\\\[\]{}*?])", r"\\\1", p) for p in paths]


def _read_lines(spark: SparkSession, paths: list[str], schema) -> DataFrame:
    return (
        spark.read.text(_literal(paths))
        .select(F.col("_metadata.file_path").alias("file"), F.col("value").alias("raw"))
        # Blank lines carry nothing; anything else must parse.
        .filter(F.trim("raw") != "")
        .withColumn("j", F.from_json("raw", schema, {"columnNameOfCorruptRecord": schemas.CORRUPT}))
    )


def _read_json(spark: SparkSession, paths: list[str], schema, *, with_file: bool
               ) -> DataFrame:
    """The fast parse (Spark's JSON source, about twice as fast as from_json over
    text lines) in the shape of _read_lines, minus the raw text; without ``file``
    unless ``with_file``: Spark builds the file metadata of every line once it is
    selected, used or not (~15% of the parse at 10M lines)."""
    df = (
        spark.read.schema(schema)
        .option("columnNameOfCorruptRecord", schemas.CORRUPT)
        .json(_literal(paths))
    )
    j = F.struct(*[F.col(f.name) for f in schema.fields]).alias("j")
    return df.select(F.col("_metadata.file_path").alias("file"), j) if with_file else df.select(j)


def _keep_lines(rows: DataFrame, runs: dict[str, RunDir]) -> DataFrame:
    """A lazy local checkpoint of parsed lines (``rows`` start with ``run``), filled
    by the first query that reads it (checker.facts, which also counts the
    problems, so parsing, keeping and validating are one pass). A single run's
    key is added after the checkpoint, as a constant: not stored in every row,
    and dropped from the queries' grouping and join keys by Spark's optimizer."""
    if len(runs) != 1:
        return keep(rows, eager=False)
    kept = keep(rows.drop("run"), eager=False)
    return kept.select(F.lit(next(iter(runs))).alias("run"), *kept.columns)


def _load(
    spark: SparkSession,
    runs: dict[str, RunDir],
    paths: list[str],
    schema,
    problem: Callable[[], Column],
    cols: list[Column],
) -> DataFrame:
    """Parse once and keep the typed columns plus ``problem`` (null for a good
    line): _keep_lines. ``cols`` read ``j`` (the parsed line) and, for more than
    one run, ``file``, and start with ``run``."""
    return _keep_lines(
        # No paths (a history-only run alone, checker.historyonly): ``cols`` may
        # still name ``file``, which an empty read has all the same.
        _read_json(spark, paths, schema, with_file=len(runs) != 1 or not paths)
        .select(*cols, problem().alias("problem")),
        runs,
    )


def good_lines(kept: DataFrame) -> DataFrame:
    """The lines of a _load result that passed every check."""
    return kept.filter(F.col("problem").isNull()).drop("problem")


def _describe_corrupt(raw: str, kind: str) -> str:
    """Say precisely why Spark could not parse a line (error path only)."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        return f"not JSON ({e.msg}): {raw[:80]!r}"
    if not isinstance(obj, dict):
        return f"not a JSON object: {raw[:80]!r}"
    for name, types in schemas.PY_TYPES[kind].items():
        v = obj.get(name)
        if v is not None and not isinstance(v, types):
            want = "/".join(t.__name__ for t in types)
            return f"field {name!r} must be {want}, got {v!r}"
    return f"a field has the wrong type: {raw[:80]!r}"


def _first_bad(parsed: DataFrame, runs: dict[str, RunDir], kind: str
               ) -> dict[str, tuple[str, RunDirError]]:
    """Each run's first bad line that is not its file's known truncated last line:
    RunDir key -> (the run's URI in the DataFrames, the RunDirError naming it).
    A file's first two bad lines are looked at (in file order, as Spark reads a
    file's splits), enough to see past a truncated last line."""
    order = Window.partitionBy("run", "file").orderBy("pos")
    bad = (
        parsed.withColumn("pos", F.monotonically_increasing_id())
        .filter(F.col("problem").isNotNull())
        .withColumn("nth", F.row_number().over(order))
        .filter(F.col("nth") <= 2)
        .select("run", "file", "raw", "problem", "pos")
        .collect()
    )
    first: dict[str, tuple[str, str, Any]] = {}
    for row in sorted(bad, key=lambda r: (r.run, r.file, r.pos)):
        rd = runs.get(uri_to_path(row.run))
        if rd is None:  # the path mapping failed: a bug, not bad input
            raise RuntimeError(f"checker: file {row.file} maps to no known run")
        rel = uri_to_path(row.file)[len(rd.key) + 1 :]
        t = rd.torn_tail(rel)
        if t is not None and t.text == row.raw:
            continue
        if rd.key not in first or rel < first[rd.key][1]:
            first[rd.key] = (row.run, rel, row)
    out = {}
    for key, (uri, rel, row) in first.items():
        rd = runs[key]
        msg = row.problem if row.problem != "corrupt" else _describe_corrupt(row.raw, kind)
        out[key] = (uri, RunDirError(rd.path, rel, msg, find_line(rd.path, rel, row.raw)))
    return out


def _problem(checks: list[tuple[Column, Column | str]]) -> Column:
    expr = None
    for cond, msg in checks:
        msg = F.lit(msg) if isinstance(msg, str) else msg
        expr = F.when(cond, msg) if expr is None else expr.when(cond, msg)
    return expr


def _q(c: Column) -> Column:
    """The value as JSON text, for messages (to_json wants a container: unwrap [v])."""
    j = F.to_json(F.array(c))
    return F.coalesce(j.substr(F.lit(2), F.length(j) - 2), F.lit("null"))


def _history_checks(records: bool = True) -> list[tuple[Column, Column | str]]:
    """Per-line checks. The per-record check is a higher-order function that costs
    as much as all the others together, so the fast path leaves it out and checks
    the records once, exploded (load_history)."""
    j = F.col("j")
    typ, f, proc = j["type"], j["f"], j["process"]
    send, poll, ok = f == "send", f == "poll", typ == "ok"
    bad_records = F.exists(j["records"], bad_record)
    checks = [
        (j[schemas.CORRUPT].isNotNull(), "corrupt"),
        (j["index"].isNull(), "missing field 'index'"),
        (proc.isNull(), "missing field 'process'"),
        (typ.isNull(), "missing field 'type'"),
        (~typ.isin(*OP_TYPES), F.concat(F.lit("unknown op type "), _q(typ))),
        (f.isNull(), "missing field 'f'"),
        (
            (proc == NEMESIS_PROCESS) & ~f.isin(*NEMESIS_FS),
            F.concat(F.lit("unknown nemesis op f="), _q(f)),
        ),
        ((proc != NEMESIS_PROCESS) & ~f.isin(*CLIENT_FS), F.concat(F.lit("unknown op f="), _q(f))),
        ((send | poll) & j["topic"].isNull(), F.concat(f, F.lit(" op without 'topic'"))),
        ((send | poll) & j["partition"].isNull(), F.concat(f, F.lit(" op without 'partition'"))),
        (
            send & j["value"].try_cast("long").isNull(),
            F.concat(F.lit("send value must be an integer, got "), _q(j["value"])),
        ),
        (send & ok & j["offset"].isNull(), "ok send without 'offset'"),
        (poll & ok & j["records"].isNull(), "ok poll without 'records'"),
    ]
    if records:
        checks.append((poll & ok & F.coalesce(bad_records, F.lit(False)),
                       "poll record is not [offset, value]"))
    return checks


def _history_cols(runs: dict[str, RunDir]) -> list[Column]:
    j = F.col("j")
    return [
        _run_uri(runs, F.lit("/" + HISTORY)).alias("run"),
        j["index"].alias("index"),
        j["time"].alias("time"),
        j["process"].alias("process"),
        j["type"].alias("type"),
        j["f"].alias("f"),
        j["topic"].alias("topic"),
        j["partition"].alias("partition"),
        F.when(j["f"] == "send", j["value"].try_cast("long")).alias("value"),
        F.when(j["process"] == NEMESIS_PROCESS, j["value"]).alias("nodes"),
        j["offset"].alias("offset"),
        j["acks"].alias("acks"),
        j["error"].alias("error"),
        j["records"].alias("records"),
        j["hw"].alias("hw"),
        j["node"].alias("node"),
        j["epoch"].alias("epoch"),
    ]


def load_history(spark: SparkSession, runs: dict[str, RunDir]) -> DataFrame:
    """Every history line, kept lazily, with ``problem``. Poll records are checked
    exploded, by checker.facts (as a per-line check they cost as much as all the
    others together)."""
    paths = [str(rd.path / HISTORY) for rd in runs.values()]
    return _load(spark, runs, paths, schemas.HISTORY,
                 lambda: _problem(_history_checks(records=False)), _history_cols(runs))


def bad_history(spark: SparkSession, runs: dict[str, RunDir]
                ) -> dict[str, tuple[str, RunDirError]]:
    """Error path: re-read the histories as text with every check (poll records
    too); each run's first bad line that is not a known truncated last line
    (_first_bad)."""
    paths = [str(rd.path / HISTORY) for rd in runs.values()]
    slow = _read_lines(spark, paths, schemas.HISTORY).withColumn(
        "problem", _problem(_history_checks(records=True))
    )
    return _first_bad(slow.withColumn("run", _history_cols(runs)[0]), runs, "history")


def _log_paths(runs: dict[str, RunDir]) -> list[str]:
    return [str(rd.path / REPLICAS / b / LOG) for rd in runs.values() for b in rd.brokers]


def _log_cols(runs: dict[str, RunDir]) -> list[Column]:
    j = F.col("j")
    # .../replicas/<broker>/log.jsonl: the broker is the second-to-last path segment.
    broker_uri = F.substring_index(F.substring_index("file", "/", -2), "/", 1)
    return [
        _run_uri(runs, F.concat(F.lit(f"/{REPLICAS}/"), broker_uri, F.lit(f"/{LOG}"))).alias("run"),
        # url_decode turns '+' into ' ': protect it (broker names are short).
        F.url_decode(F.regexp_replace(broker_uri, r"\+", "%2B")).alias("broker"),
        *[j[c].alias(c) for c in ("topic", "partition", "offset", "epoch", "value")],
    ]


def _log_problem() -> Column:
    j = F.col("j")
    return _problem(
        [
            (j[schemas.CORRUPT].isNotNull(), "corrupt"),
            *[
                (j[c].isNull(), f"missing field {c!r}")
                for c in ("topic", "partition", "offset", "value")
            ],
        ]
    )


def load_logs(spark: SparkSession, runs: dict[str, RunDir]) -> DataFrame:
    """Every replica log line, kept lazily, with ``problem``.

    One run's logs are read one broker at a time, its name a constant: decoding
    it from each line's file path costs about as much as parsing the line."""
    if len(runs) != 1 or not next(iter(runs.values())).brokers:
        return _load(spark, runs, _log_paths(runs), schemas.LOG, _log_problem, _log_cols(runs))
    (rd,) = runs.values()
    j = F.col("j")
    parts = [
        _read_json(spark, [str(rd.path / REPLICAS / b / LOG)], schemas.LOG,
                   with_file=False).select(
            F.lit(rd.key).alias("run"),
            F.lit(b).alias("broker"),
            *[j[c].alias(c) for c in ("topic", "partition", "offset", "epoch", "value")],
            _log_problem().alias("problem"),
        )
        for b in rd.brokers
    ]
    return _keep_lines(reduce(DataFrame.unionByName, parts), runs)


def bad_logs(spark: SparkSession, runs: dict[str, RunDir]
             ) -> dict[str, tuple[str, RunDirError]]:
    """Error path: as bad_history, for the replica logs."""
    slow = _read_lines(spark, _log_paths(runs), schemas.LOG).withColumn("problem", _log_problem())
    return _first_bad(slow.withColumn("run", _log_cols(runs)[0]), runs, "log")


def _events_problem() -> Column:
    j = F.col("j")
    return _problem([(j[schemas.CORRUPT].isNotNull(), "corrupt"),
                     (j["type"].isNull(), "missing field 'type'")])


def _event_counts() -> list[Column]:
    """A run's event figures, over its good lines (``type`` is null on a bad one).
    An ISR change is the controller's decision (its event); the leader then logs
    the same change when it learns it. Count the controller's; a run whose
    controller logged none (an older run) counts the leaders'."""
    t = F.col("type")
    by_controller = F.col("node") == F.lit(CONTROLLER)

    def changes(kind: str) -> Column:
        ours = F.count_if((t == kind) & by_controller)
        return F.when(F.count_if(t.isin("isr-shrink", "isr-expand") & by_controller) > 0,
                      ours).otherwise(F.count_if(t == kind))

    return [changes("isr-shrink").alias("isr_shrinks"),
            changes("isr-expand").alias("isr_expands"),
            F.count_if(t == "leader-elected").alias("leader_elections"),
            F.count_if(t == "truncate").alias("truncations"),
            # not a figure: the report's charts end at the last time of the run
            F.max(F.when(t.isNotNull(), F.col("time"))).alias(LAST_EVENT)]


def load_events(spark: SparkSession, runs: dict[str, RunDir]
                ) -> tuple[dict[str, dict[str, int]] | None, dict[str, tuple[str, RunDirError]]]:
    """Each run's event figures (run URI -> _event_counts, with its LAST_EVENT
    time; None: no run has events) and each run's first bad line, in one pass: the checker needs no
    event row after it (the report reads events.jsonl itself), so nothing is
    kept. A simulated chaos run writes as many bytes of events as of history."""
    paths = [str(rd.path / EVENTS) for rd in runs.values() if rd.has_events]
    if not paths:
        return None, {}
    j = F.col("j")
    parsed = _read_json(spark, paths, schemas.EVENTS, with_file=len(runs) != 1).select(
        _run_uri(runs, F.lit("/" + EVENTS)).alias("run"), j["node"].alias("node"),
        j["time"].alias("time"),
        _events_problem().alias("problem"), j["type"].alias("raw_type"))
    good = F.col("problem").isNull()
    rows = (
        parsed.select("run", "node", "time", "problem",
                      F.when(good, F.col("raw_type")).alias("type"))
        .groupBy("run")
        .agg(F.count_if(~good).alias("bad_lines"), *_event_counts())
        .collect()
    )
    counts = {r.run: {k: v for k, v in r.asDict().items() if k not in ("run", "bad_lines")}
              for r in rows}
    if not any(r.bad_lines for r in rows):
        return counts, {}
    # Error path: name each bad run's first bad line, from the text.
    slow = _read_lines(spark, paths, schemas.EVENTS).withColumn("problem", _events_problem())
    return counts, _first_bad(slow.withColumn("run", _run_uri(runs, F.lit("/" + EVENTS))),
                              runs, "events")


def _run_keys(runs: dict[str, RunDir], seen: set[str], history: DataFrame, single: bool
              ) -> dict[str, str]:
    """Map each run's URI (as Spark names it; ``seen``: those the facts name) to its
    RunDir key. A single run's rows (``single``: it was loaded alone) already carry
    its key (_run_uri). When a run has no facts (no acks, polls or logs), the
    history is scanned for its URI; a run with no lines at all stands in with its
    key."""
    if single:
        return {k: k for k in runs}
    if len(seen) < len(runs):
        seen = seen | {r.run for r in history.select("run").distinct().collect()}
    keys = {u: uri_to_path(u) for u in seen}
    unknown = [u for u, k in keys.items() if k not in runs]
    if unknown:  # the path mapping failed: a bug, not bad input
        raise RuntimeError(f"checker: {unknown[0]} maps to no known run")
    found = set(keys.values())
    keys.update({k: k for k in runs if k not in found})
    return keys


def load_states(spark: SparkSession, runs: dict[str, RunDir], uri_of: dict[str, str]
                ) -> tuple[DataFrame, list[dict[str, Any]]]:
    """The replicas' final states (state.json, read by checker.rundir), as a
    DataFrame and as the rows it was made of."""
    rows: list[dict[str, Any]] = [
        {**{k: s[k] for k in schemas.STATES.fieldNames() if k != "run"}, "run": uri_of[rd.key]}
        for rd in runs.values()
        for s in rd.states
    ]
    return local_rows(spark, rows, schemas.STATES), rows


def _without(df: DataFrame | None, uris: set[str]) -> DataFrame | None:
    """df without the rows of the runs ``uris`` name."""
    return df if df is None or not uris else df.filter(~F.col("run").isin(sorted(uris)))


def load_inputs(
    spark: SparkSession,
    runs: dict[str, RunDir],
    progress: Callable[[str], None],
    bits: int,
    fields: Iterable[str] = LOG_FIELDS,
) -> tuple[Inputs, Facts]:
    """Parse, keep and validate every input, collecting checker.facts on the way
    (``bits``: the digests' bucket size; ``fields``: the record fields they hash).
    A run with a bad line is set aside (Inputs.bad) and its rows and facts left
    out; when every run is, the Inputs hold no rows to check."""
    size = sum(rd.history_bytes for rd in runs.values())
    progress(f"reading {len(runs)} run(s): {size / 1e6:,.0f} MB of history and the replica logs")
    history, logs = load_history(spark, runs), load_logs(spark, runs)
    with ThreadPoolExecutor(1, thread_name_prefix="isrlab-events") as pool:
        # The events are other files, read for figures only: beside the facts' pass.
        events_job = pool.submit(load_events, spark, runs)
        facts = collect_facts(history, logs, bits, fields)
        # A truncated last line is a problem line too: the slow paths report only the
        # others. A run's history is looked at first, then its logs, then its events.
        bad: dict[str, tuple[str, RunDirError]] = {}
        if facts.bad_history:
            bad.update(bad_history(spark, runs))
        if facts.bad_logs:
            bad.update({k: v for k, v in bad_logs(spark, runs).items() if k not in bad})
        events, bad_events = events_job.result()
    last_events = {u: c.pop(LAST_EVENT) for u, c in (events or {}).items()}
    last_events = {u: t for u, t in last_events.items() if t is not None}
    bad.update({k: v for k, v in bad_events.items() if k not in bad})
    errors = {k: e for k, (_, e) in bad.items()}
    good = {k: rd for k, rd in runs.items() if k not in bad}
    if not good:
        return Inputs(history, logs, *load_states(spark, {}, {}), None, {}, errors), facts
    uris = {u for u, _ in bad.values()}
    history, logs = _without(good_lines(history), uris), _without(good_lines(logs), uris)
    if events is not None:
        events = {u: c for u, c in events.items() if u not in uris}
    if uris:
        facts = replace(facts, digests=[d for d in facts.digests if d.run not in uris],
                        runs=facts.runs - uris)
    keys = _run_keys(good, facts.runs, history, single=len(runs) == 1)
    uri_of = {k: u for u, k in keys.items()}
    return (Inputs(history, logs, *load_states(spark, good, uri_of), events, keys, errors,
                   last_events), facts)
