"""The verdict in words (issue 45, item 2; docs/verdicts.md): what happened to the
data, and separately whether that is what the run documents. Pure functions:
no Spark."""

from __future__ import annotations

import pytest

from checker.verdict import (
    DATA_WORDS,
    INCOMPLETE,
    INVALID,
    NOT_REPRODUCED,
    VALID,
    decide,
    outcome,
    outcome_of,
    tally,
    tally_line,
    with_words,
)
from contract import ANOMALY_KINDS


def _summary(found: dict[str, int], expected: list[str], scenario: str | None,
             status: str | None = None) -> dict:
    v = decide(found, expected, scenario, status)
    return with_words({"found": found, "expected": expected, "scenario": scenario,
                       "verdict": v.verdict})


def test_every_kind_has_data_words() -> None:
    assert list(DATA_WORDS) == list(ANOMALY_KINDS)


@pytest.mark.parametrize(("found", "expected", "scenario", "status", "line", "verdict"), [
    # The 0.10 loss: the verdict value is valid, the words say the data was lost.
    ({"lost-write": 1}, ["lost-write"], "kip101", None,
     "data lost (lost-write) — reproduced as documented", VALID),
    ({}, [], "kip101", None, "no anomaly — as documented", VALID),
    ({"divergence": 2}, [], "kip101", None, "replicas diverged (divergence ×2) — unexpected",
     INVALID),
    ({}, ["lost-write"], "kip101", None, "no anomaly — not reproduced", NOT_REPRODUCED),
    # Most severe first, whatever the dict's order.
    ({"divergence": 1, "lost-write": 3}, ["lost-write", "divergence"], "s", None,
     "data lost, replicas diverged (divergence, lost-write ×3) — reproduced as documented",
     VALID),
    ({}, ["lost-write"], "kip101", "incomplete", "no anomaly — run incomplete", INCOMPLETE),
    # A chaos run documents nothing: the data outcome alone ...
    ({"lost-write": 1}, [], None, None, "data lost (lost-write)", INVALID),
    ({}, [], None, None, "no anomaly", VALID),
    # ... unless its configuration allows kinds (acks 1): what it found is allowed
    # or not.
    ({"lost-write": 1}, ["lost-write"], None, None,
     "data lost (lost-write) — allowed by the configuration", VALID),
    ({"divergence": 1}, ["lost-write"], None, None, "replicas diverged (divergence) — unexpected",
     INVALID),
    ({}, ["lost-write"], None, None, "no anomaly", VALID),
])
def test_outcome_line(found, expected, scenario, status, line, verdict) -> None:
    s = _summary(found, expected, scenario, status)
    assert s["verdict"] == verdict  # the values stay, for scripts and exit codes
    assert outcome_of(s).line(found) == line
    assert s["data"] == line.split(" (")[0].split(" — ")[0]


def test_error_is_not_checked() -> None:
    o = outcome({}, ["lost-write"], "error", "kip101")
    assert (o.data, o.documentation) == ("not checked", "run unreadable")


def test_tally_counts_each_run_once_under_its_most_severe_kind() -> None:
    runs = ([_summary({"lost-write": 1}, ["lost-write"], "s")] * 2
            + [_summary({"divergence": 1, "lost-write": 1}, [], "s")]
            + [_summary({}, [], "s")] * 26 + [_summary({}, [], None)])
    t = tally(runs)
    # A chaos run (the last) has no documentation word: counted in the data only.
    assert t == {"runs": 30, "data": {"data lost": 3, "no anomaly": 27},
                 "documentation": {"as documented": 28, "unexpected": 1}}
    assert tally_line(t) == "30 runs: 3 data lost, 27 no anomaly; 28 as documented, 1 unexpected"
    one = tally([_summary({}, [], None)])
    assert tally_line(one) == "1 run: 1 no anomaly"
