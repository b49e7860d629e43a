"""Generated run directories for the checker and report tests, checked together.

All generated runs are written into one tree and checked by ONE check_runs call
(a session fixture), as a nightly batch would be: Spark start-up and query
planning are paid once for the whole suite. tests/conftest.py re-exports the
``checked_batch`` fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT

from checker.api import RunResult, check_runs
from checker.synth import RunBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import gen_history  # noqa: E402  (bench/ is scripts, not a package)


def kip101_loss(root: Path, name: str, expect: list[str], scenario: str | None) -> RunBuilder:
    """Scenario 1 under 0.10: m1 (value 101) acked at offset 1, then truncated away."""
    rb = RunBuilder(root / name, protocol="0.10", scenario=scenario, expect=expect)
    rb.send(0, 100, 0).send(0, 101, 1)
    rb.nemesis("pause", ["A"]).nemesis("kill", ["B"]).nemesis("start", ["B"])
    rb.nemesis("kill", ["A"]).nemesis("start", ["A"])
    rb.replica("A", [(0, 100), (0, 101)], role="follower", hw=1, leader="B", leader_epoch=1)
    rb.replica("B", [(0, 100)], role="leader", hw=1, leader_epoch=1)
    rb.final_read([100])
    return rb


def kip101_divergence(root: Path, name: str) -> RunBuilder:
    """Scenario 2 under 0.10: A keeps m1 at offset 1, B wrote m2 there in epoch 1."""
    rb = RunBuilder(
        root / name,
        protocol="0.10",
        scenario="kip101-power-loss-divergence",
        expect=["divergence", "lost-write"],
    )
    rb.send(0, 100, 0).send(0, 101, 1)
    rb.nemesis("pause", ["A"]).nemesis("power-cycle", ["B"])
    rb.send(0, 102, 1)
    rb.replica("A", [(0, 100), (0, 101)], role="follower", hw=2, leader="B", leader_epoch=1)
    rb.replica("B", [(0, 100), (1, 102)], role="leader", hw=2, leader_epoch=1)
    rb.final_read([100, 102])
    return rb


def clean(
    root: Path, name: str, expect: list[str], scenario: str | None, n: int = 30
) -> RunBuilder:
    rb = RunBuilder(root / name, protocol="latest", scenario=scenario, expect=expect)
    values = list(range(1000, 1000 + n))
    for i, v in enumerate(values):
        rb.send(i % 3, v, i)
        if i % 10 == 9:
            rb.poll(5, i - 9, [(o, values[o]) for o in range(i - 9, i + 1)])
    rb.send(1, 5000, result="fail").send(2, 5001, result="info")
    log = [(0, v) for v in values]
    rb.replica("A", log, role="leader", isr=["A", "B"])
    rb.replica("B", log, role="follower", leader="A")
    rb.final_read(values)
    return rb


def same_leo_divergence(root: Path, name: str) -> RunBuilder:
    """Unclean-election shape: equal LEOs, different records above the HW at offset 2,
    and a difference above the HW with unequal LEOs in another partition (not flagged)."""
    rb = RunBuilder(root / name, protocol="0.11", expect=["divergence", "lost-write"], acks="1")
    rb.send(0, 1, 0).send(0, 2, 1).send(0, 3, 2)
    rb.replica("A", [(0, 1), (0, 2), (2, 3)], role="leader", hw=2, leader_epoch=2)
    rb.replica("B", [(0, 1), (0, 2), (1, 9)], role="follower", hw=2, leader="A", leader_epoch=2)
    rb.final_read([1, 2, 3])
    rb.send(0, 7, 0, partition=1).send(0, 8, 1, partition=1)
    rb.replica("A", [(0, 7), (1, 8)], role="leader", hw=1, leader_epoch=1, partition=1)
    rb.replica("B", [(0, 7), (0, 6), (0, 5)], role="follower", hw=1, partition=1)
    rb.final_read([7], partition=1)
    return rb


def no_final_read(root: Path, name: str) -> RunBuilder:
    """An interrupted run: no final read, so the leader's log up to its HW is used."""
    rb = RunBuilder(root / name, protocol="2.0", expect=["lost-write"])
    rb.send(0, 10, 0).send(0, 11, 1).send(0, 12, 2)
    rb.replica("A", [(0, 10), (0, 11)], role="leader", hw=1, leader_epoch=1)
    rb.replica("B", [(0, 10), (0, 11)], role="follower", hw=1, leader="A", leader_epoch=1)
    return rb


VALUES = list(range(1, 11))  # values 1..10 at offsets 0..9


def base(root: Path, name: str, final: list[int] | None = None, acks: dict | None = None):
    """Ten acked sends, two identical replicas, a final read: no anomaly by itself.
    ``acks`` overrides the acked offset per value; ``final`` the committed values."""
    final = final or VALUES
    rb = RunBuilder(root / name, protocol="latest", expect=[])
    for i, v in enumerate(VALUES):
        rb.send(0, v, (acks or {}).get(v, i))
    return rb, final


def finish(rb: RunBuilder, final: list[int]) -> RunBuilder:
    log = [(0, v) for v in final]
    rb.replica("A", log, role="leader", isr=["A", "B"])
    rb.replica("B", log, role="follower", leader="A")
    rb.final_read(final)
    return rb


def inconsistent_offset(root: Path) -> RunBuilder:
    rb, final = base(root, "inconsistent-offset", acks={5: 7})  # 5 is committed at 4
    return finish(rb, final)


def duplicate(root: Path) -> RunBuilder:
    rb, final = base(root, "duplicate", final=[*VALUES, 5])  # a retried 5 at offset 10
    return finish(rb, final)


def uncommitted_read(root: Path) -> RunBuilder:
    rb, final = base(root, "uncommitted-read")
    rb.send(0, 99, result="info")
    rb.poll(1, 8, [(8, 9), (9, 10), (10, 99)], hw=11)
    return finish(rb, final)


def aborted_read(root: Path) -> RunBuilder:
    rb, final = base(root, "aborted-read", final=[*VALUES, 11])
    rb.send(0, 11, result="fail", error="NOT_ENOUGH_REPLICAS_AFTER_APPEND")
    rb.poll(1, 10, [(10, 11)], hw=11)
    return finish(rb, final)


def nonmonotonic_poll(root: Path) -> RunBuilder:
    rb, final = base(root, "nonmonotonic-poll")
    rb.poll(1, 0, [(0, 1), (1, 2), (2, 3)], hw=3)
    rb.poll(1, 1, [(1, 2), (2, 3), (3, 4)], hw=4)
    return finish(rb, final)


def poll_skip(root: Path) -> RunBuilder:
    rb, final = base(root, "poll-skip")
    rb.poll(1, 0, [(0, 1), (1, 2)], hw=2)
    rb.poll(1, 4, [(4, 5), (5, 6)], hw=6)
    return finish(rb, final)


def hw_regression(root: Path) -> RunBuilder:
    """The HW served by leader A drops within its leader epoch 1."""
    rb, final = base(root, "hw-regression")
    rb.poll(1, 0, [(0, 1)], hw=5, node="A", epoch=1)
    rb.poll(1, 1, [(1, 2)], hw=3, node="A", epoch=1)
    return finish(rb, final)


def hw_drop_leader_change(root: Path) -> RunBuilder:
    """The same drop across a leader change (A in epoch 1, then B in epoch 2): a new
    leader's HW may lag the old one's (KAFKA-2334), not an anomaly."""
    rb, final = base(root, "hw-drop-leader-change")
    rb.poll(1, 0, [(0, 1)], hw=5, node="A", epoch=1)
    rb.poll(1, 1, [(1, 2)], hw=3, node="B", epoch=2)
    rb.poll(1, 2, [(2, 3)], hw=4, node="B", epoch=2)
    return finish(rb, final)


def hw_regression_mixed(root: Path) -> RunBuilder:
    """Process 2 polls A (epoch 1), B (epoch 2), then A again, still serving epoch 1
    with a lower HW than before: flagged against its earlier epoch-1 poll. Old
    polls without an epoch: process 3's drop at one node A is flagged, process 4's
    from A to B is not, process 5's (no node either) is not compared."""
    rb, final = base(root, "hw-regression-mixed")
    rb.poll(2, 0, [(0, 1)], hw=8, node="A", epoch=1)
    rb.poll(2, 1, [(1, 2)], hw=6, node="B", epoch=2)
    rb.poll(2, 2, [(2, 3)], hw=7, node="A", epoch=1)
    rb.poll(3, 0, [(0, 1)], hw=9, node="A")
    rb.poll(3, 1, [(1, 2)], hw=4, node="A")
    rb.poll(4, 0, [(0, 1)], hw=9, node="A")
    rb.poll(4, 1, [(1, 2)], hw=4, node="B")
    rb.poll(5, 0, [(0, 1)], hw=9)
    rb.poll(5, 1, [(1, 2)], hw=4)
    return finish(rb, final)


def resent(root: Path) -> RunBuilder:
    """Value 5 sent twice by process 0, both acked (offsets 4 and 10); a poll by
    another process lands between the second invoke and its completion."""
    rb, final = base(root, "resent", final=[*VALUES, 5])
    rb.meta["expect"] = ["duplicate"]
    fields = {"topic": rb.topic, "partition": 0, "value": 5, "acks": rb.acks}
    rb._op(0, "invoke", "send", **fields)
    rb.poll(1, 0, [(0, 1)], hw=11)
    rb._op(0, "ok", "send", **fields, offset=10)
    return finish(rb, final)


def clean_100k(root: Path) -> RunBuilder:
    """~100k ops: 49k acked sends by 4 producers, 2 consumers reading everything."""
    n, batch = 49_000, 100
    rb = RunBuilder(root / "clean-100k", protocol="latest", expect=[])
    values = [1_000_000 + i for i in range(n)]
    for i, v in enumerate(values):
        rb.send(i % 4, v, i)
    for consumer in (10, 11):
        for start in range(0, n, batch):
            recs = [(o, values[o]) for o in range(start, min(n, start + batch))]
            rb.poll(consumer, start, recs, hw=recs[-1][0] + 1)
    return finish(rb, values)


BUILDERS: dict[str, Callable[[Path], RunBuilder]] = {
    "inconsistent-offset": inconsistent_offset,
    "duplicate": duplicate,
    "uncommitted-read": uncommitted_read,
    "aborted-read": aborted_read,
    "nonmonotonic-poll": nonmonotonic_poll,
    "poll-skip": poll_skip,
    "hw-regression": hw_regression,
}


def divergence_with_events(root: Path) -> RunBuilder:
    rb = kip101_divergence(root, "report-divergence")
    rb.meta["seed"] = 4242
    rb.event("ctl", "leader-elected", topic="t", partition=0, leader="B", epoch=1)
    rb.event("B", "isr-shrink", topic="t", partition=0, isr=["B"])
    return rb


class Generated:
    """bench/gen_history.py output as a batch member: every kind injected once."""

    def __init__(self, root: Path) -> None:
        self.path = root / "generated-all-kinds"

    def write(self) -> Path:
        gen_history.generate(self.path, 3000, set(gen_history.KINDS), seed=7)
        return self.path


def _batch_builders() -> list[Callable[[Path], RunBuilder | Generated]]:
    return [
        lambda r: kip101_loss(r, "loss-expected", ["lost-write"], "kip101-hw-truncation-loss"),
        lambda r: kip101_loss(r, "loss-unexpected", [], None),
        lambda r: kip101_divergence(r, "divergence"),
        lambda r: clean(r, "clean", [], None),
        lambda r: clean(r, "clean-not-reproduced", ["lost-write"], "kip101-hw-truncation-loss"),
        lambda r: clean(r / "deeper" / "tree", "clean-allowed", ["lost-write"], None),
        lambda r: same_leo_divergence(r, "same-leo"),
        lambda r: no_final_read(r, "no-final"),
        divergence_with_events,
        resent,
        hw_drop_leader_change,
        hw_regression_mixed,
        *BUILDERS.values(),
        clean_100k,
        Generated,
    ]


@pytest.fixture(scope="session")
def checked_batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    root = tmp_path_factory.mktemp("nightly")
    builders = _batch_builders()
    for build in builders:
        build(root).write()
    # One tree argument: the checker finds every run under it, in one Spark batch.
    results = check_runs([root])
    assert len(results) == len(builders)
    return {r.run_id: r for r in results}


# -- the same batch on another master -----------------------------------------------

BIG = "clean-100k"  # clean_100k


def wait_for(what: str, ok: Callable[[], object], timeout: float = 90.0) -> None:
    """Return once ok() is true (polled every 0.3 s); fail naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.3)
    raise AssertionError(f"{what} within {timeout:.0f} s")


def checked_on(master: str, tmp_path: Path,
               checked_batch: dict[str, RunResult]) -> list[tuple[dict, RunResult]]:
    """`isrlab check --master MASTER` of the test batch, copied without local[2]'s
    check output and without the 100k-op run (minutes of a cold remote JVM for
    nothing the other runs -- every anomaly kind, a bad run, an unfinished one --
    do not show). Asserts the same runs and verdicts as local[2]; returns each run
    checked without error as (its row in the command's --json, its local result)."""
    (root,) = {Path(os.path.commonpath([str(r.run_dir) for r in checked_batch.values()]))}
    tree = tmp_path / "batch"
    shutil.copytree(root, tree, ignore=shutil.ignore_patterns("check", "index.html", BIG))
    local = {k: r for k, r in checked_batch.items() if r.run_dir.name != BIG}
    assert len(local) >= 10
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", "--master", master, "--no-report",
         "--json", str(tree)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode in (1, 2), out.stderr  # the batch holds invalid and bad runs
    runs = {r["run_id"]: r for r in json.loads(out.stdout)["runs"]}
    assert set(runs) == set(local)
    for run_id, result in local.items():
        assert runs[run_id]["verdict"] == result.verdict, run_id
    return [(runs[k], r) for k, r in local.items() if r.error is None]


def essence(summary: dict, anomalies: list) -> tuple:
    """What a check found: the verdict, the counts per kind, each anomaly's witness."""
    return (summary["verdict"], sorted(summary["found"].items()),
            sorted(json.dumps([a["kind"], a["witness"]], sort_keys=True) for a in anomalies))


def anomalies_of(run_dir: Path | str) -> list:
    return json.loads(Path(run_dir, "check", "anomalies.json").read_text())


# -- runs the harness leaves when something was down or cut short ------------------
# Checked in their own small batch (the Spark session is already up) by
# checked_odd_runs: one check per test session, whichever module asks first.


def down_partition(topic: str, partition: int, leo: int, hw_checkpoint: int,
                   epoch_cache: list[list[int]]) -> dict:
    """A partition of a down broker's state.json, exactly as harness/run/collect.py
    writes it from the data directory: no leader_epoch, isr, replicas, state."""
    return {
        "topic": topic, "partition": partition, "role": "none", "leader": None,
        "leo": leo, "hw": hw_checkpoint, "hw_checkpoint": hw_checkpoint,
        "epoch_cache": epoch_cache, "offline": True,
    }


def down_replica(root: Path) -> RunBuilder:
    """B acked 101 under acks=1, was power-cycled and never restarted; A wrote 102
    at offset 1 in epoch 1. At the end B is read from its data directory. A third
    broker, C, hosts no partition (its state.json lists none, its log is empty)."""
    rb = RunBuilder(root / "down-replica", protocol="0.10", expect=["lost-write", "divergence"],
                    acks="1", brokers=("A", "B", "C"))
    rb.send(0, 100, 0).send(0, 101, 1)
    rb.nemesis("power-cycle", ["B"])
    rb.send(0, 102, 1)
    rb.replica("A", [(0, 100), (1, 102)], role="leader", hw=2, leader_epoch=1, isr=["A"])
    rb.replica("B", [(0, 100), (0, 101)])  # its log as found on disk
    log, _ = rb.replicas["B"]
    rb.replicas["B"] = (log, {"node": "B", "source": "data-dir", "running": False,
                              "partitions": [down_partition("t", 0, 2, 1, [[0, 0]])]})
    rb.replicas["C"] = ([], {"node": "C", "source": "status", "partitions": []})
    rb.final_read([100, 102])
    return rb


TRUNCATED_LINE = '{"index": 12, "time": 13000000, "process": 0, "type": "invo'


def interrupted(root: Path) -> Path:
    """The workload was killed mid-write: history.jsonl ends in a cut-off line
    (line 13), there is no final read, and run.json says the run is incomplete."""
    rb = RunBuilder(root / "interrupted", protocol="latest", expect=[])
    for i, v in enumerate(range(1, 7)):
        rb.send(i % 2, v, i)
    log = [(0, v) for v in range(1, 7)]
    rb.replica("A", log, role="leader", isr=["A", "B"], leader_epoch=0)
    rb.replica("B", log, role="follower", leader="A")
    rb.meta.update(status="incomplete", error="the workload process was killed (SIGKILL)")
    path = rb.write()
    with (path / "history.jsonl").open("a") as fh:
        fh.write(TRUNCATED_LINE)  # no newline: the write was cut off
    return path


_ODD: dict[str, RunResult] = {}


def checked_odd_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    """down-replica and interrupted, checked by the real checker once per session
    (test modules wrap this in a fixture of their own)."""
    if not _ODD:
        root = tmp_path_factory.mktemp("odd-runs")
        down_replica(root).write()
        interrupted(root)
        results = check_runs([root])
        assert len(results) == 2
        _ODD.update({r.run_id: r for r in results})
    return _ODD


# -- the shipped scenarios under 0.10, run for real and checked in one batch -------
# For the report tests (story, Chromium): one local run per scenario, shared by
# every module that asks (checked_scenario_runs), checked by ONE check_runs call.

SHIPPED = ("kip101-hw-truncation-loss", "kip101-power-loss-divergence",
           "kip279-unclean-divergence")
_SCENARIO_RUNS: dict[str, RunResult] = {}


def checked_scenario_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    """scenario name → its checked run under 0.10 (local backend, seed 1)."""
    if not _SCENARIO_RUNS:
        from conftest import free_port

        from harness.progress import Progress
        from harness.run.runner import RunOptions, run_scenario
        from harness.scenario.loader import find_scenario, load_scenario

        root = tmp_path_factory.mktemp("scenario-runs")
        records = {}
        for name in SHIPPED:
            rec = run_scenario(
                load_scenario(find_scenario(name)),
                RunOptions(protocol="0.10", backend="local", runs_dir=root, seed=1,
                           backend_options={"port": free_port()}),
                Progress(quiet=True))
            assert rec.error is None, f"{name}: run incomplete: {rec.error}"
            records[rec.run_dir.resolve()] = name
        results = check_runs(list(records))
        assert len(results) == len(SHIPPED)
        _SCENARIO_RUNS.update({records[r.run_dir.resolve()]: r for r in results})
    return _SCENARIO_RUNS


# -- a chaos run whose loss is an overwritten record, simulated and checked --------
# Seed 11 of `isrlab chaos --protocol 0.10 --faults kill,power-cycle --backend sim`
# (the default rate): C acknowledges t/1 offsets 7925-7926 at 12 s, A truncates
# them away and, elected, writes other values there -- no replica holds the
# acknowledged ones, so the replica table has nothing marked lost to show unless
# it shows the anomaly's offsets themselves.
CHAOS_LOSS_SEED = 11
CHAOS_LOSS = ("t/1", [7925, 7926])
_CHAOS_LOSS: list[RunResult] = []


def checked_chaos_loss(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """The checked sim chaos run of seed CHAOS_LOSS_SEED (14 s of faults)."""
    if not _CHAOS_LOSS:
        _CHAOS_LOSS.append(_checked_chaos(tmp_path_factory.mktemp("chaos-loss"), "0.10",
                                          "kill,power-cycle", CHAOS_LOSS_SEED))
    return _CHAOS_LOSS[0]


# Seed 2 of `isrlab chaos --protocol latest --faults kill,pause --backend sim`
# (14 s, the default rate): no anomaly, and nine followers holding records above
# their HW as they follow a new leader -- a story of what kept them.
CHAOS_VALID_SEED = 2
_CHAOS_VALID: list[RunResult] = []


def checked_chaos_valid(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """The checked sim chaos run of seed CHAOS_VALID_SEED: valid, records kept."""
    if not _CHAOS_VALID:
        _CHAOS_VALID.append(_checked_chaos(tmp_path_factory.mktemp("chaos-valid"), "latest",
                                           "kill,pause", CHAOS_VALID_SEED))
    return _CHAOS_VALID[0]


def _checked_chaos(root: Path, protocol: str, faults: str, seed: int) -> RunResult:
    import io

    from harness.chaos.runs import ChaosConfig, chaos_run
    from harness.progress import Progress
    from harness.run.runner import RunOptions, run_scenario
    from nemesis.schedule import parse_faults

    cfg = ChaosConfig(protocol=protocol, time_limit=14.0, faults=parse_faults(faults))
    scenario, meta = chaos_run(cfg, seed)
    rec = run_scenario(scenario, RunOptions(protocol=protocol, backend="sim", seed=seed,
                                            runs_dir=root, meta=meta), Progress(io.StringIO()))
    assert rec.error is None, rec.error
    (result,) = check_runs([rec.run_dir])
    return result
