"""Validation helpers that turn wrong values into `FILE:LINE: what` errors."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from broker.protocol import VERSIONS, canonical
from contract import CONTROLLER, PROTOCOLS
from harness.yamlloc import LocMap, LocSeq, ScenarioError


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

    def integer(self, v: Any, line: int, what: str, minimum: int = 0) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise self.err(line, f"{what} must be an integer >= {minimum}, got {v!r}")
        return v

    def seconds(self, v: Any, line: int, what: str) -> float:
        try:
            x = float(v) if not isinstance(v, bool) else -1.0
        except (TypeError, ValueError):
            x = -1.0
        if x <= 0:
            raise self.err(line, f"{what} must be a positive number of seconds, got {v!r}")
        return x

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
