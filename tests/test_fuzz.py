"""Fuzzing as a test: a seeded slice of bench/fuzz.py's targets.

Each target -- the scenario loader as `reproduce` uses it, the nightly and hosts
loaders, the run-directory reader `check` uses before Spark, and every command's
command line -- gets inputs mutated from valid seeds of the repository by the
bench's seeded generator (the same slice on every run). Each input runs in a
child forked from the bench, confined to a temp directory, with a per-input
timeout and a memory limit; the property is that the outcome is success or a
clean error (one line, exit 2, FILE:LINE for a file), never another exception, a
hang or memory without bound. The slices run the bench as a process of its own:
a child forked from this pytest process, which may hold Spark's and the checker
client's threads, could inherit a lock one of them held. The first tests show
that the harness itself tells the outcomes apart. The long runs and their
figures are bench/fuzz.py's (bench/README.md).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import fuzz  # noqa: E402

from harness.errors import UsageError  # noqa: E402

TARGETS = fuzz.targets()


@pytest.fixture(scope="module")
def _seed_run() -> Any:
    """The sim run directory the harness tests' command lines start from, made once
    and removed after."""
    fuzz.seed_run()
    yield
    fuzz.cleanup()


# -- the harness tells the outcomes apart ----------------------------------------------


def _target(call: Any, mem_mb: int = fuzz.MEM_MB) -> fuzz.Target:
    return fuzz.Target("probe", lambda _rng: fuzz.Input("probe"), call, mem_mb=mem_mb)


class _TwoLines(UsageError):
    def __str__(self) -> str:
        return "a\nb"


def _raise(e: BaseException) -> Any:
    raise e


def test_harness_counts_a_clean_error_and_a_traceback() -> None:
    error = fuzz.run_input(_target(lambda w, i: fuzz.classify_error(
        UsageError("scenario.yaml:3: unknown key 'stpes'"), Path("scenario.yaml"))),
        fuzz.Input("probe"))
    assert (error.outcome, error.detail) == ("error", "scenario.yaml:3: unknown key 'stpes'")
    whole = fuzz.run_input(_target(lambda w, i: fuzz.classify_error(
        UsageError("scenario.yaml: more than 256 KiB"), Path("scenario.yaml"))),
        fuzz.Input("probe"))
    assert whole.outcome == "error"
    no_file = fuzz.run_input(_target(lambda w, i: fuzz.classify_error(
        UsageError("unknown key 'stpes'"), Path("scenario.yaml"))), fuzz.Input("probe"))
    assert no_file.outcome == "traceback" and "not scenario.yaml:LINE" in no_file.detail
    two_lines = fuzz.run_input(_target(lambda w, i: fuzz.classify_error(
        _TwoLines(), None)), fuzz.Input("probe"))
    assert two_lines.outcome == "traceback" and "not one line" in two_lines.detail
    crash = fuzz.run_input(_target(lambda w, i: _raise(KeyError("steps"))), fuzz.Input("probe"))
    assert crash.outcome == "traceback" and crash.detail.startswith("KeyError")


def test_harness_stops_a_hang_and_a_memory_bomb() -> None:
    hang = fuzz.run_input(_target(lambda w, i: [None for _ in iter(int, 1)]),
                          fuzz.Input("probe"), timeout=1)
    assert hang.outcome == "hang"
    bomb = fuzz.run_input(_target(lambda w, i: bytearray(1 << 30), mem_mb=128),
                          fuzz.Input("probe"))
    assert bomb.outcome == "memory"


def test_harness_stops_an_input_before_it_starts_or_writes_anything(tmp_path: Path,
                                                                    _seed_run: Any) -> None:
    """A child that gets as far as writing outside its directory, starting a process
    or a cluster is stopped there: its checks passed, and nothing happened."""
    outside = tmp_path / "written"
    wrote = fuzz.run_input(_target(lambda w, i: outside.write_text("x")), fuzz.Input("probe"))
    assert wrote.outcome == "ok" and "stopped at: write" in wrote.detail
    assert not outside.exists()
    cli = TARGETS["cli"]
    exported = tmp_path / "exported.yaml"
    export = fuzz.run_input(cli, fuzz.Input("probe", argv=[
        "export", fuzz.RUN, "--out", str(exported)]))
    assert export.outcome == "ok" and "stopped at: " in export.detail
    assert str(tmp_path) in export.detail
    assert not exported.exists()
    sim = fuzz.run_input(cli, fuzz.Input("probe", argv=[
        "trace", "hw-lags-one-fetch", "--protocol", "latest"]))
    assert sim.outcome == "ok" and "stopped at: start a sim cluster" in sim.detail


# -- the targets -------------------------------------------------------------------------


# A slice per target, the first inputs of seed 0: the property on every kind of
# input; the thousands that look for new failures are the bench's (bench/README.md).
@pytest.mark.parametrize(("target", "inputs"), [
    ("scenario", 100), ("nightly", 60), ("hosts", 60), ("rundir", 80), ("cli", 80),
    ("outputs", 50)])
def test_fuzz_target(target: str, inputs: int) -> None:
    """`bench/fuzz.py --seed 0` on the target: every input ok or a clean error."""
    r = subprocess.run([sys.executable, str(BENCH / "fuzz.py"), "--seed", "0", "--inputs",
                        str(inputs), "--target", target, "--show", "10"],
                       capture_output=True, text=True, timeout=1200)
    row = next((ln.split() for ln in r.stdout.splitlines() if ln.startswith(f"{target} ")), None)
    assert row is not None, (r.stdout, r.stderr)
    # target inputs ok errors tracebacks hangs memory peak s
    assert int(row[1]) == inputs and int(row[2]) + int(row[3]) == inputs, r.stdout
    assert (row[4], row[5], row[6]) == ("0", "0", "0"), r.stdout
    assert r.returncode == 0, (r.stdout, r.stderr)
