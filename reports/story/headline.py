"""The headline at the top of a report: what happened to the data (lost writes,
diverged replicas, other anomalies, where) and whether the run's expectation
(its scenario's documented outcome, or its expect) holds. Read from the checker's
summary and anomalies alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reports.rundata import RunData, pkey
from reports.units import offsets_phrase, plural


@dataclass
class Headline:
    cls: str  # data-loss | data-diverged | data-anomaly | data-clean
    text: str
    expectation: str
    verdict: str


def _kip(description: Any) -> str | None:
    m = re.search(r"\(([^()]+)\)\s*\.?\s*$", str(description or ""))
    return m.group(1) if m else None


def _partition_offsets(anomalies: list[dict[str, Any]], kind: str, key: str
                       ) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for a in anomalies:
        if a.get("kind") != kind:
            continue
        w = a.get("witness") or {}
        part = pkey(a.get("topic"), a.get("partition"))
        if key == "acked_offset" and isinstance(w.get(key), int):
            out.setdefault(part, []).append(w[key])
        elif key == "offsets":
            out.setdefault(part, []).extend(o.get("offset") for o in w.get("offsets") or []
                                            if isinstance(o.get("offset"), int))
    return out


def _where(parts: dict[str, list[int]]) -> str:
    return "; ".join(f"{p} {offsets_phrase(offs)}" for p, offs in sorted(parts.items()))


def headline(data: RunData) -> Headline:
    s = data.summary
    found: dict[str, int] = dict(s.get("found") or {})
    protocol = data.meta.get("protocol") or s.get("protocol")
    scenario = data.meta.get("scenario") or s.get("scenario")
    pieces = []
    lost = found.get("lost-write", 0)
    if lost:
        where = _where(_partition_offsets(data.anomalies, "lost-write", "acked_offset"))
        pieces.append(f"{plural(lost, 'acknowledged write')} lost" + (f" ({where})" if where
                                                                      else ""))
    div = found.get("divergence", 0)
    if div:
        pairs = sorted({" and ".join(map(str, (a.get("witness") or {}).get("replicas") or []))
                        for a in data.anomalies if a.get("kind") == "divergence"})
        where = _where(_partition_offsets(data.anomalies, "divergence", "offsets"))
        pieces.append(f"replicas {', '.join(pairs) or '?'} diverge" + (f" ({where})" if where
                                                                       else ""))
    others = [f"{k} ×{n}" for k, n in found.items() if k not in ("lost-write", "divergence")]
    if others:
        pieces.append(("other anomalies: " if pieces else "") + ", ".join(others))
    if lost:
        cls = "data-loss"
    elif div:
        cls = "data-diverged"
    elif found:
        cls = "data-anomaly"
    else:
        cls = "data-clean"
        not_checked = s.get("kinds_not_checked") or {}
        # A history-only run (an existing cluster) saw no replica: claim no agreement
        # (only where divergence was checked do the replicas agree).
        pieces.append("No acknowledged write lost; the replicas agree"
                      if "divergence" not in not_checked
                      else "No anomaly in the history; not checked: " + ", ".join(not_checked))
    text = "; ".join(pieces)
    verdict = str(s.get("verdict"))
    expected = list(s.get("expected") or [])
    unexpected = list(s.get("unexpected") or [])
    missing = list(s.get("missing") or [])
    kip = _kip(data.meta.get("description"))
    tail = f" ({kip})" if kip else ""
    if found and not unexpected and scenario:
        what = ("the loss and divergence" if lost and div else "the loss" if lost
                else "the divergence" if div else "what")
        text += f" — {what} this scenario documents for {protocol}{tail}"
    elif found and not unexpected:
        text += f" — allowed by this run's expect ({', '.join(expected)})"
    elif unexpected:
        text += f" — not expected under {protocol}"
    if verdict == "incomplete":
        unjudged = list(s.get("unjudged") or [])
        exp = ("Incomplete: the run did not finish, and only what it recorded was checked"
               + (f"; {', '.join(unjudged)}, expected, not judged" if unjudged else ""))
    elif verdict == "valid":
        exp = (f"As expected: scenario {scenario} documents "
               f"{', '.join(expected) if expected else 'no anomaly'} under {protocol}"
               if scenario else
               f"Allowed: this run expects {', '.join(expected) if expected else 'nothing'}")
    elif verdict == "not-reproduced":
        exp = (f"Not reproduced: scenario {scenario} documents {', '.join(missing)} under "
               f"{protocol}{tail}, and the run did not show it")
    elif unexpected:
        exp = (f"Not expected: {', '.join(unexpected)} "
               f"{'is' if len(unexpected) == 1 else 'are'} not allowed under {protocol}"
               + (f" by scenario {scenario}" if scenario else ""))
    else:
        exp = f"Not as scenario {scenario} documents under {protocol}"
    failed = [a for a in data.assertions if not a.get("ok")]
    if failed:
        exp += ("; " if verdict != "invalid" or unexpected else ": ") + "; ".join(
            f"assertion {a.get('text')} failed, was {a.get('value')}" for a in failed)
    elif data.assertions and verdict == "valid":
        exp += f", and its {plural(len(data.assertions), 'figure assertion')} hold"
    return Headline(cls, text, exp, verdict)
