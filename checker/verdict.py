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


# -- the words a person reads (docs/verdicts.md) ---------------------------------
# A verdict value says how a run compares with what it allows; read alone,
# "valid" sounds like "no data lost" even when a documented loss reproduced. The
# words lead with what happened to the data and say separately whether that is
# what the scenario documents. The values above stay, for scripts and exit codes.

# What each anomaly kind did to the data, in contract.ANOMALY_KINDS' order.
DATA_WORDS = {
    "lost-write": "data lost",
    "divergence": "replicas diverged",
    "inconsistent-offset": "records moved",
    "duplicate": "records duplicated",
    "uncommitted-read": "uncommitted records read",
    "aborted-read": "failed writes read",
    "nonmonotonic-poll": "reads went backwards",
    "poll-skip": "reads skipped records",
    "hw-regression": "high watermark went back",
}
NO_ANOMALY = "no anomaly"
NOT_CHECKED = "not checked"  # a run that could not be read (verdict error)

# Whether that matches the run's documentation (its scenario's `expect`, or the
# kinds a chaos run's configuration allows).
AS_DOCUMENTED = "as documented"  # nothing documented, nothing found
REPRODUCED = "reproduced as documented"  # the documented kinds, and nothing else
UNEXPECTED = "unexpected"
NOT_REPRODUCED_WORD = "not reproduced"
ALLOWED = "allowed by the configuration"  # a chaos run's finding its config permits
UNFINISHED_WORD = "run incomplete"
UNREADABLE = "run unreadable"


@dataclass(frozen=True)
class Outcome:
    data: str  # what happened to the data: "data lost", "no anomaly", ...
    documentation: str | None  # how that compares with the documentation; None: nothing to compare

    def line(self, found: dict[str, int] | None = None) -> str:
        """`data lost (lost-write ×3) — reproduced as documented`."""
        kinds = ", ".join(k if n == 1 else f"{k} ×{n}" for k, n in (found or {}).items())
        text = self.data + (f" ({kinds})" if kinds else "")
        return text + (f" — {self.documentation}" if self.documentation else "")


def _ordered(found: Iterable[str]) -> list[str]:
    order = {k: i for i, k in enumerate(DATA_WORDS)}
    return sorted(set(found), key=lambda k: (order.get(k, len(order)), k))


def data_word(found: Iterable[str], verdict: str) -> str:
    """What happened to the data: the words of each kind found, most severe first
    (docs/anomalies.md's order), "no anomaly", or "not checked" (verdict error)."""
    if verdict == ERROR:
        return NOT_CHECKED
    kinds = _ordered(found)
    return ", ".join(DATA_WORDS.get(k, k) for k in kinds) if kinds else NO_ANOMALY


def outcome(found: Iterable[str], expected: Iterable[str], verdict: str,
            scenario: str | None) -> Outcome:
    """The two things a person asks of a run (docs/verdicts.md): what happened to
    the data, and whether that matches the documentation. A scenario run is
    "reproduced as documented" (or "as documented" when it documents no anomaly),
    "unexpected" (a kind it does not document, or a failed figure assertion) or
    "not reproduced"; a run without a scenario (chaos, swarm) documents nothing,
    so it gets the data outcome alone, or "allowed by the configuration" /
    "unexpected" when its configuration allows kinds (acks 1, unclean election)."""
    found_l = _ordered(found)
    data = data_word(found_l, verdict)
    if verdict == ERROR:
        return Outcome(data, UNREADABLE)
    if verdict == INCOMPLETE and not found_l:
        return Outcome(data, UNFINISHED_WORD)
    if scenario is None and not set(expected):
        return Outcome(data, UNFINISHED_WORD if verdict == INCOMPLETE else None)
    if verdict == INVALID:
        doc: str | None = UNEXPECTED
    elif verdict == NOT_REPRODUCED:
        doc = NOT_REPRODUCED_WORD
    elif verdict == INCOMPLETE:
        doc = UNFINISHED_WORD
    elif scenario is None:
        doc = ALLOWED if found_l and set(expected) else None
    else:
        doc = REPRODUCED if found_l else AS_DOCUMENTED
    return Outcome(data, doc)


def outcome_of(summary: dict[str, Any]) -> Outcome:
    """outcome() of a check/summary.json (or RunResult.summary): what the report's
    badge, the index, JUnit and the terminal say of the run."""
    return outcome(summary.get("found") or {}, summary.get("expected") or [],
                   summary.get("verdict") or ERROR, summary.get("scenario"))


def with_words(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with its outcome's words as fields `data` and `documentation`
    (the verdict value stays, for compatibility)."""
    o = outcome_of(summary)
    return {**summary, "data": o.data, "documentation": o.documentation}


def tally(summaries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A batch in the words above: runs, and how many under each data outcome
    (each run counted once, under its most severe kind) and each documentation
    word ("reproduced as documented" counted as "as documented")."""
    runs = 0
    data: dict[str, int] = {}
    docs: dict[str, int] = {}
    for s in summaries:
        runs += 1
        o = outcome_of(s)
        first = o.data.split(", ")[0]
        data[first] = data.get(first, 0) + 1
        if o.documentation is not None:
            word = AS_DOCUMENTED if o.documentation == REPRODUCED else o.documentation
            docs[word] = docs.get(word, 0) + 1
    return {"runs": runs, "data": data, "documentation": docs}


def tally_line(t: dict[str, Any]) -> str:
    """`30 runs: 2 data lost, 1 replicas diverged, 27 no anomaly; 29 as documented,
    1 unexpected`: data outcomes most severe first, then the documentation words
    in a fixed order."""
    order = [*DATA_WORDS.values(), NO_ANOMALY, NOT_CHECKED]
    data = sorted(t["data"].items(), key=lambda kv: order.index(kv[0]) if kv[0] in order
                  else len(order))
    line = f"{t['runs']} run{'' if t['runs'] == 1 else 's'}: " + ", ".join(
        f"{n} {w}" for w, n in data)
    if t["documentation"]:
        docs = [AS_DOCUMENTED, UNEXPECTED, NOT_REPRODUCED_WORD, ALLOWED, UNFINISHED_WORD,
                UNREADABLE]
        line += "; " + ", ".join(f"{n} {w}" for w, n in sorted(
            t["documentation"].items(),
            key=lambda kv: docs.index(kv[0]) if kv[0] in docs else len(docs)))
    return line
