"""Status and event waits: every value is checked when the scenario loads, as
FILE:LINE naming the allowed values, exit 2 -- never a cluster started for a wait
that can only time out (it used to wait 30 s and exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT
from test_cli import isrlab, one_line_error
from tiers import needs, spawned

from contract import EVENT_TYPES
from harness.scenario.loader import load_scenario
from harness.yamlloc import ScenarioError

SOURCE = ROOT / "harness" / "scenario" / "catalogue" / "kip101-hw-truncation-loss.yaml"
GOOD = "  - wait: {node: A, hw: 2}"

BAD = [
    ("{node: A, hw: two}", "hw must be an integer >= 0 (an offset or epoch), got 'two'"),
    ("{node: A, hw: 2.5}", "hw must be an integer >= 0 (an offset or epoch), got '2.5'"),
    ("{node: A, hw: -1}", "hw must be an integer >= 0 (an offset or epoch), got -1"),
    ("{node: A, leo: two}", "leo must be an integer >= 0"),
    ("{node: A, leader_epoch: -1}", "leader_epoch must be an integer >= 0"),
    ("{node: A, hw_checkpoint: true}", "hw_checkpoint must be an integer >= 0"),
    ("{node: A, hw: {ne: two}}", "hw must be an integer >= 0"),
    ("{node: A, role: leaderr}", "role must be one of leader, follower, none, got 'leaderr'"),
    ("{node: A, state: idle}", "state must be one of truncating, fetching, leader, none"),
    ("{node: A, leader: D}", "leader must be one of the brokers A, B, C (or null: none), "
                             "got 'D'"),
    ("{node: A, isr: A}", "isr must be a list of brokers, e.g. [A, B, C], got 'A'"),
    ("{node: A, isr: [A, D]}", "isr: 'D' is not a broker; brokers: A, B, C"),
    ("{node: A, isr: [A, A]}", "isr lists a broker twice"),
    ("{node: A, role: {gt: 1}}", "role gt: only leader_epoch, leo, hw"),
    ("{node: A, epoch_cache: [[0]]}", "epoch_cache must be a list of [epoch, start offset]"),
    ("{node: controller, role: leader}", "unknown status field 'role' of the controller's "
                                         "status; known: leader, leader_epoch, isr"),
    ("{node: A, event: became-folower}", "unknown event 'became-folower'; the brokers and the "
                                         "controller emit: " + ", ".join(EVENT_TYPES)
                                         + "; did you mean 'became-follower'?"),
    ("{node: controller, event: leader-elected, leader: D}",
     "event field leader must be one of A, B, C, got 'D'"),
    ("{node: controller, event: leader-elected, leader_epoch: one}",
     "event field leader_epoch must be an integer >= 0"),
]


def _bad_file(tmp_path: Path, wait: str) -> tuple[Path, int]:
    src = SOURCE.read_text(encoding="utf-8")
    assert GOOD in src
    path = tmp_path / "bad.yaml"
    path.write_text(src.replace(GOOD, f"  - wait: {wait}", 1), encoding="utf-8")
    return path, 1 + src.splitlines().index(GOOD)


@pytest.mark.parametrize(("wait", "said"), BAD)
def test_the_loader_refuses_the_value_at_its_line(tmp_path: Path, wait: str, said: str) -> None:
    path, line = _bad_file(tmp_path, wait)
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert e.value.line == line, str(e.value)
    assert said in str(e.value), str(e.value)


@pytest.mark.parametrize(("wait", "said"), BAD)
def test_reproduce_refuses_it_before_any_cluster(tmp_path: Path, wait: str, said: str) -> None:
    path, line = _bad_file(tmp_path, wait)
    runs = tmp_path / "runs"
    out = one_line_error(isrlab("reproduce", str(path), "--protocol", "0.10", "--backend",
                                "local", "--runs-dir", str(runs)))
    assert [x for x in spawned() if needs(x)] == []  # no node: no 30 s wait timing out
    assert out.startswith(f"isrlab: {path}:{line}: ") and said in out, out
    assert not runs.exists()  # no run directory: nothing started


@pytest.mark.parametrize("wait", [
    "{node: controller, leader: null}", "{node: B, isr: [B, A]}", "{node: A, leo: {ge: 0}}",
    "{node: B, leo: {same-as: A}}", "{node: B, state: truncating}",
    "{node: A, epoch_cache: [[0, 0], [1, 2]]}", "{node: A, event: halt}",
    "{node: controller, event: delay-held, peer: A}", "{node: A, hw: 0}",
])
def test_the_valid_forms_still_load(tmp_path: Path, wait: str) -> None:
    path, _ = _bad_file(tmp_path, wait)
    steps = [s for s in load_scenario(path).steps if s.kind == "wait"]
    assert steps[0].describe().startswith("wait for ")
