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



def _lost_in_the_tail(root: Path, name: str) -> Path:
    """Value 10500, acked at offset 500, lost (the final read has 20500 there); both
    replicas still hold it at offset 1150, in an uncommitted tail up to 1300 --
    more offsets than a grid shows (gridrows.MAX_ROWS)."""
    from checker.synth import RunBuilder

    rb = RunBuilder(root / name, protocol="latest", expect=["lost-write"])
    for o in range(1000):
        rb.send(0, 10000 + o, o)
    final = [20500 if o == 500 else 10000 + o for o in range(1000)]
    log = [(0, v) for v in final] + [(0, 10500 if o == 1150 else 30000 + o)
                                     for o in range(1000, 1301)]
    rb.replica("A", log, role="leader", isr=["A", "B"], hw=1000)
    rb.replica("B", log, role="follower", leader="A", hw=1000)
    rb.final_read(final)
    return rb.write()


@pytest.mark.spark
def test_where_a_replica_holds_a_lost_value_is_a_row_of_the_big_runs_grid(
        tmp_path: Path, monkeypatch) -> None:
    """Offset 1150 is far from the acked offset and from the log's end, past the
    rows a grid shows unasked: the grid shows the replicas' copy of the lost
    value there, from Spark (the logs' one pass) as from every record."""
    small, big = _lost_in_the_tail(tmp_path, "small"), _lost_in_the_tail(tmp_path, "big")
    check_runs([small])
    monkeypatch.setattr(reportgrid, "BIG_RUN_BYTES", 0)
    check_runs([big])
    grids = [json.loads((d / CHECK / REPORT_INPUTS_JSON).read_text())["grid"]
             for d in (small, big)]
    assert grids[0] == grids[1]
    (part,) = grids[1].values()
    assert any(r.get("o") == 1150 for r in part["rows"]), part["rows"]

