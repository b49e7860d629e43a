"""Expectations → verdict (docs/anomalies.md#verdicts): valid / invalid /
not-reproduced / incomplete, and error for a run that could not be read; a batch's
exit status (docs/exit-codes.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract import UNFINISHED
from contract.rundir import RunDirError

VALID, INVALID, NOT_REPRODUCED = "valid", "invalid", "not-reproduced"
INCOMPLETE = "incomplete"  # the run did not finish: its prefix was judged
ERROR = "error"  # the run directory is malformed: not judged at all
VERDICTS = (VALID, INVALID, NOT_REPRODUCED, INCOMPLETE, ERROR)
EXIT_CODES = {VALID: 0, INVALID: 1, NOT_REPRODUCED: 1, ERROR: 2, INCOMPLETE: 3}


@dataclass(frozen=True)
class Verdict:
    verdict: str
    unexpected: list[str]  # kinds found that the run does not allow
    missing: list[str]  # kinds a scenario expects that did not occur (a finished run)
    # Kinds a scenario expects that its prefix did not show: not judged, since the
    # part the run never recorded might have shown them (an unfinished run only).
    unjudged: list[str]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


def decide(found: Iterable[str], expect: Iterable[str], scenario: str | None,
           status: str | None = None) -> Verdict:
    """Any unexpected kind → invalid (a violation in a prefix is a violation);
    else a run that did not finish (run.json ``status`` in contract.UNFINISHED) →
    incomplete, its missing expected kinds unjudged; else, for a scenario, a
    missing expected kind → not-reproduced; else valid. For a randomized run (no
    scenario) ``expect`` only allows kinds, it does not require them."""
    found_s, expect_s = set(found), set(expect)
    unexpected = sorted(found_s - expect_s)
    missing = sorted(expect_s - found_s) if scenario is not None else []
    if status in UNFINISHED:
        verdict = INVALID if unexpected else INCOMPLETE
        return Verdict(verdict, unexpected, [], missing)
    if unexpected:
        return Verdict(INVALID, unexpected, missing, [])
    if missing:
        return Verdict(NOT_REPRODUCED, unexpected, missing, [])
    return Verdict(VALID, unexpected, missing, [])


def batch_exit_code(verdicts: Iterable[str]) -> int:
    """The exit status of `isrlab check` over a batch: 2 if any run could not be
    read (error), else 1 if any is invalid or not-reproduced, else 3 if any is
    incomplete, else 0 (every run valid; also for an empty batch). A violation
    found outranks a run that could not be judged in full, as within one run."""
    codes = {EXIT_CODES[v] for v in verdicts}
    for code in (2, 1, 3):
        if code in codes:
            return code
    return 0


# One run's checked result: what `isrlab check` prints, JUnit and the report read.
@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    verdict: str
    anomalies: list[dict[str, Any]]
    expected: list[str]
    exit_code: int
    scenario: str | None = None
    protocol: str | None = None
    unexpected: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    status: str | None = None  # run.json's (contract.RUN_STATUSES)
    # Expected kinds an unfinished run's prefix did not show: not judged.
    unjudged: list[str] = field(default_factory=list)
    error: RunDirError | None = None  # why the run could not be checked (verdict error)
