"""Generators, Jepsen's way, sans-IO: composable, seeded, time-limited streams of ops.

A generator is a function of a random source and a start time (seconds) that
yields `Timed` ops in time order. It is pure: the same random state and start
give the same ops, so a seed fixes a whole fault schedule (nemesis.schedule)
or a workload's choice of partitions (workloads.continuous) before anything
runs. Nothing here sleeps or reads a clock: the nemesis schedule is unrolled on
this virtual time ahead of the run and written to run.json; the workload's
interpreter waits for each op's time on the real clock.

A `Timed` whose `op` is None is a tick: time passes, nothing happens. Ticks let
`sleep` and `phases` move time on without an op, and they are how a
generator's end time is known (the time of its last item).

Combinators: `once`, `sleep`, `sleep_around` (a random interval around a mean),
`phases` (one after the other), `cycle` (a fresh generator from a factory, for
ever), `mix` (each cycle a random one of several), `time_limit`, `limit`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Op = dict[str, Any]


@dataclass(frozen=True)
class Timed:
    at: float  # seconds since the generator's origin
    op: Op | None  # None: a tick (time passes, no op)


Gen = Callable[[random.Random, float], Iterator[Timed]]


def once(op: Op | Callable[[random.Random], Op]) -> Gen:
    """One op at the start time; a callable is asked for the op then (it may draw
    from the random source)."""

    def gen(rng: random.Random, start: float) -> Iterator[Timed]:
        yield Timed(start, dict(op(rng) if callable(op) else op))

    return gen


def sleep(seconds: float) -> Gen:
    """Nothing for `seconds`."""

    def gen(rng: random.Random, start: float) -> Iterator[Timed]:
        yield Timed(start + seconds, None)

    return gen


def sleep_around(mean: float, spread: float = 0.5) -> Gen:
    """Nothing for a random time uniform in mean × [1 - spread, 1 + spread]: the
    "random intervals around a mean" of a schedule (Jepsen's stagger spreads
    0..2×mean; a narrower spread keeps a fault from following the last at once)."""

    def gen(rng: random.Random, start: float) -> Iterator[Timed]:
        yield Timed(start + rng.uniform(mean * (1 - spread), mean * (1 + spread)), None)

    return gen


def phases(*gens: Gen) -> Gen:
    """Each generator in turn, the next starting when the previous ended."""

    def gen(rng: random.Random, start: float) -> Iterator[Timed]:
        t = start
        for g in gens:
            for item in g(rng, t):
                t = item.at
                yield item

    return gen


def cycle(factory: Callable[[random.Random], Gen]) -> Gen:
    """For ever: a generator from `factory` (which may draw), run to its end, then
    the next. Each must let time pass, or this never reaches a time limit."""

    def gen(rng: random.Random, start: float) -> Iterator[Timed]:
        t = start
        while True:
            moved = False
            for item in factory(rng)(rng, t):
                moved = moved or item.at > t
                t = item.at
                yield item
            if not moved:
                raise ValueError("cycle: a generator that lets no time pass would repeat "
                                 "for ever at one instant")

    return gen


def mix(gens: list[Gen]) -> Gen:
    """For ever, a random one of `gens` each time (Jepsen's mix)."""
    if not gens:
        raise ValueError("mix of no generators")
    return cycle(lambda rng: rng.choice(gens))


def time_limit(seconds: float, g: Gen) -> Gen:
    """The items of `g` that come before start + seconds. Cut off, it ends at
    start + seconds (a tick), so what follows it starts there, not earlier."""

    def gen(rng: random.Random, start: float) -> Iterator[Timed]:
        end = start + seconds
        for item in g(rng, start):
            if item.at >= end:
                yield Timed(end, None)
                return
            yield item

    return gen


def limit(n: int, g: Gen) -> Gen:
    """The first `n` ops of `g` (ticks do not count)."""

    def gen(rng: random.Random, start: float) -> Iterator[Timed]:
        left = n
        if left <= 0:
            return
        for item in g(rng, start):
            yield item
            if item.op is not None:
                left -= 1
                if left == 0:
                    return

    return gen


def ops(g: Gen, seed: int, start: float = 0.0) -> list[Timed]:
    """Unroll a finite generator: its ops (ticks dropped), in time order."""
    return [t for t in g(random.Random(seed), start) if t.op is not None]


def take(g: Gen, seed: int, n: int) -> list[Timed]:
    """The first `n` ops of a generator that may be infinite."""
    it = (t for t in g(random.Random(seed), 0.0) if t.op is not None)
    return list(itertools.islice(it, n))
