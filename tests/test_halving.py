"""Recursive halving and doubling between servers (``network="halving"``) and OptCC's
cut-down defaults for large clusters."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hier_pipeline import _net_bytes  # tests/ is on sys.path (pytest's rootdir)

import resilientcc.schedules.optcc as optcc_module
from resilientcc.bounds import lower_bound
from resilientcc.errors import ScheduleError
from resilientcc.schedules import executor
from resilientcc.schedules._build import Builder, halving_splits, server_view
from resilientcc.schedules.hier_ring import DIRECT, HALVING, RING, hier_ring, ring_steps
from resilientcc.schedules.ir import COPY, REDUCE
from resilientcc.schedules.optcc import optcc
from resilientcc.sim import simulate
from resilientcc.topology import fail_nics, hierarchical
from resilientcc.verify import PROVED, verify

M = Fraction(2**24)


def _halving_allreduce(n: int, per: int, ring: list[int]):
    b = Builder("hd", n)
    groups = [[b.chunk(Fraction(1, n * per)) for _ in range(per)] for _ in range(n)]
    b.halving_pass(ring, groups, 0, REDUCE, release=0.0, level_release=1.0)
    b.halving_pass(ring, groups, 1, COPY, release=10.0, level_release=1.0)
    return b.build(Fraction(n * per), topology=None, check=False)


@pytest.mark.parametrize("n", range(2, 10))
def test_splits_halve_every_range(n: int) -> None:
    """Each level cuts every range of two or more positions into halves that differ by at
    most one, the first no smaller; ``⌈log2 n⌉`` levels end with single positions."""
    levels = halving_splits(n)
    assert len(levels) == (n - 1).bit_length()
    ranges = [range(n)]
    for lv in levels:
        assert [r for r in ranges if len(r) >= 2] == [range(a.start, b.stop) for a, b in lv]
        assert all(len(a) - len(b) in (0, 1) and a.stop == b.start for a, b in lv)
        ranges = [half for pair in lv for half in pair]
    assert all(len(r) == 1 for r in ranges)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 40), per=st.integers(1, 2), data=st.data())
def test_halving_is_an_allreduce_with_a_rings_bytes(n: int, per: int, data) -> None:
    """Reduce-scatter then all-gather is an AllReduce (the exact executor) over any ranks
    in any order, in ``⌈log2 n⌉`` steps per pass. Every rank sends exactly ``n − 1``
    groups in the reduce-scatter and receives ``n − 1`` in the all-gather, a ring's
    bytes; the other direction is off by at most one group per level (odd splits), and
    exact when ``n`` is a power of two."""
    ring = data.draw(st.permutations(list(range(n))), label="ring")
    sched = _halving_allreduce(n, per, ring)
    executor.check(sched)
    size = {c.index: c.size for c in sched.chunks}
    levels = (n - 1).bit_length()
    for op in (REDUCE, COPY):
        sent: Counter = Counter()
        got: Counter = Counter()
        for t in sched.transfers:
            if t.op == op:
                moved = sum(size[c] for c in t.chunk_ids) * n
                sent[t.src] += moved
                got[t.dst] += moved
        exact, loose = (sent, got) if op == REDUCE else (got, sent)
        assert set(exact.values()) == {n - 1}
        assert sum(loose.values()) == n * (n - 1)
        assert max(loose.values()) <= n - 1 + levels
        if n & (n - 1) == 0:
            assert set(loose.values()) == {n - 1}
    # the longest chain of transfers within one pass: one per level, plus one where an
    # odd split's extra rank and a partner both write a group
    depth: dict[int, int] = {}
    for t in sched.transfers:  # ids are a topological order
        depth[t.id] = 1 + max((depth[d] for d in t.deps if sched.by_id[d].op == t.op), default=0)
    chain = max(d for t, d in depth.items() if sched.by_id[t].op == REDUCE)
    assert levels <= chain <= 2 * levels


def test_halving_grows_as_n_log_n() -> None:
    """The transfers grow as ``n log n`` (at most two per rank and level and pass with
    one chunk per group), a ring's as ``n²``: 127 ranks, 2,004 against 32,004."""
    for n in (16, 31, 64, 127):
        levels = (n - 1).bit_length()
        count = len(_halving_allreduce(n, 1, list(range(n))).transfers)
        assert count <= 2 * 2 * n * levels
        assert count < 2 * n * (n - 1)  # the ring's
    assert len(_halving_allreduce(127, 1, list(range(127))).transfers) == 2004


def test_executor_rejects_a_missing_exchange() -> None:
    """The check above can fail: without the extra rank's partial of a group sent to
    that group's owner in an odd split, a contribution is lost."""
    n = 5
    b = Builder("hd", n)
    groups = [[b.chunk(Fraction(1, n))] for _ in range(n)]
    b.halving_pass(list(range(n)), groups, 0, REDUCE)
    b.halving_pass(list(range(n)), groups, 1, COPY)
    sched = b.build(Fraction(n), topology=None, check=False)
    executor.check(sched)
    # rank 2 is the first split's extra rank ([0, 1, 2] against [3, 4]): drop its
    # partial of group 3 sent to rank 3
    doomed = next(t for t in sched.transfers if (t.src, t.dst, t.op) == (2, 3, REDUCE))
    broken = replace(sched, transfers=tuple(t for t in sched.transfers if t.id != doomed.id))
    with pytest.raises(ScheduleError):
        executor.check(broken)


def test_ring_steps_read_the_halving_levels() -> None:
    """The order the NVLink passes follow with halving: a position first sends the other
    half's groups at level 0, then the other quarter's; the all-gather brings them back in
    reverse."""
    need = ring_steps(4, False, REDUCE, HALVING)
    arrive = ring_steps(4, False, COPY, HALVING)
    assert [need[(0, q)] for q in range(4)] == [4, 1, 0, 0]
    assert [arrive[(0, q)] for q in range(4)] == [-1, 0, 1, 1]


def _build(topo, pieces: int, **kw):
    b = Builder("hr", topo.num_ranks)
    hier_ring(b, server_view(topo), pieces, M, **kw)
    return b.build(M, topology=topo.shape_fingerprint, check=False)


@settings(max_examples=12, deadline=None)
@given(
    servers=st.integers(3, 7),
    gpus=st.sampled_from([2, 4, 8]),
    data=st.data(),
    pieces=st.integers(1, 3),
    merge=st.sampled_from([1, 3, 64]),
    flat_last=st.sampled_from([None, 0]),
)
def test_hier_ring_with_halving_is_an_allreduce(
    servers: int, gpus: int, data, pieces: int, merge: int, flat_last: int | None
) -> None:
    """The hierarchical ring with halving between the healthy servers is an AllReduce
    for any failure of one server, sliver or none, NVLink shards merged or not."""
    lost = data.draw(st.integers(0, gpus - 1), label="lost")
    topo = hierarchical(servers, gpus)
    if lost:
        topo = fail_nics(topo, data.draw(st.integers(0, servers - 1), label="straggler"), lost)
    sched = _build(topo, pieces, network=HALVING, merge=merge, flat_last=flat_last)
    executor.check(sched)
    assert all(d < t.id for t in sched.transfers for d in t.deps)


@settings(max_examples=12, deadline=None)
@given(
    servers=st.integers(3, 6),
    gpus=st.sampled_from([2, 3, 4, 6, 8]),
    network=st.sampled_from([RING, HALVING]),
    pieces=st.integers(1, 3),
    data=st.data(),
)
def test_hier_ring_with_nvlink_halving_is_an_allreduce(
    servers: int, gpus: int, network: str, pieces: int, data
) -> None:
    """With recursive halving for the reduce-scatters inside the servers (any number of
    GPUs, a power of two or not) the hierarchical ring is still an AllReduce, around any
    failure of one server, with either network."""
    lost = data.draw(st.integers(0, gpus - 1), label="lost")
    topo = hierarchical(servers, gpus)
    if lost:
        topo = fail_nics(topo, data.draw(st.integers(0, servers - 1), label="straggler"), lost)
    sched = _build(topo, pieces, network=network, nvlink_rs=HALVING)
    executor.check(sched)
    assert all(d < t.id for t in sched.transfers for d in t.deps)


def _nvlink_sent(sched, gpus: int) -> Counter[int]:
    """Bytes (fractions of the buffer) each rank sends to GPUs of its own server."""
    out: Counter[int] = Counter()
    for t in sched.transfers:
        if t.src // gpus == t.dst // gpus:
            out[t.src] += sum(sched.chunks[c].size for c in t.chunk_ids)
    return out


def test_nvlink_halving_moves_a_rings_bytes_in_fewer_hops() -> None:
    """On 8 GPUs a server's halving reduce-scatter moves what its ring does (a power of
    two: no odd split), so every GPU sends the same NVLink bytes either way; it takes 3
    NVLink steps where the ring takes 7."""
    topo = fail_nics(hierarchical(4, 8), 0, 4)
    ring = _build(topo, 2, nvlink_rs=RING)
    halved = _build(topo, 2, nvlink_rs=HALVING)
    assert _nvlink_sent(ring, 8) == _nvlink_sent(halved, 8)

    def depth(sched) -> int:  # the longest chain of NVLink reduces
        by = {t.id: t for t in sched.transfers}
        memo: dict[int, int] = {}
        for t in sched.transfers:  # ids follow deps
            local = t.src // 8 == t.dst // 8 and t.op == REDUCE and t.channel == 0
            memo[t.id] = max((memo[d] for d in t.deps if d in by), default=0) + local
        return max(memo.values())

    assert depth(halved) < depth(ring)


def test_small_buffers_take_fewer_steps() -> None:
    """Small buffers: OptCC's hierarchical ring crosses the network in one hop each way
    where the senders fit on the owner's GPUs, reduces inside the servers by halving,
    and the straggler owns no sliver; on 8 × 8 GPUs with one NIC lost that is well
    over twice as fast at 4 MiB as the rings (simulated), and at 64 MiB none of it."""
    topo = fail_nics(hierarchical(8, 8), 0, 1)
    small = optcc(topo, Fraction(2**22))
    assert (small.meta_get("network"), small.meta_get("nvlink_rs")) == (DIRECT, HALVING)
    assert small.meta_get("share_straggler") == "0"
    rings = optcc(topo, Fraction(2**22), network=RING, nvlink_rs=RING)
    assert rings.meta_get("nvlink_rs") is None and rings.meta_get("share_straggler") != "0"
    assert simulate(small, topo).time_s < 0.5 * simulate(rings, topo).time_s
    large = optcc(topo, Fraction(2**26), check=False)
    assert (large.meta_get("network"), large.meta_get("nvlink_rs")) == (RING, None)
    # the straggler's all-gathers are flat in every piece with the direct pass: the
    # option has nothing to say there, and the schedule records it only on the rings
    assert small.meta_get("straggler_two_way") is None
    assert rings.meta_get("straggler_two_way") == "1" == large.meta_get("straggler_two_way")
    same = optcc(topo, Fraction(2**22), straggler_two_way=False)
    assert same.transfers == small.transfers


def test_small_buffers_take_the_hierarchical_ring_wherever_it_runs() -> None:
    """Up to ``SMALL_HIER_RING_MAX_BYTES`` OptCC runs the hierarchical ring where it
    would otherwise run its pipelined schedule (4 × 8 GPUs, no failure or one NIC lost)
    or NCCL's ring (16 × 8, no failure), and is faster for it."""
    for topo, size, before in (
        (hierarchical(4, 8), Fraction(2**22), "pipelined hierarchical"),
        (fail_nics(hierarchical(4, 8), 0, 1), Fraction(2**22), "pipelined hierarchical"),
        (hierarchical(16, 8), Fraction(2**22), "ring (no degraded server)"),
    ):
        small = optcc(topo, size)
        assert small.meta_get("variant") == "hierarchical ring"
        other = optcc(topo, size, hier_ring=False)
        assert other.meta_get("variant") == before
        assert simulate(small, topo).time_s < 0.85 * simulate(other, topo).time_s


@settings(max_examples=15, deadline=None)
@given(
    servers=st.integers(3, 7),
    gpus=st.sampled_from([2, 3, 4, 8]),
    pieces=st.integers(1, 3),
    data=st.data(),
)
def test_hier_ring_with_direct_network_is_an_allreduce(
    servers: int, gpus: int, pieces: int, data
) -> None:
    """The direct network pass is an AllReduce around any failure of one or two servers,
    with a sliver or none, also where the senders outnumber the owner's other GPUs (2
    or 3 GPUs per server: later senders add into earlier copies)."""
    _check_drawn(data, servers, gpus, pieces, network=DIRECT)


def _check_drawn(data, servers: int, gpus: int, pieces: int, **kw) -> None:
    """Build the hierarchical ring (options ``kw``) on a drawn cluster, one or two of its
    servers losing NICs, a sliver or none, and check it with the exact executor (and that
    deps point back); skips clusters with fewer than two healthy servers, and a sliver the
    failure pattern cannot take."""
    topo = hierarchical(servers, gpus)
    for s in data.draw(st.sets(st.integers(0, servers - 1), max_size=2), label="degraded"):
        topo = fail_nics(topo, s, data.draw(st.integers(0, gpus - 1), label="lost"))
    if sum(sv.healthy for sv in server_view(topo)) < 2:
        return
    sliver = data.draw(st.sampled_from([None, Fraction(0)]), label="sliver")
    try:
        sched = _build(topo, pieces, sliver=sliver, **kw)
    except ScheduleError as e:
        assert "sliver" in str(e)
        return
    executor.check(sched)
    assert all(d < t.id for t in sched.transfers for d in t.deps)


def test_healthy_clusters_cross_the_network_directly() -> None:
    """No degraded server, 9 to 20 servers: above 256 MiB OptCC runs the hierarchical
    ring with the direct network pass instead of NCCL's ring, and is faster for it (10 ×
    4 GPUs, 512 MiB: 4.89 against 5.26 ms simulated); up to 256 MiB the direct pass
    replaces the rings from 12 servers on; 8 servers keep the pipelined schedule."""
    from resilientcc.schedules.optcc import healthy_network

    topo = hierarchical(10, 4)
    size = Fraction(2**29)
    s = optcc(topo, size, check=False)
    assert (s.meta_get("variant"), s.meta_get("network")) == ("hierarchical ring", DIRECT)
    nccl = optcc(topo, size, check=False, hier_ring=False)
    assert nccl.meta_get("variant") == "ring (no degraded server)"
    bound = float(lower_bound(topo, size).seconds)
    assert bound <= simulate(s, topo).time_s < 0.95 * simulate(nccl, topo).time_s
    executor.check(optcc(topo, Fraction(2**24), hier_ring=True, network=DIRECT, pieces=2))
    view = server_view(hierarchical(10, 8))
    assert healthy_network(view, Fraction(2**28)) is None  # 10 servers: rings up to 256 MiB
    # (but not with fewer GPUs per server, where the rings were slower than NCCL's ring)
    assert healthy_network(server_view(hierarchical(10, 2)), Fraction(2**26)) == DIRECT
    assert healthy_network(server_view(hierarchical(12, 8)), Fraction(2**28)) == DIRECT
    assert healthy_network(server_view(fail_nics(hierarchical(12, 8), 0, 1)), M) is None
    assert healthy_network(server_view(hierarchical(8, 8)), Fraction(2**30)) is None


@settings(max_examples=15, deadline=None)
@given(
    servers=st.integers(3, 7),
    gpus=st.sampled_from([2, 3, 4, 8]),
    pieces=st.integers(1, 4),
    first=st.integers(1, 3),
    data=st.data(),
)
def test_direct_first_pieces_make_an_allreduce(
    servers: int, gpus: int, pieces: int, first: int, data
) -> None:
    """The first pieces by the direct pass and the rest by rings (``direct_first``, as
    many as the pieces or more too) is an AllReduce around any failure of one or two
    servers, with a sliver or none."""
    _check_drawn(data, servers, gpus, pieces, network=RING, direct_first=first)


def test_direct_first_pieces_are_proved_and_shorten_the_head() -> None:
    """Z3 proves the hierarchical ring with its first piece direct (5 × 4 GPUs, 1 NIC
    lost); on 12 × 8 GPUs with half a server's NICs lost, 256 MiB, OptCC's default runs
    its first 8 pieces direct and is faster for it than with rings only (1512 against
    1539 µs simulated), because the straggler's first results come back sooner."""
    topo = fail_nics(hierarchical(5, 4), 0, 1)
    s = optcc(topo, Fraction(2**22), network=RING, nvlink_rs=RING, direct_first=1, pieces=2)
    assert s.meta_get("direct_first") == "1"
    r = verify(s)
    assert r.verdict == PROVED, str(r)
    big = fail_nics(hierarchical(12, 8), 0, 4)
    size = Fraction(2**28)
    default = optcc(big, size, check=False)
    rings = optcc(big, size, check=False, direct_first=0)
    assert default.meta_get("direct_first") == "8" and rings.meta_get("direct_first") is None
    assert simulate(default, big).time_s < 0.99 * simulate(rings, big).time_s


@pytest.mark.parametrize(("servers", "gpus", "lost"), [(4, 4, 2), (5, 2, 1), (6, 4, 0)])
def test_hier_ring_with_direct_network_is_proved(servers: int, gpus: int, lost: int) -> None:
    """Z3 proves the direct network pass lossless, race-free and deadlock-free (with 2
    GPUs per server the owner's adds are ordered one after another)."""
    topo = hierarchical(servers, gpus)
    if lost:
        topo = fail_nics(topo, 0, lost)
    s = optcc(topo, Fraction(2**20), hier_ring=True, pieces=2, network=DIRECT)
    assert s.meta_get("network") == DIRECT
    r = verify(s)
    assert r.verdict == PROVED, str(r)


@pytest.mark.parametrize(("servers", "gpus", "lost"), [(4, 4, 2), (6, 8, 4), (7, 4, 1)])
def test_halving_moves_the_rings_bytes_on_every_nic(servers: int, gpus: int, lost: int) -> None:
    """The straggler's NICs move what they do with rings (only the paths between the
    healthy servers change), and the healthy ones as much in all (each one up to a
    group per odd split more or less, :func:`test_halving_is_an_allreduce_with_a_rings_bytes`)."""
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    for tally_ring, tally_halving in zip(
        _net_bytes(_build(topo, 2, network=RING, bidirectional=False), gpus),
        _net_bytes(_build(topo, 2, network=HALVING), gpus),
        strict=True,
    ):
        assert sum(tally_ring.values()) == sum(tally_halving.values())
        assert {k: v for k, v in tally_ring.items() if k[0] == 0} == {
            k: v for k, v in tally_halving.items() if k[0] == 0
        }


@pytest.mark.parametrize(("servers", "gpus", "lost"), [(4, 4, 2), (5, 4, 1), (3, 8, 4)])
def test_hier_ring_with_halving_is_proved(servers: int, gpus: int, lost: int) -> None:
    """Z3 proves it lossless, race-free and deadlock-free (connections FIFO in id order)."""
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    s = optcc(topo, Fraction(2**20), hier_ring=True, pieces=2, network=HALVING)
    assert s.meta_get("network") == HALVING
    r = verify(s)
    assert r.verdict == PROVED, str(r)


def test_large_clusters_get_cut_down_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """From ``SCALED_MIN_SERVERS`` servers on the hierarchical ring runs
    ``SCALED_PIECES`` pieces with whole NVLink runs and no flat tail, and from
    ``HALVING_MIN_SERVERS`` on ``HALVING_PIECES`` with halving (the thresholds lowered here so that small
    clusters show it): fewer transfers than unmerged at the same depth, still an
    AllReduce."""
    topo = fail_nics(hierarchical(6, 4), 0, 2)
    M = Fraction(2**26)  # above the small buffers' thresholds
    full = optcc(topo, M, check=False)
    assert full.meta_get("network") == RING and full.meta_get("nvlink_merge") == "1"
    monkeypatch.setattr(optcc_module, "SCALED_MIN_SERVERS", 6)
    monkeypatch.setattr(optcc_module, "HALVING_MIN_SERVERS", 7)
    cut = optcc(topo, M)  # checked by the exact executor
    assert cut.meta_get("pieces") == str(optcc_module.SCALED_PIECES)
    assert (cut.meta_get("network"), cut.meta_get("nvlink_merge")) == (RING, "6")
    assert cut.meta_get("flat_tail") is None
    unmerged = optcc(topo, M, check=False, nvlink_merge=1)
    assert unmerged.meta_get("pieces") == cut.meta_get("pieces")
    assert len(cut.transfers) < len(unmerged.transfers)
    monkeypatch.setattr(optcc_module, "HALVING_MIN_SERVERS", 6)
    halved = optcc(topo, M)
    assert halved.meta_get("network") == HALVING
    assert halved.meta_get("pieces") == str(optcc_module.HALVING_PIECES)
    assert optcc(topo, M, network=RING).meta_get("network") == RING


def test_bad_network_options_are_refused() -> None:
    topo = fail_nics(hierarchical(4, 4), 0, 2)
    with pytest.raises(ScheduleError, match="network must be one of ring, halving"):
        optcc(topo, M, network="tree")
    with pytest.raises(ScheduleError, match="network must be one of ring, halving, direct"):
        optcc(topo, M, network="tree")
    with pytest.raises(ScheduleError, match="nvlink_rs must be one of ring, halving, got"):
        optcc(topo, M, nvlink_rs="direct")
    with pytest.raises(ScheduleError, match="direct network runs one way"):
        _build(hierarchical(9, 4), 1, network=DIRECT, bidirectional=True)
    with pytest.raises(ScheduleError, match="nvlink_merge must be a positive integer"):
        optcc(topo, M, nvlink_merge=0)
    with pytest.raises(ScheduleError, match="halving network runs one way"):
        _build(hierarchical(9, 4), 1, network=HALVING, bidirectional=True)
    with pytest.raises(ScheduleError, match="direct_first must be"):
        optcc(topo, M, direct_first=-1)


def test_small_buffer_benchmark_prints_its_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``benchmarks/bench_small.py`` runs (one small row): the default beats what ran
    before, the pipelined schedule on 4 × 8 GPUs with one NIC lost."""
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_small.py"
    monkeypatch.setattr("sys.argv", [str(script), "--sizes", "1MiB", "--clusters", "4/0:1"])
    runpy.run_path(str(script), run_name="__main__")
    rows = [r.split() for r in capsys.readouterr().out.splitlines()[1:]]
    assert len(rows) == 1 and rows[0][:2] == ["4/0:1", "1MiB"]
    default, before, ratio = (float(x) for x in rows[0][2:5])
    assert default < before and ratio == pytest.approx(default / before, abs=1e-3)
    assert rows[0][-2:] == ["large-buffer", "variant"]
