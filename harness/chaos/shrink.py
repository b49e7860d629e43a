"""Shrinking a simulated chaos run: a smaller schedule that still shows the anomaly.

A chaos run on the sim backend is a function of its configuration, its fault
schedule and its seed, so a smaller run is one with fewer fault packages, a
lighter workload or less idle time, simulated again with the same seed. This
module makes the candidates; `isrlab shrink` (harness/cli/shrink.py) simulates
each round of them, checks them in one batch, keeps the smallest that still
shows the anomaly kind, and repeats until no candidate does (Zeller's delta
debugging over the packages, then the workload, then time).

A package is the schedule's ops from a fault to its `recover` (a compound
package has two faults); the schedule always ends with `recover` and
`final-read`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from harness.chaos.runs import ChaosConfig
from harness.errors import UsageError
from nemesis.schedule import parse_faults

# After a package's recovery, this long before the next package or the final
# read when time is compressed (seconds).
CALM = 1.0


@dataclass(frozen=True)
class Candidate:
    packages: tuple[tuple[dict[str, Any], ...], ...]
    rate: float
    producers: int
    consumers: int
    what: str  # how it was made from its parent, in words

    def size(self) -> tuple[int, float, float]:
        """Smaller is better: packages, then records a second, then its length."""
        return (len(self.packages), self.rate * self.producers + self.consumers,
                self.end())

    def end(self) -> float:
        return max((op["at"] for p in self.packages for op in p), default=0.0)

    def final_read_at(self) -> float:
        return self.schedule()[-1]["at"]

    def schedule(self) -> list[dict[str, Any]]:
        """The chaos schedule: the packages, then recover and final-read."""
        ops = [dict(op) for p in self.packages for op in p]
        end = self.end() + CALM
        return [*ops, {"at": round(end, 3), "f": "recover"},
                {"at": round(end + CALM, 3), "f": "final-read"}]


def packages_of(schedule: list[dict[str, Any]]) -> tuple[tuple[dict[str, Any], ...], ...]:
    """The schedule's packages (fault ops up to and including their recover); the
    closing recover and final-read are not a package."""
    out, current = [], []
    for op in schedule:
        if op["f"] == "final-read":
            break
        current.append(op)
        if op["f"] == "recover":
            if len(current) > 1:
                out.append(tuple(current))
            current = []
    return tuple(out)


def config_of(meta: dict[str, Any]) -> ChaosConfig:
    """The ChaosConfig of a chaos run, from its run.json; UsageError if it is not one."""
    chaos = meta.get("chaos")
    if not chaos or meta.get("backend") != "sim":
        raise UsageError("shrink needs a chaos or swarm run of the sim backend "
                         "(run.json with backend sim and a chaos block)")
    w = meta.get("workload") or {}
    topics = (meta.get("cluster") or {}).get("topics") or [{}]
    return ChaosConfig(
        protocol=meta["protocol"], time_limit=float(chaos["time_limit"]),
        faults=parse_faults(",".join(chaos["faults"]) if isinstance(chaos["faults"], list)
                            else str(chaos["faults"])),
        acks=w.get("acks", "all"), broker_config=dict(meta.get("broker_config") or {}),
        controller_config=dict(meta.get("controller_config") or {}),
        brokers=len((meta.get("cluster") or {}).get("brokers") or []),
        partitions=int(topics[0].get("partitions", 1)), producers=int(w.get("producers", 1)),
        consumers=int(w.get("consumers", 0)), rate=float(w.get("rate", 10.0)),
        batch=int(w.get("batch", 1)), linger=float(w.get("linger", 0.005)),
        interval=float(chaos["interval"]), duration=float(chaos["duration"]),
        quiet=float(chaos["quiet"]), overlap=float(chaos["overlap"]),
        gap=chaos.get("gap"), timeout_ms=int(w.get("timeout_ms", 5000)),
        retry_ms=int(w.get("retry_ms", 10000)),
        poll_interval=float(w.get("poll_interval", ChaosConfig.poll_interval)))


def start(cfg: ChaosConfig, schedule: list[dict[str, Any]]) -> Candidate:
    return Candidate(packages_of(schedule), cfg.rate, cfg.producers, cfg.consumers,
                     "the original run")


def configured(cfg: ChaosConfig, c: Candidate) -> ChaosConfig:
    """The chaos configuration a candidate runs with."""
    return replace(cfg, rate=c.rate, producers=c.producers, consumers=c.consumers)


def without_chunks(c: Candidate, chunk: int) -> list[Candidate]:
    """Delta debugging's step: the candidate without each run of `chunk` packages."""
    n = len(c.packages)
    out = []
    for i in range(0, n, chunk):
        kept = c.packages[:i] + c.packages[i + chunk:]
        if len(kept) < n:
            gone = f"packages {i + 1}..{min(i + chunk, n)}" if chunk > 1 else f"package {i + 1}"
            out.append(replace(c, packages=kept, what=f"without {gone} of {n}"))
    return out


def lighter(c: Candidate) -> list[Candidate]:
    """The candidate with a lighter workload, one change each."""
    out = []
    if c.rate > 1:
        out.append(replace(c, rate=max(1.0, c.rate / 2), what=f"rate {c.rate / 2:g}/s"))
    if c.producers > 1:
        out.append(replace(c, producers=1, what="one producer"))
    if c.consumers > 0:
        out.append(replace(c, consumers=0, what="no background consumer"))
    return out


def compressed(c: Candidate) -> list[Candidate]:
    """The candidate with the idle time between packages cut to CALM seconds (and
    the first package CALM seconds in)."""
    if not c.packages:
        return []
    shifted, t = [], CALM
    for p in c.packages:
        d = p[0]["at"] - t
        shifted.append(tuple({**op, "at": round(op["at"] - d, 3)} for op in p))
        t = shifted[-1][-1]["at"] + CALM
    if tuple(shifted) == c.packages:
        return []
    return [replace(c, packages=tuple(shifted), what="idle time cut")]
