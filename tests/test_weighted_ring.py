"""The weighted ring: exact segment sizes, the straggler's bytes, soundness, OptCC's choice."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.bounds import lower_bound
from resilientcc.errors import ScheduleError
from resilientcc.schedules import executor
from resilientcc.schedules.balance import balance
from resilientcc.schedules.optcc import choose_variant, optcc
from resilientcc.schedules.weighted_ring import (
    relief_positions,
    segment_sizes,
    weighted_ring,
    weighted_ring_applies,
)
from resilientcc.sim import simulate
from resilientcc.topology import fail_nics, hierarchical, scale_server_nics

M = Fraction(2**30)


@given(
    p=st.integers(8, 256),
    relief=st.integers(2, 6),
    beta=st.fractions(Fraction(1, 2), Fraction(1)),
)
def test_segment_sizes_solve_the_balance(p: int, relief: int, beta: Fraction) -> None:
    x, y = segment_sizes(p, relief, beta)
    assert relief * x + (p - relief) * y == 1
    assert 2 - 2 * x == beta * (2 - 2 * y)
    assert (y > 0) == (beta > 1 - Fraction(1, relief))


def test_relief_positions_follow_the_straggler_hops() -> None:
    # 3 servers of 2 GPUs; the ring enters server 1 at position 2 and leaves at 3
    server_of = {r: r // 2 for r in range(6)}
    assert relief_positions(list(range(6)), server_of, 1) == {2, 3, 4, 5}
    assert relief_positions(list(range(6)), server_of, 0) == {0, 1, 2, 3}


def _crossing(sched, server: int, gpus: int, *, out: bool) -> Fraction:
    """Bytes the schedule sends out of (``out``) or into ``server`` over the network."""
    total = Fraction(0)
    for t in sched.transfers:
        here, there = (t.src, t.dst) if out else (t.dst, t.src)
        if here // gpus == server and there // gpus != server:
            total += sched.transfer_bytes(t)
    return total


@settings(max_examples=12, deadline=None)
@given(
    servers=st.integers(4, 6),
    gpus=st.sampled_from([2, 4]),
    straggler=st.integers(0, 3),
    beta=st.sampled_from([Fraction(4, 5), Fraction(7, 8), Fraction(19, 20)]),
)
def test_straggler_carries_beta_of_a_healthy_server(
    servers: int, gpus: int, straggler: int, beta: Fraction
) -> None:
    """The straggler moves exactly ``β`` times the bytes of a server away from it."""
    topo = scale_server_nics(hierarchical(servers, gpus), straggler, beta)
    sched = weighted_ring(topo, M, straggler, beta)  # runs the exact executor
    far = (straggler + 2) % servers
    x, y = segment_sizes(servers * gpus, 4, beta)
    assert sched.meta_get("segments") == f"{x},{y}"
    for out in (True, False):
        assert _crossing(sched, far, gpus, out=out) == (2 - 2 * y) * M
        assert _crossing(sched, straggler, gpus, out=out) == beta * (2 - 2 * y) * M


def test_weighted_ring_is_an_allreduce_with_dead_nics() -> None:
    topo = fail_nics(hierarchical(3, 8), 1, 1)
    sched = weighted_ring(topo, M, 1, Fraction(7, 8), check=False)
    executor.check(sched)
    assert sched.meta_get("pieces") == "14"


def test_weighted_ring_beats_balance_and_respects_the_bound() -> None:
    topo = fail_nics(hierarchical(4, 8), 0, 1)
    t_w = simulate(weighted_ring(topo, M, 0, Fraction(7, 8), check=False), topo).time_s
    t_b = simulate(balance(topo, M, check=False), topo).time_s
    assert float(lower_bound(topo, M).seconds) <= t_w < 0.99 * t_b


def test_too_slow_a_straggler_is_refused() -> None:
    topo = fail_nics(hierarchical(3, 8), 0, 2)
    assert not weighted_ring_applies(topo, Fraction(3, 4))
    with pytest.raises(ScheduleError, match="too slow"):
        weighted_ring(topo, M, 0, Fraction(3, 4))
    with pytest.raises(ScheduleError, match="three servers"):
        weighted_ring(fail_nics(hierarchical(2, 8), 0, 1), M, 0, Fraction(7, 8))


def test_optcc_chooses_the_weighted_ring_above_eight_servers() -> None:
    def choice(servers: int, lost: int) -> tuple[str, tuple[int, Fraction] | None]:
        # the hierarchical ring refused: it runs there by default
        topo = fail_nics(hierarchical(servers, 8), 0, lost)
        c = choose_variant(topo, M, hier_ring=False)
        return c.variant, c.relief

    assert choice(16, 1) == ("weighted_ring", (0, Fraction(7, 8)))
    assert choice(9, 1) == ("weighted_ring", (0, Fraction(7, 8)))
    assert choice(16, 2) == ("direct", None)  # β = 3/4: the rings plus tail
    assert choice(8, 1) == ("pipeline", None)


def test_optcc_weighted_ring_option() -> None:
    topo = fail_nics(hierarchical(3, 8), 0, 1)
    sched = optcc(topo, Fraction(2**20), weighted_ring=True)
    assert sched.name == "optcc"
    assert sched.meta_get("variant") == "weighted ring"
    with pytest.raises(ScheduleError, match="more than 3/4"):
        optcc(fail_nics(hierarchical(3, 8), 0, 2), M, weighted_ring=True)
    with pytest.raises(ScheduleError, match="cannot be combined"):
        optcc(topo, M, weighted_ring=True, direct=True)
    with pytest.raises(ScheduleError, match="true or false"):
        optcc(topo, M, weighted_ring="yes")
