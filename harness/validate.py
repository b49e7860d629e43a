"""Validation helpers that turn wrong values into `FILE:LINE: what` errors."""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any

from broker.protocol import VERSIONS, canonical
from contract import CONTROLLER, PROTOCOLS
from harness.duration import MAX_SECONDS, DurationError, parse_duration
from harness.yamlloc import LocMap, LocSeq, ScenarioError

# The largest value each kind of number in an input file may take (docs/scenarios.md,
# "Limits"): past these a value is a typo, and a run of it would not end. Durations
# have theirs in harness.duration (7 days); broker and controller settings Kafka's
# own ranges (broker/config.py).
MAX_INT64 = 2**63 - 1
LIMITS = {
    "sends": 10_000_000,  # a produce or consume step's n
    "clients": 1_000,  # producers, consumers
    "partitions": 10_000,  # a topic's partitions, a partition's index
    "batch": 1_000_000,  # records per request, a burst
    "ms": int(MAX_SECONDS * 1000),  # timeout_ms, retry_ms: the durations' 7 days
    "seed": MAX_INT64,
}
MAX_RATE = 1_000_000.0  # sends per second


class Validator:
    """Validation helpers bound to one file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def err(self, line: int | None, msg: str) -> ScenarioError:
        return ScenarioError(self.path, line, msg)

    def mapping(self, v: Any, line: int, what: str) -> LocMap:
        if not isinstance(v, LocMap):
            raise self.err(line, f"{what} must be a mapping")
        return v

    def seq(self, v: Any, line: int, what: str) -> LocSeq:
        if not isinstance(v, LocSeq):
            raise self.err(line, f"{what} must be a list")
        return v

    def keys(self, m: LocMap, allowed: tuple[str, ...], what: str,
             required: tuple[str, ...] = ()) -> None:
        for k in m:
            if k not in allowed:
                near = difflib.get_close_matches(str(k), allowed, n=1)
                raise self.err(m.line_of(k), f"unknown key {k!r} in {what}; "
                                             f"allowed: {', '.join(allowed)}"
                                             + (f"; did you mean {near[0]!r}?" if near else ""))
        for k in required:
            if k not in m:
                raise self.err(m.line, f"{what} is missing {k!r}")

    def string(self, v: Any, line: int, what: str) -> str:
        if not isinstance(v, str) or not v.strip():
            raise self.err(line, f"{what} must be a non-empty string")
        return v

    def integer(self, v: Any, line: int, what: str, minimum: int = 0,
                maximum: int = MAX_INT64) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
            raise self.err(line, f"{what} must be an integer in {minimum}..{maximum:,}, "
                                 f"got {_shown(v)}")
        return v

    def seconds(self, v: Any, line: int, what: str) -> float:
        """A duration (harness.duration's grammar: `90`, `1.5`, `2m`; more than 0 and
        at most 7 days)."""
        try:
            return parse_duration(v, what)
        except DurationError as e:
            raise self.err(line, str(e)) from None

    def rate(self, v: Any, line: int, what: str) -> float:
        """A rate per second: a number more than 0, at most MAX_RATE."""
        # The YAML loader keeps a float as its text (a version `0.10` stays itself).
        try:
            x = float(v) if isinstance(v, int | float | str) and not isinstance(v, bool) \
                else math.nan
        except ValueError:
            x = math.nan
        if not 0 < x <= MAX_RATE:  # also NaN
            raise self.err(line, f"{what} must be a number of sends per second in "
                                 f"(0, {MAX_RATE:,.0f}], got {_shown(v)}")
        return float(x)

    def nodes(self, v: Any, line: int, brokers: list[str], what: str,
              allow_controller: bool = False) -> list[str]:
        names = [v] if isinstance(v, str) else v
        if not isinstance(names, list) or not names:
            raise self.err(line, f"{what} must be a node name or a list of node names")
        for n in names:
            if not (isinstance(n, str) and (n in brokers or (allow_controller
                                                           and n == CONTROLLER))):
                known = ", ".join([*brokers, *([CONTROLLER] if allow_controller else [])])
                raise self.err(line, f"{what}: unknown node {n!r}; known: {known}")
        return list(names)

    def version_range(self, m: LocMap) -> tuple[str | None, str | None]:
        """The mapping's optional ``since:`` and ``before:`` (None when absent): an
        entry holds from `since` on and under the versions older than `before` --
        expect's from-version form ("X+"), so a boundary is written once."""
        bounds = []
        for key in ("since", "before"):
            p = m.get(key)
            if p is not None and p not in PROTOCOLS:
                raise self.err(m.line_of(key), f"unknown protocol version {p!r} in {key}; "
                                               f"known: {', '.join(PROTOCOLS)} (quote them)")
            bounds.append(p)
        since, before = bounds
        if since is not None and before is not None and not (
                VERSIONS.index(canonical(since)) < VERSIONS.index(canonical(before))):
            raise self.err(m.line_of("before"), f"before {before} must be a later version "
                                                f"than since {since}")
        return since, before

    def acks(self, v: Any, line: int) -> int | str:
        if v in (0, 1, -1, "all") and not isinstance(v, bool):
            return v
        raise self.err(line, f"acks must be 0, 1, -1 or all, got {v!r}")


def in_range(protocol: str, since: str | None, before: str | None) -> bool:
    """Whether `protocol` is `since` or later and older than `before` (aliases resolved)."""
    at = VERSIONS.index(canonical(protocol))
    return ((since is None or at >= VERSIONS.index(canonical(since)))
            and (before is None or at < VERSIONS.index(canonical(before))))


def empty_map(line: int) -> LocMap:
    """An empty mapping standing for an omitted one, at `line`."""
    m = LocMap()
    m.line, m.key_lines = line, {}
    return m


def check_topic_partition(v: Validator, line: int, topics: list[dict[str, Any]], topic: Any,
                     partition: Any) -> None:
    for t in topics:
        if t["name"] == topic:
            if not (isinstance(partition, int) and 0 <= partition < t["partitions"]):
                raise v.err(line, f"topic {topic!r} has no partition {partition!r}")
            return
    raise v.err(line, f"unknown topic {topic!r}")


def _shown(v: Any) -> str:
    """A value as an error quotes it, cut short if long (10**30 has 31 digits)."""
    r = repr(v)
    return r if len(r) <= 24 else r[:21] + "..."
