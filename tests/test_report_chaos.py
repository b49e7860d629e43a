"""The report of a chaos run (sim backend, seed 11 under 0.10): the offsets of an
acknowledged record that was overwritten are in the replica table, its partition
first; the replica progress charts never draw a HW above the LEO (nor of the
power-loss scenario); the cluster timeline's client lanes span the whole run and
a long run's charts stay small."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest
from conftest_spark import CHAOS_LOSS, checked_chaos_loss, checked_scenario_runs

from checker import clientops
from reports import charts
from reports.render import render_run
from reports.rundata import load, trace_progress
from reports.story import RunFacts

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory):
    return checked_chaos_loss(tmp_path_factory)


@pytest.fixture(scope="module")
def chaos_report(chaos) -> str:
    return render_run(chaos.run_dir).read_text()


def _grids(report: str) -> list[tuple[str, str]]:
    """(partition, its table's HTML) in page order."""
    part = report.split("<h2>Replica logs</h2>", 1)[1].split("<h2>Anomalies</h2>", 1)[0]
    return re.findall(r'<h3 id="grid-[^"]+">([^<]+)</h3>(.*?)</table>', part, flags=re.S)


def test_overwritten_lost_offsets_are_in_the_replica_table_first(chaos, chaos_report: str
                                                                 ) -> None:
    part, offsets = CHAOS_LOSS
    kinds = [a["kind"] for a in json.loads(
        (chaos.run_dir / "check" / "anomalies.json").read_text())]
    assert kinds == ["lost-write", "lost-write"]
    grids = _grids(chaos_report)
    assert grids[0][0] == part  # the partition with the anomaly comes first
    table = grids[0][1]
    assert f"Anomalies here: <b>lost-write</b> at offsets {', '.join(map(str, offsets))}." \
        in table
    for off in offsets:
        row = re.search(rf'<tr class="[^"]*lost-row">\s*<td class="off">{off}</td>(.*?)</tr>',
                        table, flags=re.S)
        assert row, f"offset {off} is not a row of the {part} table"
        # The acknowledged value struck through, and the record that replaced it.
        assert re.search(r'<span class="lost-val">\d+</span>, <span class="">\d+</span>',
                         row.group(1)), row.group(1)
    # A few rows of context either side; the rest of the log folded.
    shown = [int(o) for o in re.findall(r'<td class="off">(\d+)</td>', table)]
    assert {offsets[0] - 3, offsets[-1] + 3} <= set(shown)
    assert "offsets not shown" in table


def _chart_runs(tmp_path_factory, chaos):
    return {"chaos": chaos.run_dir,
            "power-loss": checked_scenario_runs(tmp_path_factory)[
                "kip101-power-loss-divergence"].run_dir}


def test_progress_chart_data_never_has_hw_above_leo(tmp_path_factory, chaos) -> None:
    for name, run in _chart_runs(tmp_path_factory, chaos).items():
        data = load(run)
        facts = RunFacts(data)
        trace = trace_progress(run)
        parts = sorted({p for ps in (facts.elections, facts.truncs) for p in ps})
        assert parts, name
        for part in parts:
            states = charts.progress_states(data, facts, part, trace)
            assert states, (name, part)
            for node, st in states.items():
                cols = charts.progress_columns(st, 1e3)
                assert cols
                for t, hw, leo in cols:
                    assert all(h <= e for h, e in zip(hw, leo, strict=True)), \
                        (name, part, node, t, hw, leo)
                if name == "chaos":
                    # The LEO follows the appends: it ends where the HW ends or above,
                    # not near 0 while the HW climbs.
                    assert max(c[2][1] for c in cols) >= max(c[1][1] for c in cols) > 1000


def _polylines(svg: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    out = {}
    for node, line, pts in re.findall(
            r'<polyline data-replica="([^"]+)" data-line="(HW|LEO)" points="([^"]*)"', svg):
        out[(node, line)] = [tuple(map(float, p.split(","))) for p in pts.split()]
    return out


def test_progress_charts_draw_no_point_with_hw_above_leo(tmp_path_factory, chaos) -> None:
    """In the rendered SVG: at every x a replica's HW line touches, its highest and
    lowest point are no higher than the LEO line's (y grows downwards)."""
    for name, run in _chart_runs(tmp_path_factory, chaos).items():
        report = render_run(run).read_text()
        svgs = re.findall(r"<h2>Replica progress [^<]+</h2>.*?</svg>", report, flags=re.S)
        assert svgs, name
        for svg in svgs:
            lines = _polylines(svg)
            nodes = {n for n, _ in lines}
            assert nodes and all((n, "LEO") in lines for n in nodes), (name, sorted(lines))
            for n in nodes:
                at: dict[str, dict[float, list[float]]] = {"HW": defaultdict(list),
                                                           "LEO": defaultdict(list)}
                for k in at:
                    for x, y in lines[(n, k)]:
                        at[k][x].append(y)
                for x, ys in at["HW"].items():
                    leo = at["LEO"].get(x)
                    assert leo is not None, (name, n, x)
                    # 0.11: the one-decimal rounding of two equal values
                    assert min(ys) >= min(leo) - 0.11 and max(ys) >= max(leo) - 0.11, \
                        (name, n, x, ys, leo)


def test_cluster_timeline_lanes_span_the_whole_run(chaos, chaos_report: str) -> None:
    chart = chaos_report.split("<h2>Cluster timeline</h2>", 1)[1].split("<h2>", 1)[0]
    note = re.search(r'<p class="muted">(.*?)</p>', chart, flags=re.S).group(1)
    assert "First " not in note
    assert re.search(r"The [\d,]+ operations are drawn in 400 time bins of [\d.]+ ms per "
                     r"client, over the whole run", note), note
    ops = clientops.ops_of(load(chaos.run_dir).history)
    procs = {o["process"] for o in ops if o["process"] != "final"}
    end = {p: max(o["end"] for o in ops if o["process"] == p) for p in procs}
    # Each producer's and consumer's lane reaches its last operation's bin: the
    # right-most client mark of the lane ends within two bins of that time.
    t_end = max(end.values())
    tips = re.findall(r"<title>client (\w+), [^–]+ – ([\d.]+) (ms|s):", chart)
    last = defaultdict(float)
    for p, t, unit in tips:
        last[p] = max(last[p], float(t) / (1e3 if unit == "ms" else 1))
    assert set(procs) <= set(last)
    for p in procs:
        assert last[p] >= end[p] - 2 * t_end / charts.LANE_BINS, (p, last[p], end[p])
    assert min(last[p] for p in procs) > 0.8 * t_end


def test_a_chaos_report_stays_small(chaos_report: str) -> None:
    sections = dict(re.findall(r"<h2[^>]*>([^<]+)</h2>(.*?)(?=<h2|\Z)", chaos_report,
                               flags=re.S))
    assert len(sections["Cluster timeline"]) < 100_000
    assert len(sections["Latency"]) < 150_000
    assert all(len(v) < 100_000 for k, v in sections.items() if k.startswith("Replica progress"))
    assert len(chaos_report.encode()) < 1_000_000


def test_aggregates_do_not_grow_with_the_run() -> None:
    """A 600 s run's worth of operations: each lane keeps at most LANE_BINS stretches,
    a replica's progress at most PROGRESS_COLUMNS columns."""
    ops = [{"process": str(i % 4), "f": "send", "type": "info" if i % 997 == 0 else "ok",
            "start": i / 500, "end": i / 500 + 0.002} for i in range(300_000)]
    lanes = charts.lane_bins(ops, 600.0)
    assert set(lanes) == {"0", "1", "2", "3"}
    for segs in lanes.values():
        assert len(segs) <= charts.LANE_BINS
        assert segs[0][0] == 0 and segs[-1][1] == pytest.approx(600.0)
        assert sum(sum(c.values()) for *_, c in segs) == 75_000
    states = [(i / 1000, i // 2, i) for i in range(600_000)]
    cols = charts.progress_columns(states, 600.0)
    assert len(cols) <= charts.PROGRESS_COLUMNS
    assert cols[-1][2][2] == 599_999 and cols[-1][1][2] == 299_999
