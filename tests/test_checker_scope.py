"""The digest scope (checker.scope) changes how much the checker reads, never what
it finds: the same runs checked with and without it give identical anomalies,
witnesses and figures. Buckets are made tiny (8 offsets) so that runs of a few
thousand operations have many clean buckets for the scope to leave out."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest_spark import BUILDERS, kip101_divergence, kip101_loss

import checker.scope
from checker.api import RunResult, check_runs
from checker.synth import RunBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import gen_history  # noqa: E402

pytestmark = pytest.mark.spark


def cross_bucket(root: Path, name: str = "cross-bucket", logged: int = 64) -> RunBuilder:
    """Anomalies whose records sit in buckets that all digests call clean:

    - value 7 acked twice, at offsets 7 and 47, both committed and read (duplicate);
    - value 20 failed once, then was sent again, acked, committed and read
      (aborted-read: a read of a value whose send failed);
    - a consumer re-reads offsets 0-15 (a nonmonotonic poll; its reads differ from
      the final log's digest);
    - replica B has an uncommitted tail; two sends timed out but were committed.

    The replicas hold the first ``logged`` offsets only: beyond, the digests of
    the acks, the final read and the consumers agree with no log to compare.
    """
    rb = RunBuilder(root / name, protocol="latest", expect=[])
    values = [100 + o for o in range(64)]
    values[47] = 107  # the retried value 7... stored as 107 at 7 and 47
    rb.send(9, 120, result="fail", error="NOT_ENOUGH_REPLICAS")
    for o, v in enumerate(values):
        if o in (30, 31):
            rb.send(o % 3, v, result="info")
        else:
            rb.send(o % 3, v, o)
    for start in range(0, 64, 8):
        rb.poll(5, start, [(o, values[o]) for o in range(start, start + 8)])
    rb.poll(6, 0, [(o, values[o]) for o in range(16)])
    rb.poll(6, 0, [(o, values[o]) for o in range(16)])
    held = values[:logged]
    rb.replica("A", [(0, v) for v in held], role="leader", isr=["A", "B"])
    rb.replica("B", [(0, v) for v in held] + [(0, 999)], role="follower", leader="A", hw=logged)
    rb.final_read(values)
    return rb


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("scope")
    for kinds, seed in ((set(gen_history.KINDS), 3), (set(), 4),
                        ({"duplicate", "aborted-read", "poll-skip", "lost-write"}, 5)):
        gen_history.generate(root / f"gen-{seed}", 4000, kinds, seed=seed)
    for build in BUILDERS.values():
        build(root).write()
    kip101_loss(root, "kip101-loss", [], None).write()
    kip101_divergence(root, "kip101-divergence").write()
    # A consumer's ok poll that returned nothing, in a partition with a suspect
    # bucket (the replicas diverge): it has no last record to locate (a chaos run
    # under latest made the scoped check fail on element_at of an empty array).
    kip101_divergence(root, "empty-poll").poll(1, 2, [], hw=2).write()
    cross_bucket(root).write()
    cross_bucket(root, "unlogged", logged=8).write()

    mp = pytest.MonkeyPatch()
    mp.setattr(checker.scope, "BUCKET_BITS", 3)
    try:
        said: list[str] = []
        scoped = check_runs([root], prune=True, progress=said.append)
        full = check_runs([root], prune=False)
        # A batch past BUCKET_BYTES gets wider buckets (fewer digests for the driver).
        narrow_from = checker.scope.BUCKET_BYTES
        mp.setattr(checker.scope, "BUCKET_BYTES", 64 << 10)
        wide_said: list[str] = []
        wide = check_runs([root], prune=True, progress=wide_said.append)
        mp.setattr(checker.scope, "BUCKET_BYTES", narrow_from)
        # Set tests too long to list let every row through to the exact joins.
        mp.setattr(checker.scope, "MAX_IN", 0)
        unlisted = check_runs([root], prune=True)
    finally:
        mp.undo()
    return {"scoped": scoped, "full": full, "unlisted": unlisted, "said": said,
            "wide": wide, "wide_said": wide_said}


def _found(results: list[RunResult]) -> dict[str, Any]:
    return {
        r.run_id: (
            [(a["kind"], a["topic"], a["partition"], a["witness"]) for a in r.anomalies],
            r.summary["figures"],
            r.summary["final_log"],
        )
        for r in results
    }


def test_scope_leaves_most_buckets_out(both: dict[str, Any]) -> None:
    suspect, total = _buckets(both["said"])
    assert 0 < suspect < total / 2, both["said"]


def test_scope_finds_exactly_what_a_full_check_finds(both: dict[str, Any]) -> None:
    scoped, full = _found(both["scoped"]), _found(both["full"])
    assert scoped.keys() == full.keys()
    for run in full:
        assert scoped[run] == full[run], run


def _buckets(said: list[str]) -> tuple[int, int]:
    (line,) = [s for s in said if s.startswith("digests:")]
    suspect, total = (int(w.replace(",", "")) for w in line.split()[1:4:2])
    return suspect, total


def test_wider_buckets_for_a_bigger_batch_find_the_same(both: dict[str, Any]) -> None:
    """bucket_bits widens the buckets past BUCKET_BYTES of history: fewer digests,
    the same anomalies, figures and final logs."""
    assert checker.scope.bucket_bits(checker.scope.BUCKET_BYTES) == checker.scope.BUCKET_BITS
    assert checker.scope.bucket_bits(checker.scope.BUCKET_BYTES + 1) \
        == checker.scope.BUCKET_BITS + 1
    assert checker.scope.bucket_bits(checker.scope.BUCKET_BYTES * 8) \
        == checker.scope.BUCKET_BITS + 3
    assert _buckets(both["wide_said"])[1] < _buckets(both["said"])[1] / 4
    assert _found(both["wide"]) == _found(both["full"])


def test_scope_without_set_tests_finds_the_same(both: dict[str, Any]) -> None:
    assert _found(both["unlisted"]) == _found(both["full"])


def test_cross_bucket_anomalies_are_found(both: dict[str, Any]) -> None:
    (r,) = [r for r in both["scoped"] if r.run_id == "cross-bucket"]
    kinds = sorted({a["kind"] for a in r.anomalies})
    assert kinds == ["aborted-read", "duplicate", "nonmonotonic-poll"], r.anomalies
    dup = next(a["witness"] for a in r.anomalies if a["kind"] == "duplicate")
    assert dup["value"] == 107 and [a["offset"] for a in dup["at"]] == [7, 47]
    assert r.summary["figures"]["unseen_acked"] == 0


def test_reads_where_no_log_holds_records_are_in_scope(both: dict[str, Any]) -> None:
    # Value 120's send failed; it was sent again and read at offset 20, in a
    # clean bucket that no replica log reaches.
    (r,) = [r for r in both["scoped"] if r.run_id == "unlogged"]
    (aborted,) = [a["witness"] for a in r.anomalies if a["kind"] == "aborted-read"]
    assert (aborted["value"], aborted["first_poll"]["offset"], aborted["polls"]) == (120, 20, 1)


def test_generated_runs_find_what_was_injected(both: dict[str, Any]) -> None:
    for r in both["scoped"]:
        if r.run_id.startswith("gen-"):
            injected = {i["kind"] for i in _injected(r.run_dir)}
            assert {a["kind"] for a in r.anomalies} == injected, r.run_id


def _injected(run: Path) -> list[dict[str, Any]]:
    return json.loads((run / "injected.json").read_text())
