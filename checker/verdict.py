"""Expectations → verdict (DESIGN.md): valid / invalid / not-reproduced."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

VALID, INVALID, NOT_REPRODUCED = "valid", "invalid", "not-reproduced"
EXIT_CODES = {VALID: 0, INVALID: 1, NOT_REPRODUCED: 1}


@dataclass(frozen=True)
class Verdict:
    verdict: str
    unexpected: list[str]  # kinds found that the run does not allow
    missing: list[str]  # kinds a scenario expects that did not occur

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


def decide(found: Iterable[str], expect: Iterable[str], scenario: str | None) -> Verdict:
    """Any unexpected kind → invalid; else, for a scenario, a missing expected kind →
    not-reproduced; else valid. For a randomized run (no scenario) ``expect`` only
    allows kinds, it does not require them."""
    found_s, expect_s = set(found), set(expect)
    unexpected = sorted(found_s - expect_s)
    missing = sorted(expect_s - found_s) if scenario is not None else []
    if unexpected:
        return Verdict(INVALID, unexpected, missing)
    if missing:
        return Verdict(NOT_REPRODUCED, unexpected, missing)
    return Verdict(VALID, unexpected, missing)
