"""The report's inputs from the history and the replica logs that need the check's
anomalies: the story's history lines (checker.reportops), the replica grid
(checker.reportgrid) and whether the run had a consumer -- report-inputs.json
"story", "grid" and "consumers" (docs/run-directory.md)."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame

from checker import reportgrid, reportops, reportrisk
from checker.facts import Digest
from checker.load import Inputs
from checker.rundir import RunDir


def history_inputs(inputs: Inputs, sparse: DataFrame, found: list[Any],
                   runs: dict[str, RunDir], digests: list[Digest], bits: int
                   ) -> dict[str, dict[str, Any]]:
    """run (URI) -> {"story", "grid", "consumers"}; ``found``: the listed anomaly
    rows (as checker.api lists them in anomalies.json), ``runs``: by key,
    ``digests``: the inputs' (checker.facts), of offset buckets of 2**``bits``. A run
    whose story would ask about more than reportops.MAX_OFFSETS offsets gets no
    "story" (the report reads its history)."""
    uris = {u: k for u, k in inputs.run_keys.items() if k in runs}
    listed: dict[str, list[dict[str, Any]]] = {u: [] for u in uris}
    for r in found:
        if r.run in listed:
            listed[r.run].append({"kind": r.kind, "topic": r.topic, "partition": r.partition,
                                  "witness": json.loads(r.witness)})
    offsets: dict[str, dict[str, set[int]]] = {}
    lost_at: dict[str, dict[str, set[int]]] = {}
    for u, anomalies in listed.items():
        offsets[u], lost_at[u], _ = reportops.wanted(anomalies)
    # A run without anomalies: the story tells what kept the records at risk.
    risk, offsets_kept = reportrisk.risk_inputs(
        inputs.history, {u: runs[uris[u]].path for u, anomalies in listed.items()
                         if not anomalies})
    offsets.update(offsets_kept)
    told = {u for u, parts in offsets.items()
            if sum(len(o) for o in parts.values()) <= reportops.MAX_OFFSETS}
    picks = reportops.picked(inputs.history, {u: offsets[u] for u in told},
                             {u: lost_at[u] for u in told if u in lost_at})
    # The replicas' records at the anomalies' offsets (not at a run's at-risk ones:
    # the story of what kept them reads none).
    records = reportops.log_records(inputs.logs, {u: offsets[u] for u in told if listed[u]})
    few, consumers = reportops.sparse_indexes(sparse)
    marked = {(u, part): m for u, anomalies in listed.items()
              for part, m in reportgrid.marks(anomalies).items()}
    grids = reportgrid.grids(inputs.history, sparse, inputs.logs,
                             {u: runs[k].history_bytes for u, k in uris.items()}, marked,
                             reportgrid.differing_buckets(digests), bits)
    out: dict[str, dict[str, Any]] = {}
    for u, k in uris.items():
        out[u] = {"grid": grids[u], "consumers": u in consumers}
        if u in told:
            out[u]["story"] = reportops.story_inputs(runs[k].path, listed[u], few.get(u, set()),
                                                     picks[u], records.get(u, {}))
            if u in risk:
                out[u]["story"]["risk"] = risk[u]
    return out
