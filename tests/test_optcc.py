"""OptCC: shares from the bound, rail weights, pipelining, R2CC's model, simulated shape."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.errors import ScheduleError
from resilientcc.schedules import executor
from resilientcc.schedules.direct import default_pieces, piece_weights, rail_weights
from resilientcc.schedules.optcc import PIPELINE_MAX_SERVERS, balanced_shares, optcc
from resilientcc.schedules.r2cc import r2cc_allreduce, r2cc_model
from resilientcc.schedules.ring import ring
from resilientcc.topology import (
    apply_fail_specs,
    fail_nics,
    hierarchical,
    scale_server_nics,
    uniform_switch,
)

M = Fraction(2**30)


def straggler_shares(n: int, beta: Fraction) -> dict[int, Fraction]:
    return balanced_shares({0: beta, **{i: Fraction(1) for i in range(1, n)}})


@pytest.mark.parametrize("n", [3, 4, 8, 16])
def test_share_zero_at_and_below_beta_star(n):
    beta_star = Fraction(n - 1, 2 * n - 3)
    assert straggler_shares(n, beta_star)[0] == 0
    assert straggler_shares(n, beta_star / 2)[0] == 0
    assert straggler_shares(n, beta_star + Fraction(1, 1000))[0] > 0
    assert straggler_shares(n, Fraction(1)) == {i: Fraction(1, n) for i in range(n)}


@settings(max_examples=60, deadline=None)
@given(n=st.integers(3, 32), num=st.integers(1, 64))
def test_shares_meet_the_bound(n, num):
    """Σw = 1, w ≥ 0, and the bandwidth time max_s (1+(N−2)w_s)/B_s equals the bound."""
    beta = Fraction(num, 64)
    w = straggler_shares(n, beta)
    assert sum(w.values()) == 1 and min(w.values()) >= 0
    bw = {0: beta, **{i: Fraction(1) for i in range(1, n)}}
    t = max((1 + (n - 2) * w[s]) / bw[s] for s in w)
    bound = max(1 / beta, Fraction(2 * (n - 1)) / (n - 1 + beta))
    assert t == bound


def test_rail_weights_balance_nic_load():
    extra = {c: (Fraction(1, 4) if c >= 4 else Fraction(0)) for c in range(8)}
    lam = rail_weights(range(8), extra, Fraction(1))
    assert sum(lam.values()) == 1
    loads = {lam[c] + extra[c] for c in range(8)}
    assert len(loads) == 1
    # a huge extra load on one rail clips its weight at zero
    lam = rail_weights([0, 1], {0: Fraction(5), 1: Fraction(0)}, Fraction(1))
    assert lam == {0: Fraction(0), 1: Fraction(1)}


def test_pieces_and_weights():
    assert default_pieces(Fraction(2**20), 4) == 1
    assert default_pieces(Fraction(2**30), 4) > default_pieces(Fraction(2**26), 4)
    w = piece_weights(7)
    assert w == w[::-1] and w[0] < w[3]


def test_meta_records_the_split():
    s = optcc(fail_nics(hierarchical(4, 8), 0, 4), M, check=False)
    assert s.meta_get("share_straggler") == "0"
    s = optcc(
        fail_nics(hierarchical(4, 8), 0, 1),
        M,
        pieces=1,
        check=False,
        pipeline=False,
        hier_ring=False,
    )
    assert Fraction(str(s.meta_get("share_straggler"))) == Fraction(11, 62)
    lam = dict(kv.split(":", 1) for kv in str(s.meta_get("rail_weights")).split(","))
    # rail 0 is dead on the straggler: healthy pairs give it more weight
    assert Fraction(lam["0"]) > Fraction(lam["1"])


def test_straggler_uses_only_alive_nics():
    topo = fail_nics(hierarchical(4, 4), 0, 2)
    s = optcc(topo, M, pieces=2)
    for t in s.transfers:
        if t.src // 4 != t.dst // 4 and 0 in (t.src // 4, t.dst // 4):
            assert t.channel % 4 in (2, 3)


def test_straggler_moves_exactly_m_each_way():
    topo = fail_nics(hierarchical(4, 8), 0, 4)
    s = optcc(topo, M, pieces=2, check=False)
    out = sum(s.transfer_bytes(t) for t in s.transfers if t.src // 8 == 0 and t.dst // 8 != 0)
    inn = sum(s.transfer_bytes(t) for t in s.transfers if t.dst // 8 == 0 and t.src // 8 != 0)
    assert out == M and inn == M


def test_r2cc_model_values():
    assert float(r2cc_model(8, Fraction(1, 2))) == pytest.approx(1.5714, abs=1e-4)
    assert r2cc_model(4, Fraction(0)) == 1


def test_r2cc_split():
    s = r2cc_allreduce(fail_nics(hierarchical(4, 8), 0, 2), M, check=False)
    assert s.meta_get("tail_fraction") == "1/4"
    assert s.meta_get("ring_channels") == "2,3,4,5,6,7"
    s = r2cc_allreduce(hierarchical(3, 2), M)
    assert s.meta_get("tail_fraction") == "0"
    assert executor.execute(s).ok


def test_r2cc_matches_its_model_in_the_simulator():
    """Switch model, n = 8 servers, X = ½: T/T_ff = 1.571 (within 3 %), bandwidth only."""
    sim = pytest.importorskip("resilientcc.sim")
    from resilientcc.bounds import fault_free_ring_time

    topo = uniform_switch(8, 400 * 10**9, Fraction(1, 2))
    s = r2cc_allreduce(topo, M, pieces=32)
    t = sim.simulate(s, topo, zero_latency=True).time_s
    ratio = t / float(fault_free_ring_time(topo, M))
    assert ratio == pytest.approx(float(r2cc_model(8, Fraction(1, 2))), rel=0.03)


@pytest.mark.parametrize("lost", [1, 2, 4])
def test_r2cc_tail_chains_take_one_reduction_per_gpu_and_chunk(lost: int) -> None:
    """R2CC's tail (``chain``, the default): on a healthy server every GPU receives each
    tail chunk's partial at most once inside the server (stage 1), where a binomial
    tree's root takes three (8 GPUs). Same bytes; the exact executor accepts both."""
    from collections import Counter

    topo = fail_nics(hierarchical(4, 8), 0, lost)
    chain = r2cc_allreduce(topo, Fraction(2**24), pieces=2)
    tree = r2cc_allreduce(topo, Fraction(2**24), pieces=2, chain=False)
    assert tree.meta_get("tail_reduce") == "tree" and chain.meta_get("tail_reduce") is None
    intra = 8  # stage 1's channel: one past the NICs

    def receptions(s) -> Counter:
        return Counter(
            (t.dst, t.chunk)
            for t in s.transfers
            if t.channel == intra and t.op == "reduce" and t.src // 8 == t.dst // 8 != 0
        )

    assert max(receptions(chain).values()) == 1
    assert max(receptions(tree).values()) == 3
    assert sum(receptions(chain).values()) == sum(receptions(tree).values())
    assert sorted(chain.transfer_bytes(t) for t in chain.transfers) == sorted(
        tree.transfer_bytes(t) for t in tree.transfers
    )


def test_r2cc_tail_chains_are_closer_to_the_model() -> None:
    """4 × 8 GPUs, 1 NIC lost, 1 GiB (X = 1/8, model 1.095 × the fault-free ring):
    chains 1.095, trees 1.111 when measured (16 servers: 1.113 against 1.152, model 1.076)."""
    sim = pytest.importorskip("resilientcc.sim")
    from resilientcc.bounds import lower_bound

    topo = fail_nics(hierarchical(4, 8), 0, 1)
    t_chain = sim.simulate(r2cc_allreduce(topo, M), topo).time_s
    t_tree = sim.simulate(r2cc_allreduce(topo, M, chain=False), topo).time_s
    assert float(lower_bound(topo, M).seconds) < t_chain < 0.99 * t_tree


def test_bad_r2cc_chain() -> None:
    with pytest.raises(ScheduleError, match="chain must be true or false"):
        r2cc_allreduce(hierarchical(2, 2), M, chain="yes")


def test_optcc_beats_ring_and_respects_bound_in_the_simulator():
    sim = pytest.importorskip("resilientcc.sim")
    from resilientcc.bounds import lower_bound
    from resilientcc.schedules.ring import ring

    topo = fail_nics(hierarchical(3, 4), 0, 2)
    size = Fraction(2**28)
    t_opt = sim.simulate(optcc(topo, size), topo).time_s
    t_ring = sim.simulate(ring(topo, size), topo).time_s
    lb = float(lower_bound(topo, size).seconds)
    assert lb <= t_opt < t_ring


def test_broadcasts_are_binomial_trees():
    """No GPU sends a chunk to more than log2(G) GPUs of its server (flat: G − 1)."""
    from collections import Counter

    topo = fail_nics(hierarchical(3, 8), 0, 4)

    def fanout(s):
        c = Counter(
            (t.src, t.chunk) for t in s.transfers if t.op == "copy" and t.src // 8 == t.dst // 8
        )
        return max(c.values())

    # 3 servers: trees by default
    assert fanout(optcc(topo, M, pieces=1, pipeline=False, hier_ring=False)) == 3
    assert fanout(optcc(topo, M, pieces=1, pipeline=False, hier_ring=False, flat_bcast=True)) == 7
    # 8 servers, coupled (1 NIC lost) and decoupled (4 lost): trees too
    for lost in (1, 4):
        big = fail_nics(hierarchical(8, 8), 0, lost)
        s = optcc(big, Fraction(2**20), pieces=1, check=False, pipeline=False, hier_ring=False)
        assert fanout(s) == 3


def _ancestors(s, tid):
    by_id = {t.id: t for t in s.transfers}
    seen, stack = set(), [tid]
    while stack:
        for d in by_id[stack.pop()].deps:
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return seen


@pytest.mark.parametrize("servers,gpus,lost", [(3, 4, 2), (4, 8, 4)])
def test_decoupled_straggler_ingress_never_waits_for_its_egress(servers, gpus, lost):
    """β ≤ β*, direct schedule: what the straggler receives never depends on what it sent."""
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    s = optcc(topo, Fraction(2**26), pieces=2, pipeline=False, hier_ring=False)
    assert s.meta_get("share_straggler") == "0"
    egress = {t.id for t in s.transfers if t.src // gpus == 0 and t.dst // gpus != 0}
    ingress = [t.id for t in s.transfers if t.dst // gpus == 0 and t.src // gpus != 0]
    assert egress and ingress
    for tid in ingress:
        assert not (_ancestors(s, tid) & egress), f"ingress transfer {tid} waits for egress"
    # coupled variant (decouple=False): results return only after the partial went out
    c = optcc(topo, Fraction(2**26), pieces=2, decouple=False, pipeline=False, hier_ring=False)
    eg_c = {t.id for t in c.transfers if t.src // gpus == 0 and t.dst // gpus != 0}
    assert any(
        _ancestors(c, t.id) & eg_c for t in c.transfers if t.dst // gpus == 0 and t.src // gpus != 0
    )


def test_decoupled_straggler_moves_exactly_the_bound_bytes():
    """The straggler sends M and receives M (the cut the bound is made of), no more."""
    topo = fail_nics(hierarchical(4, 8), 0, 4)
    s = optcc(topo, M, pieces=3, pipeline=False, hier_ring=False)
    size = {c.index: c.size for c in s.chunks}
    out = sum(size[t.chunk] for t in s.transfers if t.src // 8 == 0 and t.dst // 8 != 0)
    inn = sum(size[t.chunk] for t in s.transfers if t.dst // 8 == 0 and t.src // 8 != 0)
    assert out == 1 and inn == 1


def test_no_degraded_server_is_the_ring_above_healthy_direct_max_servers():
    """Above HEALTHY_DIRECT_MAX_SERVERS servers with no degraded server, and above
    HEALTHY_HIER_RING_MAX_BYTES, OptCC is NCCL's ring."""
    from resilientcc.schedules.optcc import HEALTHY_DIRECT_MAX_SERVERS

    assert HEALTHY_DIRECT_MAX_SERVERS > PIPELINE_MAX_SERVERS
    topo = hierarchical(HEALTHY_DIRECT_MAX_SERVERS + 1, 2)
    s = optcc(topo, M)
    r = ring(topo, M)
    assert s.name == "optcc" and s.transfers == r.transfers
    assert s.meta_get("variant").startswith("ring")
    d = optcc(topo, M, direct=True)
    assert d.transfers != r.transfers
    assert executor.execute(d).ok


@pytest.mark.parametrize(
    ("servers", "mib", "gpus"),
    [(2, 64, 8), (2, 256, 8), (3, 96, 8), (5, 128, 8), (8, 256, 8), (8, 64, 8), (8, 64, 4)],
)
def test_no_failure_not_slower_than_the_ring(servers, mib, gpus):
    """At β = 1 OptCC must not lose to NCCL's ring; with 8 MiB pieces the first five
    points did (1.102, 1.020, 1.021, 1.012, 1.020 × the ring), and with 16 MiB pieces on
    4 GPUs per server the last one did (1.066)."""
    from resilientcc.schedules.hier_pipeline import default_healthy_lanes, default_healthy_pieces
    from resilientcc.sim import simulate

    topo = hierarchical(servers, gpus)
    size = Fraction(mib * 2**20)
    s = optcc(topo, size, check=False)
    if servers == 8 and gpus == 8:  # healthy_rings: the hierarchical ring there
        assert s.meta_get("variant") == "hierarchical ring"
    else:
        assert s.meta_get("variant") == "pipelined hierarchical"
        assert s.meta_get("pieces") == str(default_healthy_pieces(size, servers, gpus))
        lanes = default_healthy_lanes(size, int(s.meta_get("pieces")), gpus)
        assert s.meta_get("nvlink_channels") == (str(lanes) if lanes > 1 else None)
    t_ring = simulate(ring(topo, size, check=False), topo).time_s
    assert simulate(s, topo).time_s <= 0.995 * t_ring


def _straggler_bytes(s, gpus: int) -> tuple[Fraction, Fraction]:
    size = {c.index: c.size for c in s.chunks}
    out = sum(size[t.chunk] for t in s.transfers if t.src // gpus == 0 and t.dst // gpus != 0)
    inn = sum(size[t.chunk] for t in s.transfers if t.dst // gpus == 0 and t.src // gpus != 0)
    return out, inn


def test_split_variant_in_the_coupled_regime():
    """9 servers, 1 of 4 NICs lost (β = 3/4 > β* = 8/15): rings on β, decoupled direct on the rest.

    Above :data:`PIPELINE_MAX_SERVERS` servers this is the default where the hierarchical
    ring does not run (``hier_ring=False`` here). The straggler moves
    2(p−1)/p · f in the rings and its tail partial (1 − f) out, the others' sum back:
    exact byte counts, and the exact executor passes (``check``).
    """
    assert PIPELINE_MAX_SERVERS < 9
    topo = fail_nics(hierarchical(9, 4), 0, 1)
    s = optcc(topo, M, pieces=2, hier_ring=False)
    f = Fraction(3, 4)
    assert s.meta_get("ring_fraction") == str(f)
    assert s.meta_get("variant") == "rings + decoupled direct"
    p = 36
    expect = Fraction(2 * (p - 1), p) * f + (1 - f)
    assert _straggler_bytes(s, 4) == (expect, expect)
    # decoupled regime (2 of 4 lost, β = ½ ≤ β*): direct only
    half = fail_nics(hierarchical(9, 4), 0, 2)
    assert optcc(half, M, pieces=2, hier_ring=False).meta_get("ring_fraction") == "0"


@pytest.mark.parametrize(
    ("servers", "gpus", "lost", "f"),
    [
        (4, 4, 1, Fraction(1, 2)),  # β = 3/4: f = 2β − 1
        (4, 8, 1, Fraction(3, 4)),  # β = 7/8
        (3, 8, 2, Fraction(1, 2)),
        (6, 8, 1, Fraction(3, 4)),  # six servers: still 2β − 1
        (7, 8, 1, Fraction(7, 8)),  # above six: β
        (4, 8, 4, Fraction(0)),  # β = ½: decoupled, direct only
        (2, 8, 1, Fraction(0)),  # one healthy server: no split
    ],
)
def test_default_ring_fraction(servers, gpus, lost, f):
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    s = optcc(topo, Fraction(2**28), check=False, pipeline=False, hier_ring=False)
    assert Fraction(s.meta_get("ring_fraction")) == f
    assert s.meta_get("variant") == ("rings + decoupled direct" if f else "direct")


@pytest.mark.parametrize("mib", [1, 64, 1024])
def test_no_split_on_servers_with_fewer_nics_than_gpus(mib):
    """8 × 8 GPUs with 4 NICs each, one NIC of server 1 at 3/4: the split's flat rings
    over 64 GPUs take 126 steps, and the direct schedule alone (its depth read from the
    time, ``pieces_bytes``) is faster at every size: measured 0.21 / 0.99 / 0.93 × the
    split's time at 1 MiB / 64 MiB / 1 GiB."""
    from resilientcc import sim

    topo = apply_fail_specs(hierarchical(8, 8, nics_per_server=4), ["1:nic0x3/4"])
    size = Fraction(mib * 2**20)
    s = optcc(topo, size, check=False)
    assert (s.meta_get("ring_fraction"), s.meta_get("variant")) == ("0", "direct")
    split = optcc(topo, size, check=False, ring_fraction=Fraction(3, 4))
    assert sim.simulate(s, topo).time_s < sim.simulate(split, topo).time_s


@pytest.mark.parametrize(("mib", "f"), [(16, Fraction(0)), (256, Fraction(7, 8))])
def test_the_split_s_rings_only_where_their_latency_pays(mib, f):
    """8 × 8 GPUs with a NIC each, one lost, the layered variants refused: the split's
    rings where their latency is at most 2.5 times their bandwidth time (``rings_pay``).
    At 16 MiB it is 7.3 and the direct schedule is faster (0.62 × the split's time); at
    256 MiB it is 0.46 and the split is faster (the direct schedule 1.39 ×)."""
    from resilientcc import sim
    from resilientcc.schedules._build import server_view
    from resilientcc.schedules.optcc import RINGS_ONE_NIC_MAX_LATENCY_RATIO, ring_latency_ratio

    topo = fail_nics(hierarchical(8, 8), 0, 1)
    size = Fraction(mib * 2**20)
    refused = {"pipeline": False, "hier_ring": False}
    s = optcc(topo, size, check=False, **refused)
    assert Fraction(s.meta_get("ring_fraction")) == f
    ratio = ring_latency_ratio(server_view(topo), size)
    assert (ratio > RINGS_ONE_NIC_MAX_LATENCY_RATIO) == (f == 0)
    other = optcc(topo, size, check=False, ring_fraction=Fraction(7, 8) if f == 0 else 0)
    assert sim.simulate(s, topo).time_s < sim.simulate(other, topo).time_s


def test_the_direct_schedule_s_depth_follows_the_time():
    """6 × 8 GPUs with one NIC per server (50 GB/s, an eighth of the 8 × 400 Gb/s the
    depths were drawn on), one NIC at half speed, 64 MiB: read at the fastest server's
    pace (:func:`pieces_bytes`) 8 × 64 MiB, 12 pieces instead of 2, 0.70 × the time; at
    the slowest server's (:func:`depth_bytes`, since 2026-11-28) 16 × 64 MiB, 20 pieces,
    0.73 × the time with 2 (and 1.04 × with 12: one of the cases the slowest pace made
    slower)."""
    from resilientcc import sim
    from resilientcc.schedules._build import server_view
    from resilientcc.schedules.optcc import depth_bytes, pieces_bytes

    topo = apply_fail_specs(hierarchical(6, 8, nics_per_server=1), ["3:nic0x1/2"])
    size = Fraction(2**26)
    assert pieces_bytes(server_view(topo), size) == 8 * size
    assert depth_bytes(server_view(topo), size) == 16 * size
    assert pieces_bytes(server_view(hierarchical(6, 8)), size) == size
    s = optcc(topo, size, check=False)
    assert (s.meta_get("variant"), default_pieces(size, 6), s.meta_get("pieces")) == (
        "direct",
        2,
        "20",
    )
    shallow = optcc(topo, size, check=False, pieces=2)
    assert sim.simulate(s, topo).time_s < 0.8 * sim.simulate(shallow, topo).time_s


def test_two_servers_the_trees_from_2_mib_read_as_a_time():
    """Two servers of 8 GPUs with one NIC each (50 GB/s), server 0 at half speed, 1 MiB:
    read at 400 GB/s that is 8 MiB, so OptCC packs trees (before: the direct schedule
    below 4 MiB), simulated 0.97 × the direct schedule's time (0.82 × while the direct
    schedule's depth was read at the fastest server's pace, :func:`depth_bytes`; now it
    runs 2 pieces, not 1). With four NICs, two lost
    on server 0, 256 KiB reads as 1 MiB: the direct schedule stays, the trees 1.04 ×
    (1.28 × before their reductions went ready first, :func:`reduce_order`)."""
    from resilientcc import sim

    slow = apply_fail_specs(hierarchical(2, 8, nics_per_server=1), ["0:x1/2"])
    wide = apply_fail_specs(hierarchical(2, 8, nics_per_server=4), ["0:nic0,nic2"])
    for topo, size, chosen, other, factor in (
        (slow, Fraction(2**20), "tree packing", {"trees": False}, 1.0),
        (wide, Fraction(2**18), "direct", {"trees": True}, 1.0),
    ):
        s = optcc(topo, size)
        assert s.meta_get("variant") == chosen
        alt = optcc(topo, size, **other)  # type: ignore[arg-type]
        assert alt.meta_get("variant") != chosen
        assert sim.simulate(s, topo).time_s < factor * sim.simulate(alt, topo).time_s


@pytest.mark.parametrize(
    ("beta", "size", "chosen", "gain", "below"),
    [
        (Fraction(1, 8), Fraction(2**18), "ring (two GPUs)", 0.92, Fraction(2**16)),
        (Fraction(1, 2), Fraction(2**24), "ring (two GPUs)", 0.9, Fraction(2**18)),
        (Fraction(3, 4), Fraction(2**22), "direct", 0.9, Fraction(2**20)),
        (Fraction(7, 8), Fraction(2**24), "direct", 0.95, Fraction(2**20)),
    ],
)
def test_two_gpus_a_ring_or_the_direct_schedule_in_place_of_the_pipeline(
    beta: Fraction, size: Fraction, chosen: str, gain: float, below: Fraction
) -> None:
    """Two servers of one GPU, server 0 at ``beta``: every schedule moves the buffer each
    way over its link, so only the fill differs. OptCC runs NCCL's ring from 8 MiB read
    at the slower GPU's pace where it has at most half the other's bandwidth, the direct
    schedule from 32 MiB where it has more, each faster than the pipelined schedule (the
    rules' choice before; 1.22 × the bound at 16 MiB whatever ``beta``) and within 2.5 %
    of the faster of the ring and the direct schedule (at 1/2 and 16 MiB the direct
    schedule is 2 % faster than the ring)."""
    from resilientcc import sim
    from resilientcc.schedules.generators import generate

    topo = scale_server_nics(hierarchical(2, 1), 0, beta)
    s = optcc(topo, size)
    assert s.meta_get("variant") == chosen
    t = sim.simulate(s, topo).time_s
    assert t < gain * sim.simulate(optcc(topo, size, pipeline=True), topo).time_s
    best = min(
        sim.simulate(generate("ring", topo, size), topo).time_s,
        sim.simulate(optcc(topo, size, direct=True), topo).time_s,
    )
    assert t <= 1.025 * best
    # below the thresholds the pipelined schedule stays (faster there from beta = 1/2)
    assert optcc(topo, below, check=False).meta_get("variant") == "pipelined hierarchical"


def test_uneven_nics_the_trees_where_the_layered_view_drops_bandwidth() -> None:
    """Three servers of two GPUs, NIC 1 of server 1 at half speed: the layered schedules
    see its NICs alike and leave NIC 1 out, a third of its bandwidth (the hierarchical
    ring 1.475 × the bound at 64 MiB); OptCC packs trees from 16 MiB to 128 MiB,
    0.72 × the ring's time. Two servers of two GPUs on a switch, one NIC at 3/4 (a
    seventh dropped): trees from 8 MiB. Eight NICs with one at half speed drop 1/15:
    three servers stay with the layered rules."""
    from resilientcc import sim
    from resilientcc.schedules.optcc import uneven_loss, uneven_trees_rule

    topo = scale_server_nics(hierarchical(3, 2), 1, Fraction(1, 2), nics=[1])
    assert uneven_loss(topo) == Fraction(1, 3)
    s, other = optcc(topo, Fraction(2**26)), optcc(topo, Fraction(2**26), trees=False)
    assert (s.meta_get("variant"), other.meta_get("variant")) == (
        "tree packing",
        "hierarchical ring",
    )
    assert sim.simulate(s, topo).time_s < 0.8 * sim.simulate(other, topo).time_s
    assert optcc(topo, Fraction(2**23), check=False).meta_get("variant") != "tree packing"
    assert uneven_trees_rule(topo, Fraction(2**28)) is None
    two = scale_server_nics(hierarchical(2, 2, fabric="switch"), 0, Fraction(3, 4), nics=[1])
    assert uneven_loss(two) == Fraction(1, 7)
    assert uneven_trees_rule(two, Fraction(2**23)) is not None
    assert uneven_trees_rule(two, Fraction(2**22)) is None
    eight = scale_server_nics(hierarchical(3, 8), 1, Fraction(1, 2), nics=[1])
    assert uneven_loss(eight) == Fraction(1, 15)
    assert uneven_trees_rule(eight, Fraction(2**26)) is None


def test_no_degraded_server_the_fallback_trees_from_the_same_time():
    """Three healthy servers of 6 GPUs with 3 NICs each (no layered schedule runs): at
    64 KiB the trees' depth costs latency and the direct schedule is 0.93 × their time
    (0.79 × before their reductions went ready first, :func:`reduce_order`; the trees
    ran at any size before); at 8 MiB (21 MiB read at 400 GB/s, above the 8 MiB of
    17–24 GPUs) the trees run, 0.74 × the direct schedule's time."""
    from resilientcc import sim

    topo = hierarchical(3, 6, nics_per_server=3)
    for size, chosen, other in (
        (Fraction(2**16), "direct", {"trees": True}),
        (Fraction(2**23), "tree packing", {"trees": False}),
    ):
        s = optcc(topo, size)
        assert s.meta_get("variant") == chosen
        alt = optcc(topo, size, **other)  # type: ignore[arg-type]
        assert alt.meta_get("variant") != chosen
        assert sim.simulate(s, topo).time_s < 0.95 * sim.simulate(alt, topo).time_s


def test_unlike_servers_the_trees_from_32_mib_on_up_to_32_gpus():
    """Three of six servers of two GPUs degraded in different ways (a switch fabric): from
    32 MiB OptCC packs trees, 0.57 × the hierarchical ring's time (the rules' choice
    without them; before, from 128 MiB only); at 16 MiB the ring stays. On 40 GPUs the
    trees wait for 128 MiB."""
    from resilientcc import sim
    from resilientcc.schedules.optcc import trees_rule

    topo = apply_fail_specs(hierarchical(6, 2, fabric="switch"), ["5:x1/2", "4:x7/8", "3:nic1"])
    s = optcc(topo, Fraction(2**25))
    ring = optcc(topo, Fraction(2**25), trees=False)
    assert (s.meta_get("variant"), ring.meta_get("variant")) == (
        "tree packing",
        "hierarchical ring",
    )
    assert sim.simulate(s, topo).time_s < 0.7 * sim.simulate(ring, topo).time_s
    assert optcc(topo, Fraction(2**24), check=False).meta_get("variant") == "hierarchical ring"
    wide = apply_fail_specs(hierarchical(5, 8), ["0:nic0", "1:nic3", "2:nic5"])
    assert trees_rule(wide, Fraction(2**26)) is None
    assert trees_rule(wide, Fraction(2**27)) is not None


def test_three_servers_or_more_the_trees_from_a_time_that_grows_with_the_gpus():
    """6 × 5 GPUs (30: the 25–40 bin, trees from 32 MiB read at 400 GB/s), two NICs each
    (100 GB/s: a MiB reads as four), one NIC at 1/8: at 1 MiB the direct schedule (the
    trees 1.14 × its time; before, the trees from 4 MiB of bytes), at 8 MiB the trees
    (0.79 ×). At 4 MiB the rule still gives the direct schedule, fitted when the trees
    took 1.05 × its time; since their reductions go ready first (:func:`reduce_order`)
    they take 0.97 ×."""
    from resilientcc import sim

    topo = apply_fail_specs(hierarchical(6, 5, nics_per_server=2), ["1:nic1x1/8"])
    assert optcc(topo, Fraction(2**22), check=False).meta_get("variant") == "direct"
    for size, chosen in ((Fraction(2**20), "direct"), (Fraction(2**23), "tree packing")):
        s = optcc(topo, size)
        other = optcc(topo, size, trees=chosen == "direct")
        assert (s.meta_get("variant"), other.meta_get("variant")) == (
            chosen,
            "tree packing" if chosen == "direct" else "direct",
        )
        assert sim.simulate(s, topo).time_s < sim.simulate(other, topo).time_s


def test_the_weighted_ring_only_where_its_latency_pays():
    """10 servers of 4 GPUs, one NIC each, one at 7/8: the weighted ring (40 GPUs, 78
    steps) from 16 MiB, the direct schedule below; at 1 MiB the direct schedule is
    simulated faster (0.28 × the ring's time), at 64 MiB the ring (the direct schedule
    1.36 ×)."""
    from resilientcc import sim
    from resilientcc.schedules.optcc import choose_variant

    topo = apply_fail_specs(hierarchical(10, 4, nics_per_server=1), ["0:x7/8"])
    small, large = Fraction(2**20), Fraction(2**26)
    assert choose_variant(topo, small).variant == "direct"
    assert choose_variant(topo, large).variant == "weighted_ring"
    for size, rule_s in ((small, "direct"), (large, "weighted ring")):
        ours = optcc(topo, size, check=False)
        assert ours.meta_get("variant") == rule_s
        asked = {"weighted_ring": True} if size == small else {"ring_fraction": 0}
        other = optcc(topo, size, check=False, **asked)
        assert sim.simulate(ours, topo).time_s < sim.simulate(other, topo).time_s


def test_no_split_when_two_servers_are_degraded():
    topo = fail_nics(fail_nics(hierarchical(4, 4), 0, 1), 1, 1)
    assert optcc(topo, Fraction(2**24), check=False).meta_get("ring_fraction") == "0"


def test_split_variant_respects_the_bound_in_the_simulator():
    from resilientcc import sim
    from resilientcc.bounds import lower_bound

    topo = fail_nics(hierarchical(7, 4), 0, 1)
    size = Fraction(2**26)
    t = sim.simulate(optcc(topo, size, pieces=2, pipeline=False, hier_ring=False), topo).time_s
    assert t >= float(lower_bound(topo, size).seconds)


@pytest.mark.parametrize("f", ["1/2", "0.25"])
def test_ring_fraction_can_be_asked_for(f):
    topo = fail_nics(hierarchical(4, 4), 0, 1)
    s = optcc(topo, Fraction(2**24), pieces=2, ring_fraction=f)
    assert Fraction(s.meta_get("ring_fraction")) == Fraction(f)


@pytest.mark.parametrize("f", ["1", "-0.5", "half"])
def test_bad_ring_fraction_is_a_schedule_error(f):
    from resilientcc.errors import ScheduleError

    with pytest.raises(ScheduleError, match="ring_fraction"):
        optcc(fail_nics(hierarchical(4, 4), 0, 1), M, ring_fraction=f)


@pytest.mark.parametrize(("servers", "lost"), [(4, 2), (7, 1)])  # direct schedule; split
@pytest.mark.parametrize("pieces", [0, -2, 1.5])
def test_bad_pieces_is_a_schedule_error(servers, lost, pieces):
    from resilientcc.errors import ScheduleError

    with pytest.raises(ScheduleError, match="pieces must be a positive integer"):
        optcc(fail_nics(hierarchical(servers, 4), 0, lost), M, pieces=pieces)


# One row per line of the "Which variant runs where" table in docs/schedules.md, at 32 MiB
# (above SMALL_HIER_RING_MAX_BYTES), then the small buffers' rows
BIG = Fraction(2**25)
MID = Fraction(2**28)
SMALL = Fraction(2**23)
VARIANT_TABLE = [
    (4, 8, "none", BIG, "pipelined hierarchical"),
    (7, 8, "none", BIG, "pipelined hierarchical"),
    (8, 8, "none", BIG, "hierarchical ring"),  # healthy_rings
    (9, 8, "none", Fraction(2**29), "hierarchical ring"),
    (21, 8, "none", Fraction(2**29), "ring (no degraded server)"),
    (9, 8, "none", Fraction(2**28), "hierarchical ring"),
    (5, 8, "0:1", BIG, "pipelined hierarchical"),
    (6, 8, "0:1", BIG, "pipelined hierarchical"),
    (7, 8, "0:1", BIG, "hierarchical ring"),
    (6, 8, "0:2", BIG, "hierarchical ring"),
    (4, 8, "0:4", BIG, "hierarchical ring"),
    (9, 8, "0:1+1:1", BIG, "hierarchical ring"),
    (6, 8, "0:1+1:1", BIG, "hierarchical ring"),  # several alike, up to 128 MiB
    (6, 8, "0:1+1:1", MID, "pipelined hierarchical"),
    (7, 8, "0:2+1:2", BIG, "hierarchical ring"),
    (4, 8, "0:4+1:4", BIG, "pipelined hierarchical"),
    (6, 8, "0:4+1:4", BIG, "hierarchical ring"),
    (8, 8, "0:4+1:4+2:4", BIG, "hierarchical ring"),
    (8, 8, "0:4+1:4+2:4", MID, "pipelined hierarchical"),
    (5, 8, "0:4+1:4+2:4", BIG, "pipelined hierarchical"),
    (16, 8, "0:4+1:4+2:4+3:4+4:4+5:4", BIG, "hierarchical ring"),
    (9, 5, "0:1", MID, "weighted ring"),
    (9, 5, "0:1", BIG, "direct"),  # the weighted ring's latency does not pay (rings_pay)
    (6, 4, "0:1", BIG, "direct"),  # fewer NICs than GPUs: the direct schedule alone
    (6, 8, "0:1", MID, "pipelined hierarchical"),
    (6, 4, "0:2", BIG, "direct"),
    # where only the direct schedule or NCCL's ring is left: the trees up to 40 GPUs
    (4, 4, "0:1", BIG, "tree packing"),
    (4, 4, "0:2", BIG, "tree packing"),
    (4, 4, "none", BIG, "tree packing"),
    (4, 8, "0:1+1:x1/2", BIG, "hierarchical ring"),
    (8, 8, "0:1+1:2+2:x1/2", BIG, "hierarchical ring"),
    (8, 8, "0:nic0+1:nic3+2:nic5", BIG, "hierarchical ring"),  # seen alike
    (8, 8, "0:1+1:2+2:x1/2", Fraction(2**30), "direct"),
    (6, 8, "0:nic0+1:nic7+2:nic2,nic3+3:x7/8", BIG, "hierarchical ring"),  # two healthy
    (6, 8, "0:nic0+1:nic7+2:nic2,nic3+3:x7/8", MID, "ordered rings"),
    (5, 8, "0:nic0+1:nic7+2:nic2,nic3+3:x7/8", BIG, "tree packing"),  # one healthy server
    (6, 8, "0:nic0+1:nic7+2:nic2,nic3+3:x7/8+4:nic5", BIG, "direct"),  # 48 GPUs
    # small buffers: the hierarchical ring wherever it can run
    (4, 8, "none", SMALL, "hierarchical ring"),
    (5, 8, "0:1", SMALL, "hierarchical ring"),
    (4, 8, "0:4+1:4", SMALL, "hierarchical ring"),
    (8, 8, "0:1+1:2+2:x1/2", SMALL, "hierarchical ring"),
    # one NIC per GPU needed, as at 32 MiB; on 32 GPUs the trees from 32 MiB read at
    # 400 GB/s (16 MiB on 4 NICs of 50 GB/s), the direct schedule below
    (4, 4, "0:2", SMALL, "direct"),
    (4, 4, "0:2", Fraction(2**24), "tree packing"),
    (4, 4, "0:2", Fraction(2**21), "direct"),
    # two servers: from 2 MiB at 400 GB/s, i.e. 256 KiB on one NIC of 50 GB/s
    (2, 1, "0:x1/2", Fraction(2**20), "tree packing"),
    (2, 4, "0:nic0,nic2", Fraction(2**18), "direct"),
    # no degraded server: the same thresholds, in place of the direct schedule or the ring
    (4, 4, "none", Fraction(2**12), "direct"),
    (4, 4, "none", Fraction(2**24), "tree packing"),
    (9, 5, "0:1", SMALL, "direct"),
]


@pytest.mark.parametrize(("servers", "nics", "fail", "size", "variant"), VARIANT_TABLE)
def test_the_documented_variant_runs_by_default(servers, nics, fail, size, variant):
    """The variant ``optcc`` picks on each kind of cluster is the one the docs' table names."""
    topo = hierarchical(servers, 8, nics_per_server=nics)
    if fail != "none":
        topo = apply_fail_specs(topo, fail.split("+"))
    assert optcc(topo, size, check=False).meta_get("variant") == variant


@pytest.mark.parametrize(("servers", "lost"), [(4, 4), (3, 2), (5, 6), (2, 2)])
def test_a_lone_healthy_server_uses_only_the_rails_alive_elsewhere(servers, lost):
    """Every server but one lost the same NICs: on a rail-only fabric the healthy one's
    NICs on those rails reach no one, so OptCC sees it with the others' alive rails and
    shares every piece equally; its byte floor is then the bound (the water-filling on
    its full bandwidth gave it 7/10 of every piece with 4 of 8 lost on 4 servers, a byte
    floor 1.6 × the bound). On a switch fabric its NICs all reach the others and it stays
    healthy, owning the larger share."""
    from resilientcc.bounds import lower_bound
    from resilientcc.sim import byte_floor

    specs = [f"{s}:{lost}" for s in range(servers - 1)]
    size = Fraction(2**24)
    topo = apply_fail_specs(hierarchical(servers, 8), specs)
    s = optcc(topo, size)
    shares = dict(x.split(":") for x in s.meta_get("shares").split(","))
    assert set(shares.values()) == {f"1/{servers}"}
    floor, link = byte_floor(s, topo)
    bound = float(lower_bound(topo, size).seconds)
    if servers > 2:
        assert floor == pytest.approx(bound, rel=1e-9)
    else:  # two servers: the bound counts NVLink and the NICs together (GPU partition)
        assert "nvswitch" in link and floor < 1.06 * bound
    switch = apply_fail_specs(hierarchical(servers, 8, fabric="switch"), specs)
    shares = dict(x.split(":") for x in optcc(switch, size).meta_get("shares").split(","))
    assert Fraction(shares[str(servers - 1)]) > Fraction(1, servers)


def test_flat_rings_benchmark_on_one_held_out_cluster(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """``benchmarks/bench_flat_rings.py`` on 7 × 8 GPUs with 4 NICs, one lost (fewer NICs
    than GPUs: no split): at 2 MiB the rings' latency is 26 times their bandwidth time and
    the direct schedule 4 × faster; at 768 MiB (ratio 0.07) 0.90 × the split's time."""
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_flat_rings.py"
    argv = [str(script), "--set", "held-out", "--clusters", "1", "--sizes", "2MiB,96MiB,768MiB"]
    monkeypatch.setattr("sys.argv", argv)
    runpy.run_path(str(script), run_name="__main__")
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| 7 x 8 GPUs")]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    assert [c[1] for c in cells] == ["2 MiB", "96 MiB", "768 MiB"]
    assert all(c[3] == "split f=3/4" for c in cells)
    assert [c[7] for c in cells] == ["direct"] * 3
    ratio, direct_over_rings = [float(c[2]) for c in cells], [float(c[6]) for c in cells]
    assert ratio[0] > 1 >= ratio[1] > ratio[2]
    assert direct_over_rings[0] < 0.5 and direct_over_rings[2] < 1


@pytest.mark.parametrize(("mib", "variant"), [(16, "direct"), (256, "ring (no degraded server)")])
def test_no_degraded_server_the_ring_only_where_its_latency_pays(mib, variant):
    """8 × 8 GPUs with 4 NICs each and no failure (no layered schedule, above 40 GPUs):
    NCCL's ring over 64 GPUs only where its latency pays; at 16 MiB (ratio 3.66) the
    direct schedule, measured 0.43 × the ring's time; at 256 MiB (0.23) the ring (the
    direct schedule 1.03 ×)."""
    from resilientcc import sim

    topo = hierarchical(8, 8, nics_per_server=4)
    size = Fraction(mib * 2**20)
    s = optcc(topo, size, check=False)
    assert s.meta_get("variant") == variant
    other = optcc(topo, size, check=False, direct=True) if mib == 256 else ring(topo, size)
    assert sim.simulate(s, topo).time_s < sim.simulate(other, topo).time_s


def test_the_direct_schedules_depth_at_the_slowest_servers_pace():
    """5 × 6 GPUs of one NIC (switch fabric), server 1's NIC at 3/4, server 4 at 1/8, 1 MiB
    (the audit's seed 301): read at the slowest server's pace 1 MiB is 64 MiB, six
    pieces, where the fastest server's pace gave one. Server 4's sends and its results'
    returns then overlap: 1.56 × the bound against 2.40 × in one piece."""
    from resilientcc import sim
    from resilientcc.bounds import lower_bound
    from resilientcc.schedules.optcc import depth_bytes, optcc_view, pieces_bytes

    topo = apply_fail_specs(
        hierarchical(5, 6, nics_per_server=1, fabric="switch"), ["1:nic0x3/4", "4:x1/8"]
    )
    size = Fraction(2**20)
    view = optcc_view(topo, size)
    assert (pieces_bytes(view, size), depth_bytes(view, size)) == (8 * size, 64 * size)
    s = optcc(topo, size)
    assert (s.meta_get("variant"), s.meta_get("pieces")) == ("direct", "6")
    one = optcc(topo, size, pieces=1, check=False)
    bound = float(lower_bound(topo, size).seconds)
    assert sim.simulate(s, topo).time_s < 1.6 * bound < 0.7 * sim.simulate(one, topo).time_s
