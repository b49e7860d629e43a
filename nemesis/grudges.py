"""Partition shapes as grudges (Jepsen's term): grudge[node] = the nodes it must
not hear from. Backends apply a grudge (iptables in a container, the broker's own
`net-block` on loopback); these functions only compute it.

Every shape is symmetric: if A does not hear B, B does not hear A.
"""

from __future__ import annotations

from collections.abc import Iterable

Grudge = dict[str, list[str]]


def _symmetric(pairs: Iterable[tuple[str, str]], nodes: list[str]) -> Grudge:
    grudge: dict[str, set[str]] = {n: set() for n in nodes}
    for a, b in pairs:
        if a != b:
            grudge[a].add(b)
            grudge[b].add(a)
    return {n: sorted(peers) for n, peers in grudge.items() if peers}


def split(groups: list[list[str]], nodes: list[str]) -> Grudge:
    """Components: nodes in different groups cannot talk. Nodes in no group form
    one more group of their own (so `isolate` is `split([[x]])`)."""
    rest = [n for n in nodes if not any(n in g for g in groups)]
    comps = [g for g in [*groups, rest] if g]
    side = {n: i for i, g in enumerate(comps) for n in g}
    return _symmetric(((a, b) for a in nodes for b in nodes if side[a] != side[b]), nodes)


def isolate(node: str, nodes: list[str]) -> Grudge:
    """`node` hears nobody and nobody hears it."""
    return split([[node]], nodes)


def halves(nodes: list[str]) -> Grudge:
    """The first half of `nodes` (rounded down) against the rest."""
    mid = len(nodes) // 2
    return split([nodes[:mid], nodes[mid:]], nodes)


def bridge(nodes: list[str]) -> Grudge:
    """Two halves that cannot hear each other, joined by the middle node, which
    hears everyone (Jepsen's bridge: a non-transitive network)."""
    mid = len(nodes) // 2
    left, right = nodes[:mid], nodes[mid + 1:]
    return _symmetric(((a, b) for a in left for b in right), nodes)


def cut(a: list[str], b: list[str], nodes: list[str]) -> Grudge:
    """Only the links between every node of `a` and every node of `b` (e.g. a leader
    from the controller alone: `cut([leader], ["controller"])`)."""
    return _symmetric(((x, y) for x in a for y in b), nodes)
