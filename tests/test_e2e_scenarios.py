"""End to end on real broker processes: the three scenarios under the four
protocol versions give exactly the anomalies SCENARIOS.md lists.

All twelve runs go first (a few seconds each), then one Spark job checks them
together, as a nightly batch would; then `isrlab reproduce` itself is run for
the documented pair of KIP-101 commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, descendants, free_port

from harness.progress import Progress
from harness.runner import RunOptions, run_scenario
from harness.scenario import find_scenario, load_scenario

pytestmark = [pytest.mark.e2e]

SCENARIOS = ["kip101-hw-truncation-loss", "kip101-power-loss-divergence",
             "kip279-unclean-divergence"]
PROTOCOLS = ["0.10", "0.11", "2.0", "latest"]
# SCENARIOS.md, per scenario and version: the anomaly kinds the run must show.
EXPECTED = {
    "kip101-hw-truncation-loss": {"0.10": {"lost-write"}, "0.11": set(), "2.0": set(),
                                  "latest": set()},
    "kip101-power-loss-divergence": {"0.10": {"divergence", "lost-write"},
                                     "0.11": {"lost-write"}, "2.0": {"lost-write"},
                                     "latest": {"lost-write"}},
    "kip279-unclean-divergence": {"0.10": {"divergence", "lost-write"},
                                  "0.11": {"divergence", "lost-write"},
                                  "2.0": {"lost-write"}, "latest": {"lost-write"}},
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict:
    runs_dir = tmp_path_factory.mktemp("runs")
    records = {}
    for name in SCENARIOS:
        scenario = load_scenario(find_scenario(name))
        for protocol in PROTOCOLS:
            rec = run_scenario(scenario, RunOptions(protocol=protocol, runs_dir=runs_dir,
                                                    seed=1,
                                                    backend_options={"port": free_port()}),
                               Progress(quiet=True))
            records[name, protocol] = rec
    assert descendants(os.getpid()) == []
    from checker.api import check_runs

    # One checker job per scenario, so a run the checker rejects costs only its
    # own scenario's cases (the Spark session is shared between the jobs).
    out: dict = {}
    for name in SCENARIOS:
        mine = {k: r for k, r in records.items() if k[0] == name and r.error is None}
        try:
            results = check_runs([r.run_dir for r in mine.values()])
        except Exception as e:  # reported by each case of this scenario
            results, failure = [], e
        else:
            failure = None
        by_dir = {Path(r.run_dir).resolve(): r for r in results}
        for k, rec in records.items():
            if k[0] == name:
                out[k] = (rec, by_dir.get(rec.run_dir.resolve()), failure)
    return out


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_verdict(checked: dict, name: str, protocol: str) -> None:
    rec, result, failure = checked[name, protocol]
    assert rec.error is None, f"run incomplete: {rec.error}"
    assert failure is None, f"checker failed: {failure}"
    kinds = {a["kind"] for a in result.anomalies}
    assert kinds == EXPECTED[name][protocol], (rec.run_dir, result.anomalies)
    assert result.verdict == "valid", (result.verdict, result.unexpected, result.missing)
    meta = json.loads((rec.run_dir / "run.json").read_text())
    assert sorted(meta["expect"]) == sorted(EXPECTED[name][protocol])


def test_lost_write_names_m1(checked: dict) -> None:
    """Under 0.10, scenario 1 loses m1 (value 1), acknowledged with acks=all."""
    rec, result, failure = checked["kip101-hw-truncation-loss", "0.10"]
    assert failure is None, f"checker failed: {failure}"
    lost = [a for a in result.anomalies if a["kind"] == "lost-write"]
    assert lost and "1" in json.dumps(lost[0])


@pytest.mark.parametrize("protocol", ["0.10", "0.11"])
def test_reproduce_cli(tmp_path: Path, protocol: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "kip101-hw-truncation-loss",
         "--protocol", protocol, "--json", "--port", str(free_port()),
         "--runs-dir", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["exit_code"] == r.returncode, r.stderr
    assert summary.get("verdict") == "valid", (summary, r.stderr)
    kinds = {a["kind"] for a in summary["anomalies"]}
    assert kinds == EXPECTED["kip101-hw-truncation-loss"][protocol]
