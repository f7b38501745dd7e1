"""The latency-aware lower bound: known answers, its relation to the LP, and tightness.

Soundness against every generator's simulated schedules is in ``test_soundness.py``.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.bounds import latency_lower_bound, lower_bound
from resilientcc.bounds.latency import route_latency_floor, window_time
from resilientcc.errors import BoundError
from resilientcc.schedules.generators import generate
from resilientcc.sim import simulate
from resilientcc.topology import fail_nics, hierarchical, switch_model
from resilientcc.topology.model import Link, Topology

US = Fraction(1, 10**6)


def _without_latency(topo: Topology) -> Topology:
    links = tuple(Link(lk.src, lk.dst, lk.capacity, Fraction(0), lk.kind) for lk in topo.links)
    return Topology(topo.nodes, links, topo.name, topo.params, topo.failures)


@given(
    caps=st.lists(st.integers(1, 50), min_size=1, max_size=6),
    lats=st.lists(st.integers(0, 20), min_size=6, max_size=6),
    need=st.integers(1, 500),
)
def test_window_time_is_the_least_time_that_carries_the_load(caps, lats, need):
    c = [Fraction(x) for x in caps]
    lam = [Fraction(x) for x in lats[: len(c)]]
    t = window_time(c, lam, Fraction(need))
    assert t is not None

    def carried(x: Fraction) -> Fraction:
        return sum(
            (ci * max(Fraction(0), x - li) for ci, li in zip(c, lam, strict=True)),
            start=Fraction(0),
        )

    assert carried(t) == need
    assert carried(t - Fraction(1, 1000)) < need


def test_window_time_without_capacity():
    assert window_time([Fraction(0)], [Fraction(1)], Fraction(1)) is None


def test_route_latency_floor_of_the_flagship_links():
    topo = hierarchical(2, 4)
    lam = dict(zip(((lk.src, lk.dst) for lk in topo.links), route_latency_floor(topo), strict=True))
    # NCCL's constants: 3.4 µs per NVLink hop, 14 µs per network hop
    assert lam[("s0.gpu1", "s0.nvswitch")] == Fraction(34, 10) * US
    assert lam[("s0.nic2", "rail2")] == 14 * US
    assert lam[("rail2", "s1.nic2")] == 14 * US


def test_zero_latency_gives_the_lp_bound():
    for topo in (
        _without_latency(fail_nics(hierarchical(3, 4), 0, 2)),
        _without_latency(hierarchical(2, 2)),
        switch_model([100, 100, 50]),
    ):
        for size in (1, 10**6):
            lat = latency_lower_bound(topo, size, base_latency=0)
            assert lat.seconds == lower_bound(topo, size, method="lp").seconds
            assert lat.latency_seconds == 0


def test_switch_model_known_answer():
    """n endpoints of c B/s, latency l per link, base b: the LP's binding constraint's
    window shrinks by the route latency 2l, then b: T = b + 2l + LP."""
    topo = switch_model([100, 100, 100, 50], latency=Fraction(3, 100))
    size = 1000
    lp = lower_bound(topo, size, method="lp").seconds
    lat = latency_lower_bound(topo, size, base_latency=Fraction(1, 10))
    assert lat.seconds == Fraction(1, 10) + Fraction(6, 100) + lp
    assert lat.link_latency == (Fraction(6, 100), Fraction(6, 100))


def test_two_endpoints_are_tight():
    """Two GPUs on a switch: each sends its M bytes to the other; the simulated exchange
    takes exactly the latency-aware bound (so it is not too low by a hop)."""
    topo = switch_model([10**9, 10**9], latency=US)
    size = Fraction(10**6)
    lat = latency_lower_bound(topo, size)
    t = simulate(generate("optcc", topo, size), topo).time_s
    assert t == pytest.approx(float(lat.seconds), rel=1e-12)
    assert lat.seconds == Fraction(1, 1000) + 2 * US + Fraction(84, 10**7)


@settings(max_examples=15, deadline=None)
@given(
    servers=st.integers(2, 4),
    gpus=st.sampled_from([1, 2, 4]),
    lost=st.integers(0, 3),
    size=st.sampled_from([Fraction(1), Fraction(4096), Fraction(2**24)]),
)
def test_at_least_the_lp_bound_plus_base(servers, gpus, lost, size):
    topo = hierarchical(servers, gpus)
    if 0 < lost < gpus:
        topo = fail_nics(topo, 0, lost)
    base = Fraction(84, 10**7)
    lat = latency_lower_bound(topo, size)
    assert lat.seconds >= base + lower_bound(topo, size, method="lp").seconds
    # and more latency never lowers it
    assert latency_lower_bound(topo, size, base_latency=2 * base).seconds == lat.seconds + base


def test_flagship_binding_constraint():
    """4 × 8 H100, half the NICs of server 0 lost: the straggler's egress binds, its window
    shortened by a network route (14 µs); with NCCL's base 8.4 µs, 22.4 µs over the LP."""
    topo = fail_nics(hierarchical(4, 8), 0, 4)
    lat = latency_lower_bound(topo, 2**30)
    assert "server 0" in lat.binding
    assert lat.seconds - lower_bound(topo, 2**30).seconds == Fraction(224, 10**7)


def test_bad_input():
    topo = hierarchical(2, 2)
    with pytest.raises(BoundError, match="size"):
        latency_lower_bound(topo, 0)
    with pytest.raises(BoundError, match="base latency"):
        latency_lower_bound(topo, 1, base_latency=-1)
    with pytest.raises(BoundError, match="two GPUs"):
        latency_lower_bound(switch_model([100]), 1)


def test_contracted_graph_keeps_each_link_latency() -> None:
    """With server islands contracted, each kept link carries the route latency of the
    topology link it stands for: the same bound as on the full graph here."""
    topo = fail_nics(hierarchical(8, 8), 0, 4)
    full = latency_lower_bound(topo, 2**30, contract=False)
    contracted = latency_lower_bound(topo, 2**30, contract=True)
    assert contracted.contracted and not full.contracted
    assert contracted.seconds == full.seconds
    assert contracted.link_latency == (14 * US, 14 * US)
