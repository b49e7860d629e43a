"""Seeded fault schedules (Jepsen's nemesis generators), sans-IO.

A schedule mixes fault packages -- kill, stop, pause, power-cycle, and the
partitions isolate, halves, bridge, cut-controller -- each with a target: one
node, the current leader of a partition, a minority, all. Each package is the
fault, its recovery after a random time around `duration`, then `quiet`
seconds for the cluster to settle (ISR re-expansion, elections), then a random
wait around `interval` before the next. Packages start until `time_limit`; then
comes the final heal and recovery, then the final read.

The schedule is unrolled ahead of the run from the seed (generator),
so run.json holds all of it before anything starts. Targets that can be drawn
ahead (one, minority, all) are drawn then, with the same seed; `leader` names a
partition and is resolved when the fault runs (the history's nemesis op names
the node it hit).

Compound packages (`overlap`, a probability per package): the faults that lose
acknowledged writes under the old protocols need two faults at once -- KIP-101's
loss is a leader dying, the next leader being elected while it too is already
dead or frozen, and the last replica, which truncated to its lagging HW on
following that short-lived leader, taking over without the acked tail. So a
compound package is a first fault on one broker, a second on another broker a
short `gap` later (a fraction of the controller's session timeout: the second
must be hit before the first one's death is noticed, or the election skips it),
both open together for around `duration`, then one recovery. Both nodes are
drawn ahead (an ordered pair); at most one of the two is a power-cycle, because
two power losses at once can take every copy of an acked record that the third
replica, still catching up, does not have -- a loss on any protocol, not a
finding (docs/chaos.md).

Specs are written `FAULT[:TARGET]`, comma-separated: `kill,power-cycle:leader,
partition`. Without a target a package draws `one` or `leader` each time: a
fault on more than a minority at once loses un-fsynced acknowledged writes on
any protocol (Kafka does not fsync per message), so `all` and a `halves` that
leaves no majority are there to be asked for, not drawn by default.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from contract import CONTROLLER, FAULT_WINDOWS
from generator import (
    Gen,
    Timed,
    cycle,
    once,
    ops,
    phases,
    sleep,
    sleep_around,
    time_limit,
)
from nemesis import grudges

PROCESS_PACKAGES = ("kill", "stop", "pause", "power-cycle")
PARTITION_PACKAGES = ("isolate", "halves", "bridge", "cut-controller")
# `flip`: leadership handed back and forth between two brokers while the other is
# down (stop one, stop the other and start the first, ...): KAFKA-6361's
# alternating unclean elections, which diverge replicas before KIP-279.
FLIP = "flip"
FLIP_ROUNDS = (2, 4)  # hand-overs per flip package, drawn in this range
# `partition` is one package whose shape is drawn each time (default targets).
FAULT_NAMES = (*PROCESS_PACKAGES, *PARTITION_PACKAGES, "partition", FLIP)
TARGETS = ("one", "leader", "minority", "all")
DEFAULT_TARGETS = ("one", "leader")
# The targets each package takes; halves and bridge are shapes of the whole cluster.
_ALLOWED: dict[str, tuple[str, ...]] = {
    **{f: TARGETS for f in PROCESS_PACKAGES},
    "isolate": ("one", "leader", "minority"),
    "cut-controller": TARGETS,
    "halves": (),
    "bridge": (),
    FLIP: (),  # its two brokers are drawn each time
}
# The fault op that ends each process package's window (contract.FAULT_WINDOWS).
RECOVERY = {f: FAULT_WINDOWS[f][1] for f in PROCESS_PACKAGES}


class FaultSpecError(ValueError):
    """A fault list that does not parse: the message says what is wrong."""


@dataclass(frozen=True)
class FaultSpec:
    fault: str
    targets: tuple[str, ...]  # drawn from at random per package; () for a shape

    def __str__(self) -> str:
        if not self.targets or self.targets == DEFAULT_TARGETS:
            return self.fault
        return f"{self.fault}:{'|'.join(self.targets)}"


def parse_faults(text: str) -> list[FaultSpec]:
    """`kill,power-cycle:leader,partition` -> specs; FaultSpecError naming the bad part."""
    specs: list[FaultSpec] = []
    items = [s.strip() for s in text.split(",")]
    if not any(items):
        raise FaultSpecError("no fault given; known: " + ", ".join(FAULT_NAMES))
    for item in items:
        if not item:
            raise FaultSpecError(f"empty fault in {text!r}")
        name, _, target = item.partition(":")
        if name not in FAULT_NAMES:
            raise FaultSpecError(f"unknown fault {name!r}; known: {', '.join(FAULT_NAMES)}")
        if name == "partition":
            if target:
                raise FaultSpecError("partition takes no target; name the shape instead: "
                                     + ", ".join(PARTITION_PACKAGES))
            # One package among the others: each time a shape drawn at random.
            specs.append(FaultSpec("partition", ()))
            continue
        allowed = _ALLOWED[name]
        if not target:
            specs.append(FaultSpec(name, DEFAULT_TARGETS if allowed else ()))
        elif not allowed:
            raise FaultSpecError(f"{name} takes no target (it is a shape of the whole "
                                 f"cluster), got {target!r}")
        elif target not in allowed:
            raise FaultSpecError(f"unknown target {target!r} for {name}; known: "
                                 f"{', '.join(allowed)}")
        else:
            specs.append(FaultSpec(name, (target,)))
    return specs


@dataclass(frozen=True)
class ScheduleSpec:
    faults: list[FaultSpec]
    brokers: list[str]
    partitions: list[tuple[str, int]]  # (topic, partition) a `leader` target may name
    time_limit: float  # seconds during which packages start
    interval: float = 3.0  # mean wait before each package
    duration: float = 3.0  # mean time a fault lasts before its recovery
    quiet: float = 2.0  # after each recovery: nothing
    overlap: float = 0.0  # probability that a process package is compound (two faults)
    gap: float = 1.5  # mean seconds between a compound package's two faults

    def as_dict(self) -> dict[str, Any]:
        return {"faults": [str(f) for f in self.faults], "time_limit": self.time_limit,
                "interval": self.interval, "duration": self.duration, "quiet": self.quiet,
                "overlap": self.overlap, "gap": self.gap}


def minority_size(n: int) -> int:
    return max(1, (n - 1) // 2)


def _nodes(rng: random.Random, target: str, spec: ScheduleSpec) -> dict[str, Any]:
    """A target as op fields: nodes drawn now, or the partition whose leader it is."""
    if target == "leader":
        topic, partition = rng.choice(spec.partitions)
        return {"target": "leader", "topic": topic, "partition": partition}
    if target == "one":
        return {"target": "one", "nodes": [rng.choice(spec.brokers)]}
    if target == "minority":
        k = minority_size(len(spec.brokers))
        return {"target": "minority", "nodes": sorted(rng.sample(spec.brokers, k))}
    return {"target": "all", "nodes": list(spec.brokers)}


def fault_op(rng: random.Random, fs: FaultSpec, spec: ScheduleSpec) -> dict[str, Any]:
    """The op that starts one package of `fs` (drawing its target)."""
    every = [*spec.brokers, CONTROLLER]
    if fs.fault == "partition":
        shape = rng.choice(PARTITION_PACKAGES)
        fs = FaultSpec(shape, DEFAULT_TARGETS if _ALLOWED[shape] else ())
    if fs.fault in PROCESS_PACKAGES:
        return {"f": fs.fault, **_nodes(rng, rng.choice(fs.targets), spec)}
    if fs.fault == "halves":
        return {"f": "partition", "shape": "halves", "grudge": grudges.halves(every)}
    if fs.fault == "bridge":
        return {"f": "partition", "shape": "bridge", "grudge": grudges.bridge(every)}
    op = {"f": "partition", "shape": fs.fault, **_nodes(rng, rng.choice(fs.targets), spec)}
    if "nodes" in op:  # drawn now: the grudge is known now
        op["grudge"] = grudge_for(fs.fault, op["nodes"], spec.brokers)
    return op


def grudge_for(shape: str, nodes: list[str], brokers: list[str]) -> dict[str, list[str]]:
    """The grudge of an `isolate` or `cut-controller` package on `nodes`."""
    every = [*brokers, CONTROLLER]
    if shape == "isolate":
        return grudges.split([list(nodes)], every)
    if shape == "cut-controller":
        return grudges.cut(list(nodes), [CONTROLLER], every)
    raise ValueError(f"shape {shape!r} takes no nodes")


def compound_ops(rng: random.Random, fs: FaultSpec,
                 spec: ScheduleSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two faults of a compound package: `fs` on one broker, then another
    process fault of the spec's (never a second power-cycle) on another broker."""
    first, second = rng.sample(spec.brokers, 2)
    kinds = [f.fault for f in spec.faults if f.fault in PROCESS_PACKAGES]
    other = rng.choice(kinds)
    if fs.fault == "power-cycle" and other == "power-cycle":
        other = "kill"  # the page cache survives a kill: one copy stays durable
    return ({"f": fs.fault, "target": "one", "nodes": [first]},
            {"f": other, "target": "one", "nodes": [second], "overlap": True})


def _compound_allowed(fs: FaultSpec, spec: ScheduleSpec) -> bool:
    # A fault already on a minority or all nodes has no second node to add.
    return (spec.overlap > 0 and fs.fault in PROCESS_PACKAGES and len(spec.brokers) >= 2
            and set(fs.targets) <= set(DEFAULT_TARGETS))


def flip_package(spec: ScheduleSpec) -> Gen:
    """Wait around `interval`; stop broker X; then, every around `duration`, stop
    the broker that leads and start the other (stop first: the one started finds
    the other down, and an unclean election makes it leader); recover, quiet."""

    def gen(rng: random.Random, start: float) -> Iterator[Timed]:
        x, y = rng.sample(spec.brokers, 2)
        rounds = rng.randint(*FLIP_ROUNDS)
        steps: list[Gen] = [sleep_around(spec.interval),
                            once({"f": "stop", "target": FLIP, "nodes": [x]})]
        up, down = y, x
        for _ in range(rounds):
            steps += [sleep_around(spec.duration),
                      once({"f": "stop", "target": FLIP, "nodes": [up]}),
                      once({"f": "start", "target": FLIP, "nodes": [down]})]
            up, down = down, up
        steps += [sleep_around(spec.duration), once({"f": "recover"}), sleep(spec.quiet)]
        yield from phases(*steps)(rng, start)

    return gen


def package(fs: FaultSpec, spec: ScheduleSpec) -> Gen:
    """Wait around `interval`, the fault, its recovery after around `duration`, quiet;
    with probability `overlap` a compound package (two faults `gap` apart)."""
    if fs.fault == FLIP:
        return flip_package(spec)
    single = phases(
        sleep_around(spec.interval),
        once(lambda rng: fault_op(rng, fs, spec)),
        sleep_around(spec.duration),
        once({"f": "recover"}),
        sleep(spec.quiet),
    )
    if not _compound_allowed(fs, spec):
        return single

    def compound(rng: random.Random, start: float) -> Iterator[Timed]:
        a, b = compound_ops(rng, fs, spec)
        # The gap spreads 0.2..1.8 x its mean: past the session timeout the first
        # broker's death is handled before the second is hit (a plain sequence).
        yield from phases(sleep_around(spec.interval), once(a),
                          sleep_around(spec.gap, spread=0.8), once(b),
                          sleep_around(spec.duration), once({"f": "recover"}),
                          sleep(spec.quiet))(rng, start)

    def gen(rng: random.Random, start: float) -> Iterator[Timed]:
        # Drawn first, so a seed's choice of package kinds does not shift with it.
        chosen = compound if rng.random() < spec.overlap else single
        yield from chosen(rng, start)

    return gen


def nemesis_generator(spec: ScheduleSpec) -> Gen:
    """Packages (each time one of the given faults, equally likely) until the time
    limit, then the final recovery and read."""
    if not spec.faults:
        raise FaultSpecError("no fault given")
    packages = [package(fs, spec) for fs in spec.faults]
    return phases(
        time_limit(spec.time_limit, cycle(lambda rng: rng.choice(packages))),
        once({"f": "recover"}),
        once({"f": "final-read"}),
    )


def schedule(spec: ScheduleSpec, seed: int) -> list[dict[str, Any]]:
    """The whole schedule: ops with `at` (seconds after the workload started)."""
    out = []
    for t in ops(nemesis_generator(spec), seed):
        assert t.op is not None
        out.append({"at": round(t.at, 3), **t.op})
    return out
