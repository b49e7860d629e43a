"""Replicas that differ only in a record's epoch diverge (checker.anomalies.divergence),
and a run large enough for the digest scope (checker.scope) must be reported as a
small one is: the replica logs' digests hash the epoch too (checker.facts). The
scope is made to apply by size, as on a large run, with tiny buckets (8 offsets)
and no size floor."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import checker.scope
from checker.api import RunResult, check_runs
from contract import LOG, REPLICAS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import gen_history  # noqa: E402

pytestmark = pytest.mark.spark

AT = 333  # the offset whose epoch replica B changes


def _set_epoch(run: Path, broker: str, offset: int, epoch: int | None) -> int:
    """Rewrite one record of a replica's log with another epoch (None: no epoch
    stamped); returns its value."""
    path = run / REPLICAS / broker / LOG
    lines = path.read_text().splitlines()
    rec = json.loads(lines[offset])
    assert rec["offset"] == offset
    rec["epoch"] = epoch
    lines[offset] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    return rec["value"]


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("epoch")
    values = {}
    # Stamped with another epoch: divergent. Not stamped at all: not a difference.
    for name, epoch in (("epoch-only", 1), ("epoch-missing", None)):
        gen_history.generate(root / name, 4000, set(), seed=11)
        values[name] = _set_epoch(root / name, "B", AT, epoch)
    mp = pytest.MonkeyPatch()
    mp.setattr(checker.scope, "BUCKET_BITS", 3)
    mp.setattr(checker.scope, "MIN_BYTES", 0)
    try:
        said: list[str] = []
        scoped = check_runs([root], progress=said.append)  # the size decides
        full = check_runs([root], prune=False)
    finally:
        mp.undo()
    return {"scoped": _by_run(scoped), "full": _by_run(full), "said": said, "values": values}


def _by_run(results: list[RunResult]) -> dict[str, Any]:
    return {
        r.run_id: (
            [(a["kind"], a["topic"], a["partition"], a["witness"]) for a in r.anomalies],
            r.summary["figures"],
            r.verdict,
        )
        for r in results
    }


def test_the_scope_was_used(checked: dict[str, Any]) -> None:
    (line,) = [s for s in checked["said"] if s.startswith("digests:")]
    suspect, total = (int(w.replace(",", "")) for w in line.split()[1:4:2])
    assert 0 < suspect <= total * checker.scope.MAX_SUSPECT_SHARE, line


def test_full_check_reports_the_epoch_divergence(checked: dict[str, Any]) -> None:
    anomalies, _, verdict = checked["full"]["epoch-only"]
    value = checked["values"]["epoch-only"]
    assert [a[0] for a in anomalies] == ["divergence"] and verdict == "invalid"
    w = anomalies[0][3]
    assert (w["replicas"], w["first_offset"], w["count"]) == (["A", "B"], AT, 1)
    assert w["offsets"] == [{"offset": AT, "rule": "below-both-hw",
                             "a": {"epoch": 0, "value": value},
                             "b": {"epoch": 1, "value": value}}]
    assert checked["full"]["epoch-missing"][0] == []


def test_scope_reports_exactly_what_the_full_check_does(checked: dict[str, Any]) -> None:
    assert checked["scoped"] == checked["full"]
