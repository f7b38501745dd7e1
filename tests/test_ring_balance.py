"""Ring and Balance generators: exactness, structure, and their simulated times vs closed forms."""

from __future__ import annotations

import os
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.errors import InputError
from resilientcc.schedules.balance import balance, hop_partition
from resilientcc.schedules.executor import execute
from resilientcc.schedules.generators import generate
from resilientcc.schedules.ring import CHECK_CAP, pxn_remap, ring, server_layouts
from resilientcc.sim import simulate
from resilientcc.topology import fail_nics, hierarchical, switch_model

M = Fraction(2**30)


# ----------------------------------------------------------------- structure
@settings(max_examples=25, deadline=None)
@given(
    servers=st.integers(1, 4),
    gpus=st.sampled_from([1, 2, 4]),
    nic_div=st.sampled_from([1, 2]),
    channels=st.none() | st.integers(1, 5),
)
def test_ring_is_exact_and_well_formed(
    servers: int, gpus: int, nic_div: int, channels: int | None
) -> None:
    nics = max(1, gpus // nic_div)
    topo = hierarchical(servers, gpus, nics)
    s = ring(topo, Fraction(1000), channels=channels)
    p = topo.num_ranks
    c = channels or nics
    assert len(s.chunks) == c * p
    assert len(s.transfers) == 2 * (p - 1) * c * p
    assert s.topology == topo.shape_fingerprint
    assert execute(s).ok
    # inter-server transfers name a NIC of the source server
    srv = {g.rank: g.server for g in topo.gpus}
    assert all(t.channel < nics for t in s.transfers if srv[t.src] != srv[t.dst])


@settings(max_examples=20, deadline=None)
@given(
    servers=st.integers(2, 4),
    nics=st.sampled_from([2, 4, 8]),
    failed=st.integers(1, 7),
    server=st.integers(0, 3),
)
def test_balance_is_exact_under_any_single_server_failure(
    servers: int, nics: int, failed: int, server: int
) -> None:
    topo = fail_nics(hierarchical(servers, 8, nics), server % servers, failed % nics or 1)
    s = balance(topo, Fraction(12345))
    assert execute(s).ok
    assert sum(c.size for c in s.chunks) == 1
    # every surviving NIC of each hop carries bytes in proportion to its bandwidth
    srv = {g.rank: g.server for g in topo.gpus}
    p = topo.num_ranks
    for a in range(servers):
        b = (a + 1) % servers
        part = dict(hop_partition(topo, a, b))
        load: dict[int, Fraction] = {}
        for t in s.transfers:
            if srv[t.src] == a and srv[t.dst] == b:
                load[t.channel] = load.get(t.channel, Fraction(0)) + s.chunks[t.chunk].size
        total = sum(load.values())
        assert total == Fraction(2 * (p - 1), p)  # the ring moves 2(p-1)/p of the buffer per hop
        assert {k: v / total for k, v in load.items()} == part


def test_balance_fault_free_is_the_ring() -> None:
    topo = hierarchical(3, 8)
    a, b = ring(topo, M), balance(topo, M)
    assert a.transfers == b.transfers
    assert a.chunks == b.chunks


def test_generators_registry_and_errors() -> None:
    topo = hierarchical(2, 4)
    assert generate("ring", topo, M).name == "ring"
    assert generate("balance", topo, M).name == "balance"
    with pytest.raises(InputError, match="size"):
        ring(topo, Fraction(0))
    with pytest.raises(InputError, match="channels"):
        ring(topo, M, channels=0)
    with pytest.raises(InputError, match="unknown option"):
        balance(topo, M, chanels=3)
    # switch model (no NICs): one channel over the endpoints
    sw = switch_model([100, 100, 50])
    s = ring(sw, Fraction(300))
    assert len(s.chunks) == 3 and execute(s).ok
    assert balance(sw, Fraction(300)).transfers == s.transfers
    # one rank: nothing to do
    one = hierarchical(1, 1)
    assert ring(one, M).transfers == ()


def test_check_is_skipped_above_cap() -> None:
    assert CHECK_CAP >= 2**24
    lay = server_layouts(fail_nics(hierarchical(2, 8), 1, 3))[1]
    assert pxn_remap(lay) == {0: 3, 1: 4, 2: 5, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7}


# ----------------------------------------------------------------- simulated times
# Fast configurations (the full 4/8/16-server x X = 1/8, 1/4, 1/2 grid is in
# benchmarks/bench_sim.py --validate and docs/simulator.md; run it here with RCC_SLOW=1).
FAST = [(4, 4, 1), (4, 4, 2), (2, 8, 1), (2, 8, 4)]
SLOW = [(s, 8, k) for s in (4, 8, 16) for k in (1, 2, 4)]


def _grid() -> list[tuple[int, int, int]]:
    return SLOW if os.environ.get("RCC_SLOW") else FAST


@pytest.mark.parametrize(("servers", "nics", "failed"), _grid())
def test_balance_vs_closed_form_and_naive_ring(servers: int, nics: int, failed: int) -> None:
    x = failed / nics
    topo = fail_nics(hierarchical(servers, nics, nics), 0, failed)
    tb = simulate(balance(topo, M, check=False), topo, zero_latency=True).time_s
    tn = simulate(ring(topo, M, check=False), topo, zero_latency=True).time_s
    p = topo.num_ranks
    ff = 2 * (p - 1) / p * float(M) / (nics * 50e9)
    ratio = tb / ff
    assert ratio >= 1 / (1 - x) * (1 - 1e-9)  # never beats the degraded NIC bandwidth
    assert ratio == pytest.approx(1 / (1 - x), rel=0.025)
    assert tn >= tb * (1 - 1e-9)
    # the naive remap puts two channels on one surviving NIC as soon as one NIC is down
    assert tn / ff == pytest.approx(2.0, rel=1e-9)
