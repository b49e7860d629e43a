"""Batch pages and JUnit tell runs apart (issue 45, item 7): the index headline in
data terms, a row per run with its scenario or chaos configuration and its
anomaly kinds with counts, chaos kinds grouped by "allowed by the configuration"
vs "protocol", JUnit names with scenario/config and seed, the matrix page's
kinds per run, and the nightly trend chart."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest import skip_unless_required
from conftest_spark import clean, kip101_loss
from test_report_chromium import CHROMIUM, png_pixel, screenshot

from checker import runconfig
from checker.api import RunResult, check_runs, write_junit
from harness.cli import cellrun, matrix
from harness.run.runner import RunRecord
from harness.scenario.loader import find_scenario, load_scenario
from reports.render import render_index
from reports.trendchart import Night, night_chart


def _chaos(rb: Any, seed: int, faults: list[str], acks: Any, min_isr: int, unclean: bool,
           swarm: bool = True) -> Any:
    """A synthetic run made a chaos (and swarm) run: run.json as harness.chaos writes it."""
    rb.meta.update(seed=seed, workload={"acks": acks},
                   broker_config={"min.insync.replicas": min_isr,
                                  "unclean.leader.election.enable": unclean},
                   chaos={"seed": seed, "faults": faults, "time_limit": 20.0, "schedule": []})
    if swarm:
        rb.meta["swarm"] = {"seed": seed, "batch": "b", "config": {
            "faults": ",".join(faults), "acks": acks, "brokers": 3, "partitions": 1,
            "broker": rb.meta["broker_config"], "controller": {}}}
    return rb


@pytest.fixture(scope="module")
def chaos_batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    """Three swarm runs under 0.10, checked in their own small batch: seed 7 lost a
    write under acks=1 and unclean election (allowed), seed 8 lost one under
    acks=all, min ISR 2, unclean off (protocol), seed 9 lost nothing."""
    root = tmp_path_factory.mktemp("swarm")
    _chaos(kip101_loss(root, "seed-7", [], None), 7, ["kill", "pause"], 1, 1, True).write()
    _chaos(kip101_loss(root, "seed-8", [], None), 8, ["kill", "power-cycle"], "all", 2,
           False).write()
    rb = clean(root, "seed-9", [], None, n=10)
    rb.meta["protocol"] = "0.10"
    _chaos(rb, 9, ["pause"], "all", 2, False).write()
    return {r.run_id: r for r in check_runs([root])}


# -- the configuration rule (no Spark) -------------------------------------------

@pytest.mark.parametrize(("acks", "min_isr", "unclean", "faults", "why"), [
    ("all", 2, False, ["kill"], []),
    (1, 2, False, ["kill"], ["acks=1"]),
    ("all", 2, True, ["kill"], ["unclean election on"]),
    ("all", 1, False, ["kill"], []),  # a lone leader that keeps its disk loses nothing
    ("all", 1, False, ["power-cycle"], ["min ISR 1 with power-cycle (unflushed)"]),
])
def test_what_a_configuration_permits(acks, min_isr, unclean, faults, why) -> None:
    meta = {"protocol": "latest", "workload": {"acks": acks}, "chaos": {"faults": faults},
            "broker_config": {"min.insync.replicas": min_isr,
                              "unclean.leader.election.enable": unclean}}
    assert runconfig.permits(meta) == why
    expected = runconfig.ALLOWED if why else runconfig.PROTOCOL
    assert runconfig.attribution("lost-write", meta) == expected
    assert runconfig.attribution("duplicate", meta) == runconfig.PROTOCOL  # never permitted


def test_an_unset_key_takes_its_release_default() -> None:
    # Kafka before 0.11 elected unclean leaders by default (KIP-106 turned it off).
    old = {"protocol": "0.10", "workload": {"acks": "all"}, "chaos": {"faults": ["kill"]},
           "broker_config": {"min.insync.replicas": 2}}
    assert runconfig.permits(old) == ["unclean election on"]
    assert runconfig.permits({**old, "protocol": "latest"}) == []
    assert runconfig.summary(old) == "kill · acks all · min ISR 2 · unclean on"


# -- the batch index -------------------------------------------------------------

def _rows(page: str) -> dict[str, str]:
    """Each run's table row (by the run id in its last cell, linked or not), as HTML."""
    out = {}
    for m in re.finditer(r'<tr class="[\w-]+">(.*?)</tr>', page, flags=re.S):
        last = m.group(1).rsplit("<td>", 1)[1]
        out[re.sub(r"<[^>]+>", "", last).strip()] = m.group(1)
    return out


@pytest.mark.spark
def test_index_headline_is_about_the_data(checked_batch: dict[str, RunResult],
                                          tmp_path: Path) -> None:
    lossy = [checked_batch[n].summary for n in ("loss-expected", "loss-unexpected")]
    page = render_index(lossy, tmp_path / "a" / "index.html").read_text()
    assert re.search(r'class="banner data-loss">\s*<div class="headline">2 of 2 runs lost '
                     r'data</div>', page), page[:2000]
    assert "not valid" not in page.lower()
    rows = _rows(page)
    assert set(rows) == {"loss-expected", "loss-unexpected"}
    assert "reproduced as documented" in rows["loss-expected"]
    assert "kip101-hw-truncation-loss" in rows["loss-expected"]
    assert "lost-write ×1" in rows["loss-unexpected"] and "unexpected" in rows["loss-unexpected"]
    clean_runs = [checked_batch[n].summary for n in ("clean", "clean-allowed")]
    page = render_index(clean_runs, tmp_path / "b" / "index.html").read_text()
    assert re.search(r'class="banner data-clean">\s*<div class="headline">no anomaly in 2 '
                     r'runs</div>', page)
    mixed = [checked_batch[n].summary for n in ("divergence", "clean", "same-leo")]
    page = render_index(mixed, tmp_path / "c" / "index.html").read_text()
    assert "2 of 3 runs lost data" in page  # divergence and same-leo both lost a write too


@pytest.mark.spark
def test_swarm_index_groups_seeds_by_kind_and_configuration(
        chaos_batch: dict[str, RunResult], tmp_path: Path) -> None:
    page = render_index([r.summary for r in chaos_batch.values()],
                        tmp_path / "index.html").read_text()
    assert "2 of 3 runs lost data" in page
    rows = _rows(page)
    # Each row carries its drawn configuration, not "randomized".
    assert "kill,pause · acks 1 · min ISR 1 · unclean on" in rows["seed-7"]
    assert "kill,power-cycle · acks all · min ISR 2 · unclean off" in rows["seed-8"]
    assert "3 brokers, 1 partitions" in rows["seed-9"] and "none" in rows["seed-9"]
    assert "randomized" not in page
    assert "lost-write ×1" in rows["seed-8"] and "(protocol)" in rows["seed-8"]
    assert "(allowed by the configuration)" in rows["seed-7"]
    # The group table: lost-write, seed 8 under protocol, seed 7 allowed (and why).
    (group,) = re.findall(r"<tr>\s*<td>lost-write</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>",
                          page, flags=re.S)
    assert "seed 8" in group[0] and "seed 7" not in group[0]
    assert "seed 7" in group[1] and "acks=1, unclean election on" in group[1]
    assert "Seeds by anomaly kind" in page
    assert "protocol finding ×1" in page and "allowed by the configuration ×1" in page


@pytest.mark.spark
def test_index_banner_colour_in_chromium(chaos_batch: dict[str, RunResult],
                                         checked_batch: dict[str, RunResult],
                                         tmp_path: Path) -> None:
    """Seen in a browser: a batch that lost data has a red banner, a clean one green."""
    if CHROMIUM is None:
        skip_unless_required("ISRLAB_REQUIRE_CHROMIUM", "needs Debian's chromium package")
    lossy = render_index([r.summary for r in chaos_batch.values()], tmp_path / "a" / "i.html")
    clean_page = render_index([checked_batch[n].summary for n in ("clean", "clean-allowed")],
                              tmp_path / "b" / "i.html")
    for page, colour in ((lossy, (0xb3, 0x26, 0x1e)), (clean_page, (0x1f, 0x7a, 0x3d))):
        shot = page.with_suffix(".png")
        assert screenshot(page, shot) == []
        assert png_pixel(shot, 8, 8) == colour


# -- JUnit -----------------------------------------------------------------------

@pytest.mark.spark
def test_junit_names_tell_runs_apart(chaos_batch: dict[str, RunResult],
                                     checked_batch: dict[str, RunResult],
                                     tmp_path: Path) -> None:
    runs = [*chaos_batch.values(), checked_batch["loss-expected"],
            checked_batch["report-divergence"]]
    suite = ET.parse(write_junit(runs, tmp_path / "junit.xml")).getroot()
    cases = [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")]
    assert ("isrlab.chaos", "chaos kill,pause · acks 1 · min ISR 1 · unclean on [0.10] seed 7"
            ) in cases
    assert ("isrlab.chaos", "chaos kill,power-cycle · acks all · min ISR 2 · unclean off "
            "[0.10] seed 8") in cases
    assert ("isrlab.kip101-hw-truncation-loss", "kip101-hw-truncation-loss [0.10] seed 1"
            ) in cases
    assert ("isrlab.kip101-power-loss-divergence",
            "kip101-power-loss-divergence [0.10] seed 4242") in cases
    assert len({n for _, n in cases[:3]}) == 3  # three chaos runs of one version
    out = {c.get("name"): c.find("system-out").text for c in suite.findall("testcase")}
    assert "data lost" in out["chaos kill,pause · acks 1 · min ISR 1 · unclean on [0.10] seed 7"]
    assert "lost-write (protocol)" in out[
        "chaos kill,power-cycle · acks all · min ISR 2 · unclean off [0.10] seed 8"]


# -- the matrix page -------------------------------------------------------------

@pytest.mark.spark
def test_matrix_page_lists_each_runs_kinds_and_report(checked_batch: dict[str, RunResult],
                                                      tmp_path: Path) -> None:
    row = load_scenario(find_scenario("kip101-power-loss-divergence"))
    cell = cellrun.Cell(row=row.run_name, protocol="0.10")
    for name in ("report-divergence", "divergence"):
        r = checked_batch[name]
        cell.records.append(RunRecord(r.run_id, r.run_dir, None, 0.0))
        cell.outcomes.append(cellrun.judge(cell.records[-1], r))
    page = matrix.write_index([cell], [row], ["0.10"], tmp_path / "index.html").read_text()
    items = re.findall(r'<li><a href="([^"]+)">(run \d[^<]*)</a>: <span class="\w+">([^<]*)'
                       r"</span>", page)
    assert [(label, kinds) for _, label, kinds in items] == [
        ("run 1 · seed 4242", "divergence ×1, lost-write ×1"),
        ("run 2 · seed 1", "divergence ×1, lost-write ×1")]
    # Each links its report (or, not rendered, its run directory), relative to the page.
    for (href, _, _), name in zip(items, ("report-divergence", "divergence"), strict=True):
        run_dir = checked_batch[name].run_dir.resolve()
        assert (tmp_path / href).resolve() in (run_dir, run_dir / "check" / "report.html")


# -- the nightly trend chart ------------------------------------------------------

def test_trend_chart_draws_runs_anomalies_and_detection_per_night() -> None:
    nights = [Night("20261120T020000Z", 8, 3, 1, {"lost-write": 5, "divergence": 2},
                    [4.0, 7.5, 12.0]),
              Night("20261121T020000Z", 8, 0, 0, {}, []),
              Night("20261122T020000Z", 6, 1, 0, {"lost-write": 1}, [9.0])]
    svg = night_chart(nights)
    assert svg.startswith("<svg") and "href" not in svg and "<script" not in svg  # offline
    tips = re.findall(r"<title>([^<]*)</title>", svg)
    assert "20261120T020000Z: 8 run(s), 3 with anomalies, 1 not allowed" in tips
    assert "20261120T020000Z: lost-write ×5" in tips and "20261120T020000Z: divergence ×2" in tips
    assert "20261120T020000Z: median 7.5s, 4.0–12.0s over 3 run(s)" in tips
    assert "20261122T020000Z: median 9.0s, 9.0–9.0s over 1 run(s)" in tips
    # The night without a detected loss says so and breaks the median line.
    assert "no loss" in svg and "<polyline" not in svg
    assert all(n.night in svg for n in nights)
    assert night_chart([]) == ""
