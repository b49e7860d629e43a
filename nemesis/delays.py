"""The `delay` nemesis as per-process rules, sans-IO.

`delay: {from: X, to: Y, for: 2s}` holds messages from X to Y for a time, then
delivers them in order. Every message of the cluster is a broker's request and
its answer (broker/netdelay.py), so X -> Y is held at both ends: Y holds X's
requests (`in` from X) and X holds its answers to Y (`out` to Y). Backends send
each process its rules with the `net-delay` request; these functions only
compute them.
"""

from __future__ import annotations

from typing import Any

# node -> the rules of that process (broker/PROTOCOL.md, `net-delay`)
DelayPlan = dict[str, list[dict[str, Any]]]


def plan(frm: list[str], to: list[str], seconds: float | None,
         requests: list[str] | None = None) -> DelayPlan:
    """The rules that hold every message from a node of `frm` to a node of `to`;
    `seconds` None holds them until `deliver` (or `heal`)."""
    out: DelayPlan = {}
    extra: dict[str, Any] = {}
    if seconds is not None:
        extra["for_ms"] = round(seconds * 1000)
    if requests is not None:
        extra["requests"] = sorted(requests)
    for x in frm:
        for y in to:
            if x == y:
                continue
            out.setdefault(y, []).append({"peer": x, "direction": "in", **extra})
            out.setdefault(x, []).append({"peer": y, "direction": "out", **extra})
    return out


def merge(a: DelayPlan, b: DelayPlan) -> DelayPlan:
    """Both plans at once (a second `delay` step adds to the first)."""
    out = {n: list(rules) for n, rules in a.items()}
    for n, rules in b.items():
        out.setdefault(n, []).extend(rules)
    return out


def remaining(p: DelayPlan, elapsed_s: float) -> DelayPlan:
    """The plan as a process restarted `elapsed_s` after it began must get it:
    timed rules shortened, finished ones gone."""
    out: DelayPlan = {}
    for n, rules in p.items():
        for r in rules:
            if "for_ms" in r:
                left = r["for_ms"] - round(elapsed_s * 1000)
                if left <= 0:
                    continue
                r = {**r, "for_ms": left}
            out.setdefault(n, []).append(r)
    return out
