"""The replica grid of a big run (checker/reportgrid.py's Spark path): the rows
planned from a partition's Shape -- where the replicas differ looked for only in
the offset buckets whose digests differ, the lowest marked_needed of them -- and
the records fetched at the planned offsets are the grid made from every record
(checker/gridrows.py), on a generated run with every anomaly kind injected."""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from checker import gridrows, reportgrid
from checker.api import check_runs
from contract import CHECK, REPORT_INPUTS_JSON

sys.path.insert(0, str(ROOT / "bench"))

import gen_history  # noqa: E402  (bench/ is scripts, not a package)


def _partition(rnd: random.Random, n: int, pdiv: float):
    logs = {b: {o: (rnd.choice([1, 2]), o + (rnd.random() < pdiv))
                for o in range(rnd.randint(0, n))}
            for b in ("A", "B", "C")[:rnd.randint(2, 3)]}
    final = {o: o for o in range(rnd.randint(0, n))}
    acked: dict[int, list] = {}
    for o in range(n + rnd.randint(0, 30)):
        gridrows.add_ack(acked, o, o)
    lost = {rnd.randrange(n + 10) for _ in range(rnd.choice([0, 1, 5]))}
    must = {rnd.randrange(-5, n + 50) for _ in range(rnd.choice([0, 3, 30]))}
    return logs, final, acked, lost, must


def test_a_plan_needs_only_the_lowest_marked_offsets_and_its_own_records(monkeypatch) -> None:
    # Small limits, so that many partitions have more marked offsets than needed.
    monkeypatch.setattr(gridrows, "MAX_ROWS", 40)
    monkeypatch.setattr(gridrows, "MAX_ANOMALY_ROWS", 10)
    monkeypatch.setattr(gridrows, "MAX_GHOSTS", 5)
    cut = 0
    for seed in range(600):
        rnd = random.Random(seed)
        logs, final, acked, lost, must = _partition(rnd, rnd.choice([50, 200, 1000]),
                                                    rnd.choice([0.05, 0.3, 0.9]))
        whole = gridrows.partition_rows(logs, final, acked, lost, must)
        s = gridrows.shape(logs, final, acked, lost)
        marked = sorted(s.marked)
        need = gridrows.marked_needed(len(s.lost_here))
        cut += len(marked) > need
        s.marked = set(marked[:need]) | {o for o in marked if o > s.top - gridrows.EDGE}
        p = gridrows.plan(s, must)
        at = p.offsets(s)
        assert gridrows.grid(
            s, p, {b: {o: r for o, r in m.items() if o in at} for b, m in logs.items()},
            {o: v for o, v in final.items() if o in at},
            {o: v for o, v in acked.items() if o in at}) == whole, seed
    assert cut > 50  # the cut was exercised


@pytest.mark.spark
def test_a_big_runs_grid_from_spark_is_the_grid_from_every_record(tmp_path: Path,
                                                                 monkeypatch) -> None:
    run = tmp_path / "gen"
    gen_history.generate(run, 20_000, set(gen_history.KINDS), seed=5)
    copy = tmp_path / "big"
    shutil.copytree(run, copy)
    (small,) = check_runs([run])
    monkeypatch.setattr(reportgrid, "BIG_RUN_BYTES", 0)  # every run is a big one
    (big,) = check_runs([copy])
    assert big.verdict == small.verdict
    kinds = {a["kind"] for a in small.anomalies}
    assert {"lost-write", "divergence"} <= kinds
    grids = [json.loads((d / CHECK / REPORT_INPUTS_JSON).read_text())["grid"]
             for d in (run, copy)]
    assert grids[0] == grids[1]
    rows = [r for p in grids[0].values() for r in p["rows"]]
    assert any(len({tuple(c) for c in r.get("c", {}).values()}) > 1 for r in rows)  # marked
