"""Times and figures in units a person reads: s and ms, not raw nanoseconds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def is_number(v: Any) -> bool:
    """An int or a float, but not a bool (JSON's true is no time or count)."""
    return isinstance(v, int | float) and not isinstance(v, bool)


def fmt_time(ns: Any) -> str:
    """A run time (ns since the run started) as "812 ms" or "1.108 s"."""
    if not is_number(ns):
        return "—" if ns is None else str(ns)
    s = ns / 1e9
    if abs(s) < 1:
        ms = ns / 1e6
        return f"{ms:.0f} ms" if abs(ms) >= 10 else f"{ms:.1f} ms"
    return f"{s:.3f} s"


def fmt_seconds(s: float) -> str:
    """An axis tick in seconds: "0", "250 ms", "1.5 s"."""
    if s == 0:
        return "0"
    if abs(s) < 1:
        return f"{s * 1000:g} ms"
    return f"{s:g} s"


def offset_runs(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Offsets as [a, b) runs of consecutive ones, ascending: {1, 2, 3, 7} -> [(1, 4), (7, 8)]."""
    out: list[tuple[int, int]] = []
    for o in sorted(set(offsets)):
        if out and out[-1][1] == o:
            out[-1] = (out[-1][0], o + 1)
        else:
            out.append((o, o + 1))
    return out


def offsets_text(offsets: Iterable[int]) -> str:
    """Sorted offsets as ranges: "1", "2–4", "1, 3, 7–9"."""
    return runs_text(offset_runs(offsets))


def runs_text(runs: Iterable[tuple[int, int]], sep: str = ", ", dash: str = "–") -> str:
    """[a, b) runs of offsets, ascending, as offsets_text writes them."""
    return sep.join(str(a) if b == a + 1 else f"{a}{dash}{b - 1}" for a, b in runs)


def offsets_phrase(offsets: list[int] | set[int]) -> str:
    """ "offset 1" or "offsets 2–4" """
    nums = set(offsets)
    return ("offset " if len(nums) == 1 else "offsets ") + offsets_text(nums)


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


# summary.json figures: key → (label, unit); unknown keys get their unit from a
# suffix (_ns, _ms, _s) or none (a count).
FIGURES: dict[str, tuple[str, str]] = {
    "ops": ("history operations", "ops"),
    "sends": ("sends", "ops"),
    "sends_ok": ("sends ok", "ops"),
    "sends_fail": ("sends failed", "ops"),
    "sends_info": ("sends with unknown outcome (info)", "ops"),
    "polls_ok": ("polls ok", "ops"),
    "nemesis_ops": ("nemesis operations", "ops"),
    "final_reads": ("final reads", "polls"),
    "send_latency_ms_p50_p95_p99": ("send latency p50 / p95 / p99", "ms"),
    "send_latency_ms_max": ("send latency max", "ms"),
    "poll_latency_ms_p50_p95_p99": ("poll latency p50 / p95 / p99", "ms"),
    "poll_latency_ms_max": ("poll latency max", "ms"),
    "duration_ns": ("duration", "ns"),
    "unseen_acked": ("acknowledged writes no consumer saw", "writes"),
    # A leader's ISR change, as Kafka's IsrShrinksPerSec/IsrExpandsPerSec count it: the
    # members an election drops are not one (the report's ISR chart shows those too).
    "isr_shrinks": ("ISR shrinks by a leader", "events"),
    "isr_expands": ("ISR expands by a leader", "events"),
    "leader_elections": ("leader elections", "elections"),
    "truncations": ("truncations", "events"),
}


def _num(v: Any, unit: str) -> str:
    if not is_number(v):
        return "—" if v is None else str(v)
    if unit == "ns":
        return fmt_time(v)
    if unit == "ms":
        return f"{v:.3g}" if v < 100 else f"{v:.0f}"
    return f"{v:,}" if isinstance(v, int) else f"{v:g}"


def figure_row(key: str, value: Any) -> tuple[str, str]:
    """(label, value with its unit) for one summary.json figure."""
    label, unit = FIGURES.get(key, ("", ""))
    if not label:
        label, unit = key.replace("_", " "), ""
        for suffix, u in (("_ns", "ns"), ("_ms", "ms"), ("_s", "s")):
            if key.endswith(suffix) or f"{suffix}_" in key:
                unit = u
                label = label.replace(f" {u}", "")
    numbers = value if isinstance(value, list) else [value]
    if not numbers or not all(is_number(x) for x in numbers):
        return label, "—" if value is None else str(value)
    text = " / ".join(_num(x, unit) for x in numbers)
    if unit == "ns":
        return label, text  # fmt_time carries its own unit
    if numbers == [1] and unit.endswith("s") and unit not in ("ms", "s"):
        unit = unit[:-1]  # "1 event", "1 op", not "1 events"
    return label, f"{text} {unit}".rstrip()
