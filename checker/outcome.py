"""A run's outcome as the batch pages and JUnit group it: the worst of four data
outcomes (a headline and a colour each) and the documentation word, both from
checker.verdict's vocabulary (docs/verdicts.md), the one source of the words.
"""

from __future__ import annotations

from collections.abc import Iterable

from checker.verdict import DATA_WORDS, NO_ANOMALY, outcome

LOST, DIVERGED = DATA_WORDS["lost-write"], DATA_WORDS["divergence"]
OTHER, CLEAN = "other anomaly", NO_ANOMALY
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
    """Whether the run matches its scenario's documentation (checker.verdict.outcome;
    '' for a run without a scenario: a chaos run documents nothing, and the batch
    pages say "allowed by the configuration" or "protocol" per kind instead)."""
    return outcome(found, [], verdict, scenario).documentation or ""
