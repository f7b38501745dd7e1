"""Soundness of the whole stack: no correct schedule beats the LP lower bound in the simulator.

Nor, with latencies, the latency-aware bound (the LP's windows shortened by the route
latencies and the base latency).

Nor its own byte floor (its busiest link's bytes over capacity, computed without running it).

A violation means a bug in the generator (not a correct AllReduce), the simulator (too
fast) or the bound (too high).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resilientcc.schedules import executor
from resilientcc.schedules.generators import GENERATORS, generate
from resilientcc.topology import (
    fail_nics,
    hierarchical,
    scale_server_nics,
    switch_model,
    uniform_switch,
)

sim = pytest.importorskip("resilientcc.sim")
bounds = pytest.importorskip("resilientcc.bounds")

TOPOLOGIES = {
    "2x2 nic0 down": lambda: fail_nics(hierarchical(2, 2), 0, 1),
    "3x2 healthy": lambda: hierarchical(3, 2),
    "2x4 half NICs": lambda: fail_nics(hierarchical(2, 4), 1, 2),
    "3x4 two degraded": lambda: scale_server_nics(
        fail_nics(hierarchical(3, 4), 0, 1), 2, Fraction(1, 2)
    ),
    "4x2 switch fabric": lambda: fail_nics(hierarchical(4, 2, fabric="switch"), 0, 1),
    "switch model beta 1/2": lambda: uniform_switch(4, 400 * 10**9, Fraction(1, 2)),
    "switch model beta 7/8": lambda: uniform_switch(3, 400 * 10**9, Fraction(7, 8)),
    "switch model 5 us links": lambda: switch_model(
        [4 * 10**10] * 3 + [10**10], latency=Fraction(5, 10**6)
    ),
}

_cache: dict[tuple[str, int], float] = {}
_lat_cache: dict[tuple[str, int], float] = {}


def bound(name: str, size: int) -> float:
    if (name, size) not in _cache:
        _cache[(name, size)] = float(bounds.lower_bound(TOPOLOGIES[name](), size).seconds)
    return _cache[(name, size)]


def latency_bound(name: str, size: int) -> float:
    if (name, size) not in _lat_cache:
        lat = bounds.latency_lower_bound(TOPOLOGIES[name](), size)
        _lat_cache[(name, size)] = float(lat.seconds)
    return _lat_cache[(name, size)]


@pytest.mark.parametrize("size", [2**20, 2**26])
@pytest.mark.parametrize("topo_name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("algo", sorted(GENERATORS))
def test_simulated_time_is_at_least_the_bound(algo, topo_name, size):
    topo = TOPOLOGIES[topo_name]()
    s = generate(algo, topo, Fraction(size))
    assert executor.execute(s).ok
    floor, link = sim.byte_floor(s, topo)
    for zero in (False, True):
        r = sim.simulate(s, topo, zero_latency=zero)
        t = r.time_s
        assert t >= bound(topo_name, size) * (1 - 1e-9), (
            f"{algo} on {topo_name}: simulated {t:.6e} s < bound {bound(topo_name, size):.6e} s"
        )
        # no run beats its busiest link; the static loads are the simulated ones
        assert t >= floor * (1 - 1e-9), f"{algo} on {topo_name}: {t:.6e} s < {link}'s {floor:.6e}"
        assert r.byte_floor() == pytest.approx((floor, link), rel=1e-12)
        if not zero:
            lat = latency_bound(topo_name, size)
            assert t >= lat * (1 - 1e-9), (
                f"{algo} on {topo_name}: simulated {t:.6e} s < latency bound {lat:.6e} s"
            )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    servers=st.integers(2, 4),
    gpus=st.sampled_from([1, 2, 4]),
    lost=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3)), max_size=2),
    slow=st.sampled_from([None, Fraction(1, 2), Fraction(7, 8)]),
    algo=st.sampled_from(sorted(GENERATORS)),
    size=st.sampled_from([Fraction(4096), Fraction(10**6, 3), Fraction(2**22)]),
)
def test_random_clusters_never_beat_the_bound(servers, gpus, lost, slow, algo, size):
    """The same on random clusters: NICs lost on any servers, one server slowed."""
    topo = hierarchical(servers, gpus)
    down: dict[int, int] = {}
    for s, k in lost:
        if s < servers and down.get(s, 0) + k < gpus:  # keep a NIC alive on each server
            topo = fail_nics(topo, s, k)
            down[s] = down.get(s, 0) + k
    if slow is not None:
        topo = scale_server_nics(topo, servers - 1, slow)
    s = generate(algo, topo, size)
    lb = float(bounds.lower_bound(topo, size).seconds)
    lat = float(bounds.latency_lower_bound(topo, size).seconds)
    for zero in (False, True):
        t = sim.simulate(s, topo, zero_latency=zero).time_s
        assert t >= lb * (1 - 1e-9), f"{algo}: simulated {t:.6e} s < bound {lb:.6e} s"
        if not zero:
            assert t >= lat * (1 - 1e-9), f"{algo}: simulated {t:.6e} s < latency bound {lat:.6e} s"
