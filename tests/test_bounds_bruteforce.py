"""Soundness of the LP bound against brute-force enumeration on small random graphs.

The enumeration here is written independently of ``resilientcc.bounds.lp``: it lists
every vertex cut S that splits the GPUs (bound M / cap_out(S)) and every partition of
all vertices into groups that each hold a GPU (bound 2(k-1) M / cap_crossing(P)). The LP
must be at least the best of these. It must also equal the best over its own constraint
families (cuts, and partitions where relays may stay outside every group, counting the
links leaving or the links entering a group), which the LP enumerates exactly on graphs
this small.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.bounds.lp import lp_bound
from resilientcc.topology.model import GPU, SWITCH, Link, Node, Topology
from resilientcc.topology.validate import validate

M = 1000


@st.composite
def small_graphs(draw: st.DrawFn) -> Topology:
    p = draw(st.integers(2, 6))
    r = draw(st.integers(0, 3))
    names = [f"g{i}" for i in range(p)] + [f"x{j}" for j in range(r)]
    n = len(names)
    order = draw(st.permutations(range(n)))
    pairs: set[tuple[int, int]] = set()
    for a, b in zip(
        order, order[1:] + order[:1], strict=True
    ):  # a directed cycle: strongly connected
        pairs.add((a, b))
    extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    pairs |= {(a, b) for a, b in extra if a != b}
    links = tuple(
        Link(names[a], names[b], Fraction(draw(st.integers(1, 20)))) for a, b in sorted(pairs)
    )
    nodes = tuple(Node(f"g{i}", GPU, rank=i) for i in range(p)) + tuple(
        Node(f"x{j}", SWITCH) for j in range(r)
    )
    return validate(Topology(nodes, links))


def _set_partitions(items: list[str]):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _set_partitions(rest):
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1 :]]
        yield [[first], *part]


def brute_force(topo: Topology, extended: bool) -> Fraction:
    names = [nd.name for nd in topo.nodes]
    gpus = {g.name for g in topo.gpus}
    relays = [x for x in names if x not in gpus]
    links = [(lk.src, lk.dst, int(lk.capacity)) for lk in topo.links]  # integer capacities
    best = Fraction(0)
    # cuts
    for size in range(1, len(names)):
        for combo in itertools.combinations(names, size):
            s = set(combo)
            if not (s & gpus) or gpus <= s:
                continue
            cap = sum(c for a, b, c in links if a in s and b not in s)
            best = max(best, Fraction(M) / cap)
    if not extended:
        # partitions of all vertices, every group with a GPU; links between groups
        for part in _set_partitions(names):
            if len(part) < 2 or any(not (set(grp) & gpus) for grp in part):
                continue
            group = {v: i for i, grp in enumerate(part) for v in grp}
            cap = sum(c for a, b, c in links if group[a] != group[b])
            best = max(best, Fraction(2 * (len(part) - 1) * M) / cap)
        return best
    # partitions of the GPUs, each relay in a group or in none (-1); leaving / entering
    for part in _set_partitions(sorted(gpus)):
        k = len(part)
        if k < 2:
            continue
        base = {v: i for i, grp in enumerate(part) for v in grp}
        for labels in itertools.product(range(-1, k), repeat=len(relays)):
            group = {**base, **dict(zip(relays, labels, strict=True))}
            out = sum(c for a, b, c in links if group[a] >= 0 and group[a] != group[b])
            inn = sum(c for a, b, c in links if group[b] >= 0 and group[a] != group[b])
            for cap in (out, inn):
                if cap:
                    best = max(best, Fraction(2 * (k - 1) * M) / cap)
    return best


@given(small_graphs())
@settings(max_examples=20, deadline=None)
def test_lp_bound_is_at_least_every_single_constraint(topo: Topology) -> None:
    res = lp_bound(topo, M)
    assert res.exact and res.partition_search == "exact"
    assert res.seconds >= brute_force(topo, extended=False)
    assert res.seconds == brute_force(topo, extended=True)


def test_known_small_graph() -> None:
    # two GPUs joined through a switch: 10 up / 5 down on g1's side
    nodes = (Node("g0", GPU, rank=0), Node("g1", GPU, rank=1), Node("x", SWITCH))
    links = (
        Link("g0", "x", Fraction(10)),
        Link("x", "g0", Fraction(10)),
        Link("g1", "x", Fraction(10)),
        Link("x", "g1", Fraction(5)),
    )
    topo = validate(Topology(nodes, links))
    assert brute_force(topo, extended=False) == Fraction(M, 5)
    assert lp_bound(topo, M).seconds == Fraction(M, 5)
