"""isrlab itself under faults: the harness killed (SIGKILL, SIGINT, SIGTERM) at
seeded points of its start, steps, collection and check leaves run directories
that `isrlab check` judges, and nothing of the run running. The batches go
through bench/self_faults.py (one implementation; `python bench/self_faults.py
--runs 20` is the large one, numbers in bench/README.md): kill points are chosen
by what the harness has observably done (its progress lines, its node logs),
never by a clock, and it is frozen at them before it gets its signal.

Then, without Spark, the two holes those batches found in the harness, each hit
exactly: an interrupt while a run is being closed, and a harness killed right
after it wrote run.json.

The Docker batch needs a Docker engine: skipped without one, a failure under
ISRLAB_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, child_env, docker_or_skip, free_port

from harness.backends.local import leftover_processes

sys.path.insert(0, str(ROOT / "bench"))
import self_faults as sf  # noqa: E402  (bench/ is scripts, not a package)

FAST = "kip279-unclean-divergence"  # the shortest shipped scenario: ~2 s locally
SINGLE = TESTS / "data" / "single-broker.yaml"


def _report(outcomes: list[sf.Outcome], seconds: float) -> str:
    lines = [sf.table(outcomes, seconds)]
    for o in outcomes:
        if not o.ok:
            lines.append(f"run {o.plan.index} ({o.run_dir}): "
                         + "; ".join(o.problems + o.leftovers))
            lines.append(f"  reproduce stderr: {o.reproduce_stderr[-500:]!r}")
            lines.append(f"  check output: {o.check_output[-1500:]!r}")
    return "\n".join(lines)


@pytest.mark.e2e
@pytest.mark.spark
def test_a_killed_local_harness_leaves_checkable_runs_and_nothing_running(tmp_path: Path
                                                                          ) -> None:
    # Seed 4: SIGKILL in a fault window (steps), SIGKILL in the Spark check,
    # SIGTERM while the controller starts (start), SIGKILL after the final read
    # (collection). Each point lies well inside its phase, so the frozen harness
    # is in it however loaded the machine. (An interrupt during the collection
    # itself is hit exactly below.)
    plans = sf.make_plans(4, 4, scenarios=[FAST], max_check_line=1)
    assert [(p.point.phase, p.sig.name) for p in plans] == [
        ("steps", "SIGKILL"), ("checking", "SIGKILL"), ("start", "SIGTERM"),
        ("collection", "SIGKILL")]
    outcomes, seconds = sf.run_batch(plans, tmp_path / "runs", batch_check=True)
    report = _report(outcomes, seconds)
    # Each kill landed in the phase it was planned for (the harness was frozen there).
    assert [o.landed for o in outcomes] == [p.point.phase for p in plans], report
    assert outcomes[0].in_fault, report
    assert [o.status_before for o in outcomes] == ["running", "complete", "incomplete",
                                                   "running"], report
    assert [o.status_after for o in outcomes] == ["crashed", "complete", "incomplete",
                                                  "crashed"], report
    assert all(o.ok for o in outcomes), report
    assert sum(len(o.leftovers) for o in outcomes) == 0, report


@pytest.mark.docker
@pytest.mark.spark
def test_a_killed_docker_harness_leaves_checkable_runs_and_nothing_running(tmp_path: Path
                                                                           ) -> None:
    from harness.backends.docker_image import clean_leftovers, ensure_images

    client = docker_or_skip()
    client.close()
    ensure_images(quiet=True)  # built here, not while a harness waits to be killed
    # Seed 4: SIGKILL in a fault window (its containers run on until the check
    # collects the run), SIGKILL in the Spark check.
    plans = sf.make_plans(2, 4, backend="docker", scenarios=["kip101-hw-truncation-loss"],
                          max_check_line=1)
    assert [(p.point.phase, p.sig.name) for p in plans] == [
        ("steps", "SIGKILL"), ("checking", "SIGKILL")]
    try:
        outcomes, seconds = sf.run_batch(plans, tmp_path / "runs", backend="docker",
                                         batch_check=True)
        report = _report(outcomes, seconds)
        assert [o.landed for o in outcomes] == ["steps", "checking"], report
        assert outcomes[0].in_fault and outcomes[0].networks, report
        assert [o.status_after for o in outcomes] == ["crashed", "complete"], report
        assert all(o.ok for o in outcomes), report
    finally:
        for run_dir in (tmp_path / "runs").glob("*/*/run.json"):
            clean_leftovers(run_id=json.loads(run_dir.read_text())["run_id"])


# -- the harness's own holes, hit exactly --------------------------------------------

# Runs `isrlab ARGS...` in this process after PATCH (Python, with os, signal and
# sys imported) has wrapped a harness function to signal the process itself.
_DRIVER = """
import os, signal, sys
{patch}
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _isrlab_patched(patch: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _DRIVER.format(patch=patch), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env=child_env())


def _reproduce_patched(patch: str, runs: Path) -> tuple[subprocess.CompletedProcess, Path]:
    r = _isrlab_patched(patch, "reproduce", str(SINGLE), "--protocol", "0.11",
                        "--port", str(free_port()), "--runs-dir", str(runs))
    (run_dir,) = runs.iterdir()
    return r, run_dir


_IN_COLLECT = """
import harness.run.collect as collect
_collect = collect.collect_replicas
def collect_replicas(*a, **k):
    os.kill(os.getpid(), signal.{sig})
    return _collect(*a, **k)
collect.collect_replicas = collect_replicas
"""
_IN_TEARDOWN = """
from harness.backends.local import LocalBackend
_teardown = LocalBackend.teardown
def teardown(self):
    os.kill(os.getpid(), signal.{sig})
    return _teardown(self)
LocalBackend.teardown = teardown
"""


@pytest.mark.e2e
@pytest.mark.parametrize(("where", "sig", "said"), [
    (_IN_COLLECT, "SIGINT", "isrlab: interrupted\n"),
    (_IN_TEARDOWN, "SIGTERM", "isrlab: interrupted by SIGTERM\n"),
])
def test_an_interrupt_while_the_run_is_closed_waits_until_it_is(tmp_path: Path, where: str,
                                                                 sig: str, said: str) -> None:
    """Once its steps are done the run is closed in full -- replicas collected,
    cluster torn down, run.json written -- and only then does the interrupt end
    isrlab (exit 3, one line, no check). It used to cut the closing short and
    leave run.json "running", as if the harness had crashed."""
    r, run_dir = _reproduce_patched(where.format(sig=sig), tmp_path / "runs")
    assert (r.returncode, r.stderr) == (3, said), (r.stdout, r.stderr)
    assert "checking" not in r.stdout
    meta = json.loads((run_dir / "run.json").read_text())
    assert (meta["status"], meta["error"]) == ("complete", None), meta
    assert meta["ended_at"] and meta["fault_windows"], meta
    state = json.loads((run_dir / "replicas" / "A" / "state.json").read_text())
    assert state["source"] == "status"  # collected from the live broker
    log = (run_dir / "replicas" / "A" / "log.jsonl").read_text().splitlines()
    assert [json.loads(x)["value"] for x in log] == [0, 1, 2, 3]
    assert leftover_processes(run_dir) == []


_AFTER_RUN_JSON = """
from contract.rundir import RunDirWriter
_write = RunDirWriter.write_meta
def write_meta(self, **fields):
    _write(self, **fields)
    if fields.get("status") == "running":
        os.kill(os.getpid(), signal.{sig})
RunDirWriter.write_meta = write_meta
"""


@pytest.mark.e2e
def test_a_harness_killed_right_after_writing_run_json_leaves_a_readable_prefix(
        tmp_path: Path) -> None:
    """The history and events files exist before run.json says "running": a crashed
    run is never one the checker refuses for want of its history. (They used to be
    created just after, and a harness killed in between left a run that `isrlab
    check` could not read: "history.jsonl: missing file".)"""
    from checker.rundir import read_rundir

    r, run_dir = _reproduce_patched(_AFTER_RUN_JSON.format(sig="SIGKILL"), tmp_path / "runs")
    assert r.returncode == -9, (r.stdout, r.stderr)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
    assert (run_dir / "history.jsonl").read_text() == ""
    assert (run_dir / "events.jsonl").is_file()
    c = _isrlab_patched("", "collect", str(run_dir))
    assert c.returncode == 0 and "A (no data)" in c.stdout, (c.stdout, c.stderr)
    rd = read_rundir(run_dir)  # what the checker reads before Spark: no RunDirError
    assert rd.meta["status"] == "crashed" and rd.brokers == ["A"]


@pytest.mark.e2e
def test_an_interrupt_right_after_run_json_ends_the_run_as_incomplete(tmp_path: Path) -> None:
    """Between run.json and the cluster start an interrupt is held, then ends the
    run like one during its start: closed as incomplete, nothing started."""
    r, run_dir = _reproduce_patched(_AFTER_RUN_JSON.format(sig="SIGINT"), tmp_path / "runs")
    assert (r.returncode, r.stderr) == (3, "isrlab: interrupted by SIGINT; run incomplete\n"), \
        (r.stdout, r.stderr)
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "incomplete" and meta["ended_at"], meta
    assert (run_dir / "history.jsonl").read_text() == ""
    assert not (run_dir / "logs" / "controller.log").exists()  # nothing was started
