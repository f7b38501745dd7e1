"""The flow-level simulator: closed forms, max-min sharing, FIFO pipelining, routing, errors."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.errors import SimulationError
from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
from resilientcc.schedules.ring import ring
from resilientcc.sim import maxmin_rates, plot, simulate
from resilientcc.topology import fail_nics, hierarchical, scale_server_nics, switch_model
from resilientcc.topology.model import GPU, SWITCH, Link, Node, Topology

GB = 10**9


def line_topology(caps: list[int], latency: Fraction = Fraction(0)) -> Topology:
    """GPUs a, b and switches in a line: a -> x1 -> ... -> b, with the given capacities."""
    names = ["a"] + [f"x{i}" for i in range(1, len(caps))] + ["b"]
    nodes = [Node("a", GPU, server=0, local=0, rank=0), Node("b", GPU, server=1, local=0, rank=1)]
    nodes += [Node(nm, SWITCH) for nm in names[1:-1]]
    links = [
        Link(u, v, Fraction(c), latency)
        for u, v, c in zip(names[:-1], names[1:], caps, strict=True)
    ]
    links += [
        Link(v, u, Fraction(c), latency)
        for u, v, c in zip(names[:-1], names[1:], caps, strict=True)
    ]
    return Topology(tuple(nodes), tuple(links))


def sched(transfers: list[Transfer], ranks: int, size: int, chunks: int) -> Schedule:
    return Schedule("t", ranks, Fraction(size), uniform_chunks(chunks), tuple(transfers))


# ----------------------------------------------------------------- closed forms
@pytest.mark.parametrize("servers", [2, 4, 8])
def test_ring_fault_free_matches_closed_form_exactly(servers: int) -> None:
    topo = hierarchical(servers, 8)
    p = topo.num_ranks
    m = Fraction(2**30)
    res = simulate(ring(topo, m, check=servers <= 4), topo, zero_latency=True)
    expected = 2 * (p - 1) / p * float(m) / (8 * 50e9)
    assert res.time_s == pytest.approx(expected, rel=1e-9)
    assert res.latency_s == 0.0


def test_ring_with_latency_bandwidth_part_is_the_closed_form() -> None:
    topo = hierarchical(4, 8)
    p = topo.num_ranks
    m = Fraction(2**30)
    s = ring(topo, m)
    res = simulate(s, topo)
    expected = 2 * (p - 1) / p * float(m) / (8 * 50e9)
    assert res.bandwidth_s == pytest.approx(expected, rel=1e-6)
    # base 8.4 us + one GPU->nvswitch->GPU->NIC->rail->NIC->GPU hop (3.4 + 1 + 12 + 1 us)
    assert res.latency_s == pytest.approx(8.4e-6 + 17.4e-6, rel=1e-9)
    rerun = simulate(s, topo, latency_mode="rerun")
    assert rerun.time_s == res.time_s
    assert rerun.bandwidth_s == pytest.approx(expected, rel=1e-9)


def test_small_message_ring_is_latency_bound() -> None:
    """Tiny messages: every one of the 2(p-1) steps pays a hop latency."""
    topo = hierarchical(2, 2)
    res = simulate(ring(topo, Fraction(64)), topo)
    assert res.latency_s > 0.99 * (res.time_s - res.base_latency_s)
    assert res.time_s > 2 * (topo.num_ranks - 1) * 3.4e-6


# ----------------------------------------------------------------- max-min, FIFO, latency
def test_two_flows_sharing_a_link_get_half_each() -> None:
    topo = switch_model([100, 100, 100], [100, 100, 200])
    # ranks 0 and 1 both send 100 bytes to rank 2: its downlink (200) is shared; uplinks 100
    s = sched([Transfer(0, 0, 2, 0, "copy"), Transfer(1, 1, 2, 1, "copy")], 3, 200, 2)
    res = simulate(s, topo, base_latency=0)
    assert res.time_s == pytest.approx(1.0)
    topo2 = switch_model([100, 100, 100], [100, 100, 100])
    res2 = simulate(s, topo2, base_latency=0)
    assert res2.time_s == pytest.approx(2.0)  # 50 B/s each on the shared 100 B/s downlink
    assert np.allclose(res2.start_s, 0.0)


def test_three_link_line_bottleneck_and_latency() -> None:
    topo = line_topology([300, 100, 200], latency=Fraction(1, 1000))
    s = sched([Transfer(0, 0, 1, 0, "copy")], 2, 500, 1)
    res = simulate(s, topo, base_latency=0)
    assert res.time_s == pytest.approx(500 / 100 + 3e-3)
    assert res.latency_s == pytest.approx(3e-3)
    assert res.link_bytes.sum() == pytest.approx(3 * 500)


def test_fifo_pipelining_pays_one_latency() -> None:
    """K chunks on one connection, each dependent on nothing: K·s/B + one latency."""
    k = 8
    lat = Fraction(1, 10)
    topo = line_topology([1000], latency=lat)
    s = sched([Transfer(i, 0, 1, i, "copy") for i in range(k)], 2, 8000, k)
    res = simulate(s, topo, base_latency=0)
    assert res.time_s == pytest.approx(k * 1000 / 1000 + 0.1)
    # FIFO: transfer i starts when i-1 has finished transmitting, not when it completed
    assert np.allclose(res.start_s, np.arange(k) * 1.0)
    assert np.allclose(res.end_s - res.tx_end_s, 0.1)


def test_dependency_chain_pays_latency_per_hop() -> None:
    lat = Fraction(1, 10)
    topo = line_topology([1000], latency=lat)
    ts = [Transfer(i, 0, 1, i, "copy", deps=(i - 1,) if i else ()) for i in range(4)]
    res = simulate(sched(ts, 2, 4000, 4), topo, base_latency=0)
    assert res.time_s == pytest.approx(4 * (1.0 + 0.1))
    assert res.latency_s == pytest.approx(0.4)
    assert res.critical_path == (0, 1, 2, 3)


def test_floor_window_known_answer() -> None:
    """a -> b, b -> a, a -> b in a chain (1000 B each at 1000 B/s, 0.1 s per hop, base
    0.5 s): the link a -> b carries 2 s of bytes in its window [0, 3.2] and the run ends
    0.6 s after it (the last hop's latency and the base)."""
    topo = line_topology([1000], latency=Fraction(1, 10))
    ts = [
        Transfer(0, 0, 1, 0, "copy"),
        Transfer(1, 1, 0, 1, "copy", deps=(0,)),
        Transfer(2, 0, 1, 1, "copy", deps=(1,)),
    ]
    res = simulate(sched(ts, 2, 2000, 2), topo, base_latency=0.5)
    assert res.time_s == pytest.approx(3.8)
    w = res.floor_window()
    assert w.link == "a->b"
    assert (w.floor_s, w.head_s, w.idle_s, w.tail_s) == pytest.approx((2.0, 0.0, 1.2, 0.6))
    # the other direction: one transfer in [1.1, 2.1]
    i = res.link_names.index("b->a")
    assert (res.link_first_s[i], res.link_last_s[i]) == pytest.approx((1.1, 2.1))


@pytest.mark.parametrize("fail", [0, 2])
def test_floor_window_adds_up_and_a_zero_latency_ring_has_no_gap(fail: int) -> None:
    topo = fail_nics(hierarchical(2, 8), 0, fail) if fail else hierarchical(2, 8)
    s = ring(topo, Fraction(2**24))
    for zero in (False, True):
        res = simulate(s, topo, zero_latency=zero)
        w = res.floor_window()
        assert min(w.head_s, w.idle_s, w.tail_s) >= -1e-12
        assert w.head_s + w.floor_s + w.idle_s + w.tail_s == pytest.approx(res.time_s, rel=1e-12)
        if zero:  # the ring keeps its busiest link busy from start to end
            assert w.head_s + w.idle_s + w.tail_s <= 1e-9 * res.time_s
        # a link has a window exactly where it carries bytes
        assert np.array_equal(np.isnan(res.link_first_s), res.link_bytes == 0)
        assert np.array_equal(np.isnan(res.link_last_s), res.link_bytes == 0)


def test_base_latency_added_once() -> None:
    topo = line_topology([1000])
    s = sched([Transfer(0, 0, 1, 0, "copy")], 2, 1000, 1)
    assert simulate(s, topo).time_s == pytest.approx(1.0 + 8.4e-6)
    assert simulate(s, topo, base_latency=1.0).time_s == pytest.approx(2.0)
    assert simulate(s, topo, base_latency=1.0, zero_latency=True).time_s == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(
    caps=st.lists(st.integers(1, 50), min_size=1, max_size=6),
    routes=st.lists(
        st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True), min_size=1, max_size=8
    ),
)
def test_maxmin_is_feasible_and_every_flow_has_a_saturated_bottleneck(
    caps: list[int], routes: list[list[int]]
) -> None:
    routes = [[x % len(caps) for x in r] for r in routes]
    routes = [sorted(set(r)) for r in routes]
    fe = np.array([f for f, r in enumerate(routes) for _ in r])
    le = np.array([x for r in routes for x in r])
    cap = np.array(caps, dtype=float)
    rate = maxmin_rates(fe, le, len(routes), cap)
    load = np.bincount(le, weights=rate[fe], minlength=len(caps))
    assert np.all(load <= cap * (1 + 1e-9))
    for f, r in enumerate(routes):
        # some link of the flow is saturated and no flow on it is faster than f
        assert any(
            load[x] >= cap[x] * (1 - 1e-9)
            and all(rate[g] <= rate[f] * (1 + 1e-9) for g, rg in enumerate(routes) if x in rg)
            for x in r
        )


# ----------------------------------------------------------------- routing
def test_pxn_remap_reroutes_dead_nic_channel() -> None:
    topo = fail_nics(hierarchical(2, 8), 0, 1)  # NIC 0 of server 0 down
    s = sched([Transfer(0, 7, 8, 0, "copy", channel=0)], 16, 10**6, 1)
    res = simulate(s, topo)
    used = {res.link_names[i] for i in np.flatnonzero(res.link_bytes)}
    assert "s0.nic1->rail1" in used  # 1st dead NIC -> 1st alive NIC
    assert "rail1->s1.nic1" in used


@pytest.mark.parametrize(
    ("fabric", "entry"), [("rail", "rail1->s1.nic1"), ("switch", "fabric->s1.nic0")]
)
def test_a_remapped_channel_enters_the_receiver_on_its_own_nic_on_a_switch_fabric(
    fabric: str, entry: str
) -> None:
    # NIC 0 of server 0 is down: channel 0 leaves on NIC 1. On a rail fabric it must stay on
    # rail 1; on a switch fabric server 1 takes it on its own NIC 0 (NCCL's ranks pick their
    # NICs each for itself), so its NIC 1 does not take two channels' ingress.
    topo = fail_nics(hierarchical(2, 8, fabric=fabric), 0, 1)
    s = sched([Transfer(0, 7, 8, 0, "copy", channel=0)], 16, 10**6, 1)
    res = simulate(s, topo)
    used = {res.link_names[i] for i in np.flatnonzero(res.link_bytes)}
    assert f"s0.nic1->{'rail1' if fabric == 'rail' else 'fabric'}" in used
    assert entry in used


def test_a_ring_from_a_server_with_a_dead_nic_loads_a_switch_fabric_peer_evenly() -> None:
    # 2 x 2 GPUs; server 1 lost NIC 1, server 0's NICs run at half speed. Server 1's two
    # channels both leave on its NIC 0 and enter server 0 on NICs 0 and 1: each of server
    # 0's NICs takes half of the ring's ingress (before, NIC 0 took all of it).
    topo = scale_server_nics(
        fail_nics(hierarchical(2, 2, fabric="switch"), 1, [1]), 0, Fraction(1, 2)
    )
    res = simulate(ring(topo, 2**20), topo, zero_latency=True)
    ingress = {
        n: res.link_bytes[i] for i, n in enumerate(res.link_names) if n.startswith("fabric->s0.")
    }
    assert ingress["fabric->s0.nic0"] == pytest.approx(ingress["fabric->s0.nic1"])
    assert ingress["fabric->s0.nic0"] > 0


def test_pinned_route_used_and_validated() -> None:
    topo = hierarchical(2, 2)
    route = ("s0.gpu0", "s0.nic0", "rail0", "s1.nic0", "s1.gpu0")
    s = sched([Transfer(0, 0, 2, 0, "copy", route=route)], 4, 10**6, 1)
    res = simulate(s, topo)
    used = {res.link_names[i] for i in np.flatnonzero(res.link_bytes)}
    assert used == {"s0.gpu0->s0.nic0", "s0.nic0->rail0", "rail0->s1.nic0", "s1.nic0->s1.gpu0"}
    bad = sched([Transfer(5, 0, 2, 0, "copy", route=("s0.gpu0", "rail0", "s1.gpu0"))], 4, 1, 1)
    with pytest.raises(SimulationError, match="transfer 5"):
        simulate(bad, topo)


def test_custom_topology_uses_shortest_path() -> None:
    topo = line_topology([10, 10, 10, 10])
    s = sched([Transfer(0, 0, 1, 0, "copy")], 2, 10, 1)
    assert simulate(s, topo, base_latency=0).time_s == pytest.approx(1.0)


# ----------------------------------------------------------------- errors, results, plot
def test_wrong_topology_and_deadlock_are_errors() -> None:
    topo = hierarchical(2, 2)
    with pytest.raises(SimulationError, match="ranks"):
        simulate(ring(hierarchical(3, 2), Fraction(64)), topo)
    # FIFO deadlock: on one connection transfer 0 waits for transfer 1, queued behind it
    ts = [
        Transfer(0, 0, 1, 0, "copy", deps=(2,)),
        Transfer(1, 0, 1, 0, "copy"),
        Transfer(2, 1, 0, 0, "copy", deps=(1,)),
    ]
    s = Schedule("dl", 4, Fraction(8), uniform_chunks(1), (ts[1], ts[0], ts[2]))
    with pytest.raises(SimulationError, match="deadlock"):
        simulate(s, topo)
    with pytest.raises(SimulationError, match="latency_mode"):
        simulate(ring(topo, Fraction(64)), topo, latency_mode="nope")


def test_result_views_and_plot(tmp_path: object) -> None:
    topo = hierarchical(2, 2)
    res = simulate(ring(topo, Fraction(2**20)), topo)
    assert res.num_transfers == 48
    assert res.num_events > 0
    tl = res.rank_timeline(0)
    assert len(tl) == 2 * 2 * (2 * 3)  # sends and receives, 2 channels, 6 steps
    assert all(a[3] <= b[3] for a, b in itertools.pairwise(tl))
    assert 0 < res.link_utilisation.max() <= 1 + 1e-9
    assert res.summary()["time_s"] == res.time_s
    with pytest.raises(ValueError):
        res.start_s[0] = 1.0  # read-only
    from pathlib import Path

    out = Path(str(tmp_path)) / "g.png"
    plot(res, out)
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_docs_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import runpy
    from pathlib import Path

    root = Path(__file__).parent.parent
    runpy.run_path(str(root / "docs_src" / "sim" / "example.py"))
    out = capsys.readouterr().out
    assert "balance" in out
    page = (root / "docs" / "simulator.md").read_text()
    for line in out.splitlines():  # the page shows what the example prints
        assert line in page, line


def test_gantt_draws_a_sample_spanning_the_whole_run() -> None:
    """Over the bar cap the Gantt chart takes every k-th transfer (it used to take the
    first ones, so a large run's chart stopped a fifth of the way in)."""
    from resilientcc.sim.plot import gantt_selection

    topo = hierarchical(2, 4)
    res = simulate(ring(topo, Fraction(2**20)), topo)
    every = gantt_selection(res)
    assert len(every) == res.num_transfers  # under the cap: all of them
    few = gantt_selection(res, max_bars=10)
    assert 5 <= len(few) <= 10
    assert set(few) <= set(every)
    late = float(np.max(res.start_s[few]))
    assert late >= 0.8 * float(np.max(res.start_s))
    assert len(gantt_selection(res, max_ranks=1)) == int(np.sum(res.src < 1))
