"""lost-write and divergence on generated runs, checked together in one Spark batch
(as a nightly tree would be), plus the expectation logic and the files written."""

from __future__ import annotations

import json

import pytest

from checker.api import RunResult

pytestmark = pytest.mark.spark


def kinds(r: RunResult) -> list[str]:
    return sorted(a["kind"] for a in r.anomalies)


def test_lost_write_witness(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["loss-expected"]
    assert kinds(r) == ["lost-write"]
    w = r.anomalies[0]["witness"]
    assert (w["value"], w["acked_offset"], w["acks"]) == (101, 1, "all")
    assert w["op"]["process"] == "0" and w["op"]["index"] == 3
    assert w["final_log"] == {"source": "final-read", "broker": None, "length": 1}
    assert w["final_at_offset"] is None
    assert w["held_by"] == [{"broker": "A", "offset": 1, "epoch": 0}]
    text = r.anomalies[0]["explanation"]
    assert "Value 101" in text and "offset 1" in text and "survives only on replica(s) A" in text


def test_expected_anomaly_is_valid(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["loss-expected"]
    assert (r.verdict, r.exit_code, r.anomalies[0]["expected"]) == ("valid", 0, True)


def test_unexpected_anomaly_is_invalid(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["loss-unexpected"]
    assert (r.verdict, r.exit_code, r.unexpected) == ("invalid", 1, ["lost-write"])
    assert r.anomalies[0]["expected"] is False


def test_divergence_witness(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["divergence"]
    assert kinds(r) == ["divergence", "lost-write"]
    (div,) = [a for a in r.anomalies if a["kind"] == "divergence"]
    w = div["witness"]
    assert w["replicas"] == ["A", "B"] and w["first_offset"] == 1 and w["count"] == 1
    assert w["offsets"] == [
        {
            "offset": 1,
            "rule": "below-both-hw",
            "a": {"epoch": 0, "value": 101},
            "b": {"epoch": 1, "value": 102},
        }
    ]
    assert w["states"]["a"]["hw"] == 2 and w["states"]["b"]["role"] == "leader"
    assert "offset 1" in div["explanation"] and "value 102 (epoch 1)" in div["explanation"]
    # m1 was acked at offset 1 and replaced there by m2: a lost write, not a new kind.
    (lost,) = [a for a in r.anomalies if a["kind"] == "lost-write"]
    assert lost["witness"]["final_at_offset"] == {"value": 102, "epoch": 1}
    assert r.verdict == "valid"


def test_divergence_same_leo_rule(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["same-leo"]
    divs = [a for a in r.anomalies if a["kind"] == "divergence"]
    # Partition 1 differs above the HW with unequal LEOs: not (yet) a divergence.
    assert [(a["partition"], a["witness"]["first_offset"]) for a in divs] == [(0, 2)]
    assert divs[0]["witness"]["offsets"][0]["rule"] == "same-leo"
    # Partition 1: value 8 was acked at offset 1 beyond the final committed log.
    assert [
        (a["partition"], a["witness"]["value"]) for a in r.anomalies if a["kind"] == "lost-write"
    ] == [(1, 8)]


def test_clean_run_is_valid(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["clean"]
    assert (r.verdict, r.exit_code, r.anomalies) == ("valid", 0, [])
    figs = r.summary["figures"]
    assert (figs["sends"], figs["sends_ok"], figs["sends_fail"], figs["sends_info"]) == (
        32,
        30,
        1,
        1,
    )
    assert figs["unseen_acked"] == 0


def test_missing_expected_in_scenario_is_not_reproduced(
    checked_batch: dict[str, RunResult],
) -> None:
    r = checked_batch["clean-not-reproduced"]
    assert (r.verdict, r.exit_code, r.missing) == ("not-reproduced", 1, ["lost-write"])


def test_expect_only_allows_without_scenario(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["clean-allowed"]
    assert (r.verdict, r.exit_code) == ("valid", 0)


def test_fallback_to_leader_log(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["no-final"]
    assert r.summary["final_log_fallback"] is True
    assert r.summary["final_log"][0]["source"] == "leader-log-up-to-hw"
    assert any("leader A" in n for n in r.summary["notes"])
    # HW 1: only offset 0 is committed, so 11 (offset 1) and 12 (offset 2) are lost.
    assert sorted(a["witness"]["value"] for a in r.anomalies) == [11, 12]
    assert r.verdict == "valid"


def test_files_written(checked_batch: dict[str, RunResult]) -> None:
    r = checked_batch["divergence"]
    check = r.run_dir / "check"
    anomalies = json.loads((check / "anomalies.json").read_text())
    summary = json.loads((check / "summary.json").read_text())
    assert anomalies == r.anomalies
    assert summary["verdict"] == r.verdict and summary["exit_code"] == r.exit_code
    assert summary["found"] == {"lost-write": 1, "divergence": 1}
    assert summary["seed"] == 1 and summary["protocol"] == "0.10"
    assert summary["truncated"] == [] and summary["final_log_fallback"] is False
