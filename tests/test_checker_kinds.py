"""The anomaly kinds beyond lost-write and divergence: for each, a generated run with
exactly that anomaly is flagged with the right witness; a clean run of 100k
operations yields nothing. All runs are checked in one Spark batch."""

from __future__ import annotations

import json

import pytest
from conftest_spark import BUILDERS

from checker.anomalies import REGISTRY
from checker.api import RunResult

pytestmark = pytest.mark.spark


def only(checked_batch: dict[str, RunResult], kind: str) -> dict:
    r = checked_batch[kind]
    assert [a["kind"] for a in r.anomalies] == [kind], r.anomalies
    assert r.verdict == "invalid" and r.unexpected == [kind]
    assert r.anomalies[0]["explanation"]
    return r.anomalies[0]["witness"]


def test_every_kind_is_registered() -> None:
    assert [k.name for k in REGISTRY][2:] == list(BUILDERS)


def test_inconsistent_offset(checked_batch: dict[str, RunResult]) -> None:
    w = only(checked_batch, "inconsistent-offset")
    assert (w["case"], w["value"], w["committed_at"]) == ("moved", 5, [4])
    assert [(o["source"], o["seen_offset"]) for o in w["observed"]] == [("ack", 7)]


def test_duplicate(checked_batch: dict[str, RunResult]) -> None:
    w = only(checked_batch, "duplicate")
    assert w["value"] == 5 and [a["offset"] for a in w["at"]] == [4, 10]


def test_uncommitted_read(checked_batch: dict[str, RunResult]) -> None:
    w = only(checked_batch, "uncommitted-read")
    assert (w["offset"], w["value"], w["polls"], w["final_at_offset"]) == (10, 99, 1, None)
    assert w["first_poll"]["hw"] == 11


def test_aborted_read(checked_batch: dict[str, RunResult]) -> None:
    w = only(checked_batch, "aborted-read")
    assert w["value"] == 11 and w["send"]["error"] == "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    assert (w["first_poll"]["offset"], w["committed_at"]) == (10, [10])


def test_nonmonotonic_poll(checked_batch: dict[str, RunResult]) -> None:
    w = only(checked_batch, "nonmonotonic-poll")
    assert (w["process"], w["before"]["offset"], w["after"]["offset"]) == ("1", 2, 1)


def test_poll_skip(checked_batch: dict[str, RunResult]) -> None:
    w = only(checked_batch, "poll-skip")
    assert (w["before"]["offset"], w["after"]["offset"], w["skipped"]) == (1, 4, [2, 3])


def test_hw_regression(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["hw-regression"]
    w = only(checked_batch, "hw-regression")
    assert (w["before"]["hw"], w["after"]["hw"], w["epoch"]) == (5, 3, 1)
    assert (w["before"]["node"], w["after"]["node"]) == ("A", "A")
    assert "in leader epoch 1" in r.anomalies[0]["explanation"]


def test_hw_drop_across_a_leader_change_is_not_flagged(
    checked_batch: dict[str, RunResult],
) -> None:
    # KAFKA-2334: a new leader's HW may lag the previous leader's.
    r = checked_batch["hw-drop-leader-change"]
    assert (r.verdict, r.anomalies) == ("valid", [])


def test_hw_regression_stale_leader_and_old_histories(
    checked_batch: dict[str, RunResult],
) -> None:
    r = checked_batch["hw-regression-mixed"]
    assert {a["kind"] for a in r.anomalies} == {"hw-regression"}
    by_process = {a["witness"]["process"]: a for a in r.anomalies}
    assert sorted(by_process) == ["2", "3"]
    stale = by_process["2"]["witness"]
    # Compared with its earlier poll of epoch 1, not with epoch 2's in between.
    assert (stale["epoch"], stale["before"]["hw"], stale["after"]["hw"]) == (1, 8, 7)
    old = by_process["3"]
    assert old["witness"]["epoch"] is None
    assert (old["witness"]["before"]["hw"], old["witness"]["after"]["hw"]) == (9, 4)
    assert "same node A" in old["explanation"]


def test_clean_100k_yields_nothing(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["clean-100k"]
    assert (r.verdict, r.anomalies) == ("valid", [])
    assert r.summary["figures"]["ops"] >= 98_000
    assert r.summary["figures"]["unseen_acked"] == 0


def test_generated_run_finds_exactly_the_injected(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["generated-all-kinds"]
    injected = json.loads((r.run_dir / "injected.json").read_text())
    assert sorted(a["kind"] for a in r.anomalies) == sorted(i["kind"] for i in injected)
    by_kind = {a["kind"]: a["witness"] for a in r.anomalies}
    for i in injected:
        w = by_kind[i["kind"]]
        if i["kind"] in ("lost-write", "duplicate", "aborted-read", "uncommitted-read"):
            assert w["value"] == i["value"]
        if i["kind"] == "lost-write":
            assert w["acked_offset"] == i["offset"]
        if i["kind"] == "divergence":
            assert w["first_offset"] == i["offset"]
        if i["kind"] == "inconsistent-offset":
            assert (w["value"], w["committed_at"]) == (i["value"], [i["committed_at"]])
        if i["kind"] == "poll-skip":
            assert w["skipped"] == i["skipped"]


def test_lost_write_explanation_of_an_acks_0_send() -> None:
    """An acks-0 send has no offset (the broker never answers): the explanation says
    so instead of naming an offset."""
    from checker.anomalies.lost_write import explain

    text = explain({"value": 9, "topic": "t", "partition": 0, "acks": "0", "acked_offset": None,
                    "op": {"index": 3, "process": 0},
                    "final_log": {"source": "final-read", "length": 2}})
    assert "acknowledged with acks=0 to t/0 (acks 0: counted done once written" in text
    assert "offset None" not in text


def test_a_small_batch_finds_what_the_union_of_the_kinds_finds(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small batch runs one query per kind from two threads, a large one the
    kinds' union (checker.api._kinds_union): the same anomalies, witnesses and
    totals either way, for runs where every kind has something to find."""
    from conftest_spark import Generated, kip101_divergence

    import checker.api as api
    import checker.spark as cs

    kip101_divergence(tmp_path, "divergence").write()
    for build in BUILDERS.values():
        build(tmp_path).write()
    Generated(tmp_path).write()

    def found(small_batch_bytes: int) -> dict[str, tuple]:
        monkeypatch.setattr(cs, "SMALL_BATCH_BYTES", small_batch_bytes)
        return {r.run_id: (r.anomalies, r.summary["found"]) for r in api.check_runs([tmp_path])}

    side_by_side, union = found(1 << 40), found(0)
    assert side_by_side == union
    kinds = {a["kind"] for anomalies, _ in union.values() for a in anomalies}
    assert kinds == {k.name for k in REGISTRY}
