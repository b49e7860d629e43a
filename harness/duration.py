"""Durations, written the one way every isrlab input takes them: `--time-limit`
(chaos, swarm), a nightly file's `time_limit`, a scenario's `for` and `every`.

The grammar (docs/scenarios.md, "Durations"): a number alone is seconds (`90`,
`1.5`); otherwise one or more parts, each a number with its unit, the units from
`h`, `m`, `s`, `ms`, largest first and each at most once (`90s`, `20m`, `1h`,
`1h30m`, `2m0.5s`, `100ms`). A number without a unit after another part (`1h2`)
is refused: it could be minutes or seconds. Every duration is more than 0 and at
most MAX_SECONDS (7 days): a longer one is a typo, and a simulated run of it
would never end.
"""

from __future__ import annotations

import re

MAX_SECONDS = 7 * 24 * 3600.0
UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}  # largest first
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PART = re.compile(rf"\s*({_NUMBER})\s*(ms|h|m|s)?")
EXAMPLES = "90 (seconds), 90s, 20m, 1h30m or 100ms"


class DurationError(ValueError):
    """A duration that does not parse or is out of range; the message says which
    and what is allowed (callers add the file and line, or the option)."""


def parse_duration(raw: str | int | float, what: str = "duration",
                   maximum: float = MAX_SECONDS) -> float:
    """Seconds from a duration (a string of the grammar above, or a YAML number,
    which is seconds). DurationError naming `what` otherwise."""
    if isinstance(raw, bool):
        raise DurationError(f"{what} {_shown(raw)} is not a duration; give e.g. {EXAMPLES}")
    if isinstance(raw, (int, float)):
        seconds = float(raw)
    elif isinstance(raw, str):
        seconds = _parse_text(raw, what)
    else:
        raise DurationError(f"{what} {_shown(raw)} is not a duration; give e.g. {EXAMPLES}")
    if not seconds > 0:  # also NaN
        raise DurationError(f"{what} {_shown(raw)} must be more than 0; give e.g. {EXAMPLES}")
    if seconds > maximum:
        raise DurationError(f"{what} {_shown(raw)} is more than {_spell(maximum)}, the longest "
                            "allowed")
    return seconds


def _parse_text(text: str, what: str) -> float:
    t = text.strip().lower()
    total, pos, last_unit = 0.0, 0, -1
    parts = 0
    while pos < len(t):
        m = _PART.match(t, pos)
        if m is None or m.end() == pos:
            break
        unit = m.group(2)
        if unit is None:
            if t[m.end():].strip():
                break  # a number followed by something that is no unit
            if parts:
                raise DurationError(f"{what} {_shown(text)} is ambiguous: {m.group(1)!r} after "
                                    f"{t[:pos].strip()!r} has no unit (h, m, s or ms); "
                                    f"give e.g. {EXAMPLES}")
        else:
            rank = list(UNITS).index(unit)
            if rank <= last_unit:
                raise DurationError(f"{what} {_shown(text)}: give the units largest first, each "
                                    f"once (h, m, s, ms), e.g. 1h30m")
            last_unit = rank
        total += float(m.group(1)) * UNITS.get(unit or "s", 1.0)
        parts += 1
        pos = m.end()
    if not t or pos < len(t.rstrip()) or parts == 0:
        raise DurationError(f"{what} {_shown(text)} does not parse; give e.g. {EXAMPLES}")
    return total


def _spell(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:g} days ({seconds:g}s)" if days >= 1 else f"{seconds:g}s"


def _shown(raw: object) -> str:
    """The value as the message quotes it, cut short if it is long."""
    r = repr(raw)
    return r if len(r) <= 40 else r[:37] + "..."
