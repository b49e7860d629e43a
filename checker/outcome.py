"""What a run's anomalies did to the data, and whether that matches its scenario,
in words (the batch index, the swarm index and JUnit).

A stand-in, kept in this one module so the issue's shared verdict vocabulary
("data lost / replicas diverged / no anomaly" and "reproduced as documented /
unexpected / not reproduced") can replace it in one edit.
"""

from __future__ import annotations

from collections.abc import Iterable

from checker.verdict import ERROR, INCOMPLETE, INVALID, NOT_REPRODUCED, VALID

LOST, DIVERGED, OTHER, CLEAN = "data lost", "replicas diverged", "other anomaly", "no anomaly"
# The banner/tag class of each data outcome (reports/templates/_style.css).
CSS = {LOST: "data-loss", DIVERGED: "data-diverged", OTHER: "data-anomaly", CLEAN: "data-clean"}


def data_words(found: Iterable[str]) -> str:
    """The worst thing the anomaly kinds found say happened to the data."""
    kinds = set(found)
    if "lost-write" in kinds:
        return LOST
    if "divergence" in kinds:
        return DIVERGED
    return OTHER if kinds else CLEAN


def doc_words(verdict: str, scenario: str | None, found: Iterable[str]) -> str:
    """Whether the run matches its scenario's documentation ('' for a run
    without a scenario: a chaos run documents nothing)."""
    if verdict == ERROR:
        return "not checked"
    if verdict == INCOMPLETE:
        return "incomplete"
    if scenario is None:  # a chaos run: reports.batch says allowed or protocol instead
        return ""
    if verdict == INVALID:
        return "unexpected"
    if verdict == NOT_REPRODUCED:
        return "not reproduced"
    if verdict != VALID:
        return ""
    return "reproduced as documented" if any(True for _ in found) else "as documented"
