"""A single run takes its own fast paths through checker.load -- no per-line file
metadata, the run key a constant added after the checkpoint, the logs read one
broker at a time, the run keys not looked up -- so the same run checked alone
and inside a batch of runs must give the same results, field for field (the
run's directory apart), with and without the digest scope."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import checker.scope
from checker.api import RunResult, check_runs
from contract import ANOMALY_KINDS, HISTORY, REPLICAS, RUN_JSON

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import gen_history  # noqa: E402

pytestmark = pytest.mark.spark

# A space: %-encoded in the file URIs Spark names; brackets: a glob character
# class, were the paths read as patterns.
SOLO = "solo run [1]"
BROKER = "B+1"  # a '+': URL decoding would turn it into a space


def _write_solo(path: Path) -> Path:
    """Every anomaly kind once, a broker with an awkward name, an interrupted last line."""
    gen_history.generate(path, 1500, set(gen_history.KINDS), seed=21)
    (path / REPLICAS / "B").rename(path / REPLICAS / BROKER)
    meta = json.loads((path / RUN_JSON).read_text())  # the broker is B+1 in run.json too
    meta["cluster"]["brokers"] = [BROKER if b == "B" else b for b in meta["cluster"]["brokers"]]
    (path / RUN_JSON).write_text(json.dumps(meta))
    with (path / HISTORY).open("a") as fh:
        fh.write('{"index": 99999, "time": 1, "pro')
    return path


@pytest.fixture(scope="module", params=[False, True], ids=["everything", "scoped"])
def results(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[RunResult, dict[str, RunResult]]:
    root = tmp_path_factory.mktemp("single")
    alone = _write_solo(root / "alone" / SOLO)
    batch = root / "batch"
    shutil.copytree(alone, batch / SOLO)
    # Another run with the same topic, partition and values.
    gen_history.generate(batch / "other", 1000, {"lost-write", "duplicate"}, seed=22)
    mp = pytest.MonkeyPatch()
    mp.setattr(checker.scope, "BUCKET_BITS", 3)  # many buckets, most of them clean
    try:
        (one,) = check_runs([alone], prune=request.param)
        many = {r.run_id: r for r in check_runs([batch], prune=request.param)}
    finally:
        mp.undo()
    return one, many


def _comparable(r: RunResult) -> dict[str, Any]:
    summary = {k: v for k, v in r.summary.items() if k not in ("run_dir", "checked_at")}
    return {
        "run_id": r.run_id,
        "verdict": r.verdict,
        "exit_code": r.exit_code,
        "expected": r.expected,
        "unexpected": r.unexpected,
        "missing": r.missing,
        "scenario": r.scenario,
        "protocol": r.protocol,
        "anomalies": r.anomalies,
        "summary": summary,
    }


def test_alone_and_in_a_batch_agree(results: tuple[RunResult, dict[str, RunResult]]) -> None:
    one, many = results
    assert sorted(many) == ["other", SOLO]
    assert one.run_dir != many[SOLO].run_dir
    assert _comparable(one) == _comparable(many[SOLO])


def test_the_run_is_not_trivial(results: tuple[RunResult, dict[str, RunResult]]) -> None:
    one, many = results
    assert sorted({a["kind"] for a in one.anomalies}) == sorted(ANOMALY_KINDS)
    (div,) = [a["witness"] for a in one.anomalies if a["kind"] == "divergence"]
    assert div["replicas"] == ["A", BROKER]
    assert [t["file"] for t in one.summary["truncated"]] == [HISTORY]
    assert sorted({a["kind"] for a in many["other"].anomalies}) == ["duplicate", "lost-write"]
