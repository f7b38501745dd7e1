"""The LP bound: agreement with the closed form, known answers, certificates, contraction."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.bounds import (
    fault_free_lower_bound,
    fault_free_ring_time,
    lower_bound,
    reference_bandwidth,
)
from resilientcc.bounds.closed_form import switch_bound
from resilientcc.bounds.lp import lp_bound
from resilientcc.errors import BoundError, InputError
from resilientcc.topology import (
    degrade_link,
    fail_nics,
    hierarchical,
    scale_server_nics,
    switch_model,
)

GB = 10**9
GIB = 2**30
B = 400 * GB  # healthy server: 8 x 400 Gb/s


@pytest.fixture(scope="module")
def flagship():
    return fail_nics(hierarchical(4, 8), 0, 4)


@given(caps=st.lists(st.tuples(st.integers(1, 400), st.integers(1, 400)), min_size=2, max_size=64))
@settings(max_examples=25, deadline=None)
def test_lp_equals_closed_form_on_switch_models(caps: list[tuple[int, int]]) -> None:
    eg = [Fraction(o) * GB for o, _ in caps]
    ing = [Fraction(i) * GB for _, i in caps]
    topo = switch_model(eg, ing)
    exact, _ = switch_bound(eg, ing, GIB)
    res = lp_bound(topo, GIB)
    assert res.method == "lp"
    assert abs(float(res.seconds) - float(exact)) <= 1e-6 * float(exact)
    assert res.seconds == exact  # in fact exact
    assert lower_bound(topo, GIB).method == "closed_form"


def test_flagship_lp(flagship) -> None:
    res = lower_bound(flagship, GIB)
    assert res.method == "lp" and res.exact
    assert res.seconds == 2 * Fraction(GIB) / B  # the degraded server's 200 GB/s cut
    assert res.normalized == 2
    assert "8 GPUs of server 0" in res.binding and "200 GB/s" in res.binding
    ring = fault_free_ring_time(flagship, GIB)
    assert ring == Fraction(62, 32) * GIB / B
    assert res.seconds / ring - 1 == Fraction(1, 31)
    # closed form on the server-level switch model agrees here
    cf = lower_bound(flagship, GIB, "closed-form")
    assert cf.method == "closed_form" and cf.seconds == res.seconds


def test_certificate_duals(flagship) -> None:
    res = lower_bound(flagship, GIB)
    assert res.constraints and len(res.duals) == len(res.constraints)
    assert all(d >= -1e-9 for d in res.duals)
    # every constraint alone is a valid bound no larger than the LP value
    assert all(c.seconds <= res.seconds for c in res.constraints)
    # the dual-weighted right-hand sides add up to the LP value (scaled units)
    cmax = max(c for c in (450 * GB, 64 * GB, 50 * GB))
    total = sum(c.dual * c.rhs for c in res.constraints)
    assert total * GIB / cmax == pytest.approx(float(res.seconds), rel=1e-6)
    binding = [c for c in res.constraints if c.dual > 1e-9]
    assert binding and binding[0].kind == "cut"
    assert "server 0" in res.certificate()
    assert res.iterations >= 1 and res.num_cuts >= 1 and res.num_partitions >= 1


def test_fault_free_bound_sits_below_nccl_ring(flagship) -> None:
    ff = fault_free_lower_bound(flagship, GIB)
    ring = fault_free_ring_time(flagship, GIB)
    n_servers = 4
    server_gossip = Fraction(2 * (n_servers - 1), n_servers) * GIB / B
    assert server_gossip <= ff.seconds < ring
    assert not ff.binding.startswith("cut")


def test_several_degraded_servers() -> None:
    topo = fail_nics(fail_nics(hierarchical(4, 8), 0, 4), 1, 2)
    res = lower_bound(topo, GIB)
    assert res.seconds == Fraction(GIB) / (200 * GB)
    assert "server 0" in res.binding


def test_several_nics_down_on_one_server() -> None:
    topo = fail_nics(hierarchical(4, 8), 2, [0, 1, 2, 3, 4, 5])
    res = lower_bound(topo, GIB)
    assert res.seconds == Fraction(GIB) / (100 * GB)
    assert res.normalized == 4
    assert "server 2" in res.binding


def test_degraded_single_link() -> None:
    topo = fail_nics(hierarchical(3, 8), 1, [1, 2, 3, 4, 5, 6, 7])
    assert lower_bound(topo, GIB).seconds == Fraction(GIB) / (50 * GB)
    topo = degrade_link(topo, "s1.nic0", "rail0", Fraction(1, 2))
    res = lower_bound(topo, GIB)
    assert res.seconds == Fraction(GIB) / (25 * GB)
    # one direction only: the send side binds ("must send M out")
    topo = degrade_link(
        fail_nics(hierarchical(3, 8), 1, [1, 2, 3, 4, 5, 6, 7]),
        "s1.nic0",
        "rail0",
        Fraction(1, 5),
        both_directions=False,
    )
    res = lower_bound(topo, GIB)
    assert res.seconds == Fraction(GIB) / (10 * GB)
    assert "send M out" in res.binding


def test_scaled_server_and_switch_fabric() -> None:
    topo = scale_server_nics(hierarchical(4, 8, fabric="switch"), 3, Fraction(1, 4))
    res = lower_bound(topo, GIB)
    assert res.seconds == Fraction(GIB) / (100 * GB)


def test_contraction_is_a_relaxation_and_certifies() -> None:
    topo = fail_nics(hierarchical(8, 8), 0, 4)
    full = lp_bound(topo, GIB, contract=False)
    con = lp_bound(topo, GIB, contract=True, certify=True)
    assert con.contracted and con.certified is True
    assert con.seconds <= full.seconds
    assert con.seconds == full.seconds == Fraction(GIB) / (200 * GB)
    # fault-free: contraction loses the GPU-level partitions, stays a valid lower bound
    healthy = hierarchical(8, 8)
    con_ff = lp_bound(healthy, GIB, contract=True, certify=False)
    full_ff = lp_bound(healthy, GIB, contract=False)
    assert con_ff.seconds == Fraction(2 * 7, 8) * GIB / B  # server-level gossip
    assert con_ff.seconds <= full_ff.seconds
    assert any("relaxation" in n for n in con_ff.notes)


def test_contracted_certification_failure_falls_back() -> None:
    # a weak NVLink makes island-splitting cuts bind: the contracted LP is not tight
    topo = hierarchical(2, 4, nvlink_bw=10 * GB, pcie_bw=10 * GB)
    res = lp_bound(topo, GIB, contract=True, certify=True)
    assert res.certified is False and not res.contracted
    assert res.seconds == lp_bound(topo, GIB, contract=False).seconds
    assert res.seconds > lp_bound(topo, GIB, contract=True, certify=False).seconds


def test_reference_bandwidth_definitions() -> None:
    assert reference_bandwidth(hierarchical(2, 8)) == B
    assert reference_bandwidth(hierarchical(2, 8, nvlink_bw=100 * GB)) == 100 * GB
    assert reference_bandwidth(hierarchical(2, 1)) == 50 * GB
    assert reference_bandwidth(hierarchical(1, 8)) == 450 * GB  # no network in the ring
    assert reference_bandwidth(switch_model([10, 30, 20])) == 30
    # B is the healthy bandwidth even when NICs are down
    assert reference_bandwidth(fail_nics(hierarchical(2, 8), 0, 4)) == B


def test_small_cases() -> None:
    assert lower_bound(hierarchical(1, 1), GIB).seconds == 0
    assert fault_free_ring_time(hierarchical(1, 1), GIB) == 0
    two = hierarchical(2, 1)
    assert lower_bound(two, GIB).seconds == Fraction(GIB) / (50 * GB)
    assert lower_bound(hierarchical(1, 8), GIB).seconds > 0  # NVLink only
    assert lower_bound(two, "1GiB").seconds == lower_bound(two, GIB).seconds


def test_bad_method_and_size() -> None:
    with pytest.raises(InputError):
        lower_bound(hierarchical(2, 2), GIB, "simplex")
    with pytest.raises(InputError):
        lower_bound(hierarchical(2, 2), "1 parsec")
    with pytest.raises(InputError):
        lower_bound(hierarchical(2, 2), -5)


def test_closed_form_needs_switch_shape() -> None:
    from resilientcc.topology.model import GPU, SWITCH, Link, Node, Topology

    nodes = (
        Node("a", GPU, rank=0),
        Node("b", GPU, rank=1),
        Node("x", SWITCH),
        Node("y", SWITCH),
    )
    links = tuple(
        Link(s, d, Fraction(10)) for s, d in [("a", "x"), ("x", "b"), ("b", "y"), ("y", "a")]
    )
    topo = Topology(nodes, links)
    with pytest.raises(BoundError):
        lower_bound(topo, 100, "closed_form")
    assert lower_bound(topo, 100).seconds == 10


def test_linear_in_size_and_cache() -> None:
    from resilientcc.bounds.lp import clear_cache

    topo = fail_nics(hierarchical(3, 4), 1, 2)
    clear_cache()
    a = lp_bound(topo, GIB)
    b = lp_bound(topo, 3 * GIB)
    assert b.seconds == 3 * a.seconds
    assert [c.seconds * 3 for c in a.constraints] == [c.seconds for c in b.constraints]
    clear_cache()
    c = lp_bound(topo, 3 * GIB, cache=False)
    assert c.seconds == b.seconds and c.binding == b.binding and c.size == 3 * GIB


def test_auto_contracts_large_clusters_and_certifies() -> None:
    topo = fail_nics(hierarchical(64, 8), 0, 4)  # 512 GPUs, 1096 vertices
    res = lower_bound(topo, GIB)
    assert res.contracted and res.certified is True
    assert res.seconds == 2 * Fraction(GIB) / B
    assert any("certified" in n for n in res.notes)


def test_island_cut_floor() -> None:
    from resilientcc.bounds.lp import island_cut_floor

    assert island_cut_floor(hierarchical(2, 8)) == 450 * GB
    # GPUs sharing a NIC have a second disjoint path through it
    assert island_cut_floor(hierarchical(2, 2, nics_per_server=1)) == 514 * GB
    # PCIe slower than the NIC: islands are not closable, no shortcut
    assert island_cut_floor(hierarchical(2, 8, pcie_bw=10 * GB)) is None
    topo = hierarchical(3, 4, pcie_bw=10 * GB)
    res = lp_bound(topo, GIB, contract=True, certify=True)
    assert res.seconds == lp_bound(topo, GIB, contract=False).seconds


@settings(max_examples=12, deadline=None)
@given(
    servers=st.integers(2, 4),
    gpus=st.sampled_from([2, 4, 8]),
    lost=st.integers(1, 3),
)
def test_bound_is_monotone_under_failures(servers, gpus, lost):
    """A failure only removes capacity, so the bound can only grow (regression: the
    partition heuristics once missed the singleton partition on a degraded cluster)."""
    from resilientcc.topology import fail_nics, hierarchical

    size = Fraction(2**30)
    healthy = hierarchical(servers, gpus)
    degraded = fail_nics(healthy, 0, min(lost, gpus - 1))
    assert lower_bound(degraded, size).seconds >= lower_bound(healthy, size).seconds
