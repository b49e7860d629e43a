"""Partition shapes: each grudge cuts exactly the links it names, both ways."""

from __future__ import annotations

from nemesis import grudges

NODES = ["A", "B", "C", "D", "controller"]


def links(g: dict[str, list[str]]) -> set[frozenset[str]]:
    out = {frozenset((a, b)) for a, peers in g.items() for b in peers}
    # Symmetric: every cut appears from both ends.
    assert all(a in g.get(b, []) for a, peers in g.items() for b in peers)
    return out


def test_isolate_cuts_every_link_of_one_node() -> None:
    assert links(grudges.isolate("B", NODES)) == {frozenset(("B", n)) for n in NODES if n != "B"}


def test_split_puts_unlisted_nodes_in_their_own_group() -> None:
    g = grudges.split([["A", "B"], ["C"]], NODES)
    assert frozenset(("A", "B")) not in links(g)
    assert frozenset(("D", "controller")) not in links(g)
    assert links(g) == {frozenset(p) for p in [("A", "C"), ("B", "C"), ("A", "D"), ("B", "D"),
                                                ("A", "controller"), ("B", "controller"),
                                                ("C", "D"), ("C", "controller")]}


def test_halves_and_bridge() -> None:
    # halves: [A, B] against [C, D, controller]: 2 x 3 links.
    assert len(links(grudges.halves(NODES))) == 6
    # bridge: [A, B] and [D, controller] cannot talk; C hears everyone.
    g = grudges.bridge(NODES)
    assert "C" not in g
    assert links(g) == {frozenset(p) for p in [("A", "D"), ("A", "controller"), ("B", "D"),
                                                ("B", "controller")]}


def test_cut_only_names_the_given_links() -> None:
    assert grudges.cut(["A"], ["controller"], NODES) == {"A": ["controller"],
                                                        "controller": ["A"]}
