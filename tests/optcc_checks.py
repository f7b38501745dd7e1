"""Shared check for the OptCC tests: a schedule near the bound and ahead of its rivals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

from resilientcc.bounds import lower_bound
from resilientcc.schedules.ir import Schedule
from resilientcc.schedules.optcc import optcc
from resilientcc.sim import simulate
from resilientcc.topology.model import Topology


def assert_optcc_near_bound(
    topo: Topology,
    size: Fraction,
    variant: str,
    factor: float,
    rivals: Sequence[Callable[[Topology, Fraction], Schedule]],
) -> None:
    """OptCC (its exact executor check on) runs ``variant``, simulates between the bound and
    ``factor`` times it, and faster than every schedule in ``rivals``."""
    sched = optcc(topo, size)
    assert sched.meta_get("variant") == variant
    t = simulate(sched, topo).time_s
    bound = float(lower_bound(topo, size).seconds)
    assert bound <= t <= factor * bound
    for rival in rivals:
        assert t < simulate(rival(topo, size), topo).time_s, rival.__name__
