"""The hierarchical ring: an exact AllReduce, the decoupled straggler's bytes, OptCC's choice."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optcc_checks import (  # tests/ is on sys.path
    assert_optcc_near_bound,
    assert_own_results_lagged,
    fan_out,
)
from test_hier_pipeline import _net_bytes  # tests/ is on sys.path (pytest's rootdir)

from resilientcc.bounds import lower_bound
from resilientcc.errors import ScheduleError
from resilientcc.schedules import executor
from resilientcc.schedules._build import Builder, server_view
from resilientcc.schedules.balance import balance
from resilientcc.schedules.hier_pipeline import nvlink_rings
from resilientcc.schedules.hier_ring import (
    DEFAULT_SPACING,
    EGRESS_WINDOW_BYTES,
    FLAT_TAIL_BYTES,
    MAX_RING_PIECE_BYTES,
    RING,
    STAGE_CHANNEL,
    TWO_WAY_MIN_GPUS,
    TWO_WAY_MIN_HEALTHY,
    TWO_WAY_SPACING,
    dealt_evenly,
    default_bidirectional,
    default_egress_window,
    default_flat_tail,
    default_ring_pieces,
    default_sliver,
    hier_ring,
    hier_ring_blocker,
    hier_ring_classes,
    ring_steps,
    staging_gpu,
    unlike_classes,
    unlike_crossed,
    unlike_sizes,
    unlike_splits,
)
from resilientcc.schedules.ir import COPY, REDUCE
from resilientcc.schedules.optcc import PIPELINE_MAX_SERVERS, SLIVER_MIN_SERVERS, optcc
from resilientcc.schedules.r2cc import r2cc_allreduce
from resilientcc.sim import byte_floor, simulate
from resilientcc.topology import (
    apply_fail_specs,
    degrade_link,
    fail_nics,
    hierarchical,
    scale_server_nics,
    switch_model,
)
from resilientcc.verify import PROVED, verify

M = Fraction(2**30)


def _build(
    topo,
    pieces: int,
    window: int = 0,
    *,
    check: bool = True,
    two_way=None,
    flat_last=None,
    sliver=None,
):
    b = Builder("hr", topo.num_ranks)
    hier_ring(
        b,
        server_view(topo),
        pieces,
        M,
        net_window=window,
        bidirectional=two_way,
        flat_last=flat_last,
        sliver=sliver,
    )
    return b.build(M, topology=topo.shape_fingerprint, check=check)


@settings(max_examples=15, deadline=None)
@given(
    servers=st.integers(3, 5),
    gpus=st.sampled_from([2, 4, 8]),
    data=st.data(),
    pieces=st.integers(1, 3),
    window=st.integers(0, 2),
    two_way=st.sampled_from([None, True, False]),
    flat_last=st.sampled_from([None, 0, 3]),
)
def test_is_an_allreduce(
    servers: int,
    gpus: int,
    data,
    pieces: int,
    window: int,
    two_way: bool | None,
    flat_last: int | None,
) -> None:
    """Every rank ends with every contribution exactly once (the exact executor), any
    failure of one server or of several alike, rings one way or both, all-gathers in
    rings or flat."""
    lost = data.draw(st.integers(0, gpus - 1), label="lost")
    slow = data.draw(
        st.sets(st.integers(0, servers - 1), min_size=1, max_size=servers - 2), label="degraded"
    )
    topo = hierarchical(servers, gpus)
    if lost:
        for straggler in sorted(slow):
            topo = fail_nics(topo, straggler, lost)
    sched = _build(topo, pieces, window, check=False, two_way=two_way, flat_last=flat_last)
    executor.check(sched)


def _owner_offsets(sched, gpus: int, d: int, owners: list[int], op: str, channel: int):
    """Per healthy server: the owner offsets ``(owner − server) mod N_h`` of the shards its
    NVLink pass on ``channel`` moves, in id order (each shard once)."""
    # every owner returns its shards to the straggler: that names each shard's owner
    owner_of = {
        t.chunk: t.src // gpus
        for t in sched.transfers
        if t.op == COPY and t.dst // gpus == d and t.src // gpus != d
    }
    pos = {s: x for x, s in enumerate(owners)}
    out = {}
    for s in owners:
        seq: list[int] = []
        for t in sched.transfers:
            local = t.src // gpus == s == t.dst // gpus
            if local and t.op == op and t.channel == channel and t.chunk in owner_of:
                off = (pos[owner_of[t.chunk]] - pos[s]) % len(owners)
                if t.chunk not in {c for c, _ in seq}:
                    seq.append((t.chunk, off))
        out[s] = [off for _, off in seq]
    return out


@pytest.mark.parametrize("two_way", [False, True])
def test_shards_move_in_ring_order(two_way: bool) -> None:
    """Each healthy server's NVLink reduce-scatter moves the shards in the order its
    network ring sends them, its all-gather in the order they arrive: the same sequence
    relative to the server on every healthy server (without the ordering, owner 1's shard
    came first everywhere, so the NVLink all-gather of the server farthest from owner 1
    waited for the ring's last hop). 1 GiB, 1 NIC lost: 16 servers 5.299 → 5.287 ms, 2
    lost 5.411 → 5.392; 8 servers, 2 lost, 5.145 → 5.135."""
    topo = fail_nics(hierarchical(6, 4), 0, 1)
    owners = [1, 2, 3, 4, 5]
    no = len(owners)
    need, arrive = ring_steps(no, two_way, REDUCE), ring_steps(no, two_way, COPY)
    for ordered in (True, False):
        b = Builder("hr", topo.num_ranks)
        hier_ring(b, server_view(topo), 1, M, bidirectional=two_way, sliver=0, shard_order=ordered)
        sched = b.build(M, topology=topo.shape_fingerprint)
        rs = _owner_offsets(sched, 4, 0, owners, REDUCE, 0)
        ag = _owner_offsets(sched, 4, 0, owners, COPY, 1)
        same = all(rs[s] == rs[1] and ag[s] == ag[1] for s in owners)
        assert same == ordered
        if ordered:  # what the network ring sends first (step 0), what is there first
            assert need[(0, rs[1][0])] == 0
            assert arrive[(0, ag[1][0])] == -1


def _gather_sources(sched, gpus: int, pieces: int) -> list[set[int]]:
    """For each piece: how many GPUs of its server each chunk's NVLink copies come from."""
    per_piece = len(sched.chunks) // pieces
    out: list[set[int]] = [set() for _ in range(pieces)]
    srcs: dict[tuple[int, int], set[int]] = {}
    for t in sched.transfers:
        if t.op == COPY and t.src // gpus == t.dst // gpus:
            srcs.setdefault((t.src // gpus, t.chunk), set()).add(t.src)
    for (_, c), ranks in srcs.items():
        out[c // per_piece].add(len(ranks))
    return out


def test_flat_tail_gathers_in_one_hop() -> None:
    """The last pieces' NVLink all-gather is flat on the healthy servers (each chunk
    copied by its holder alone) and a ring elsewhere (each chunk forwarded by G − 1 GPUs;
    the straggler, whose few holders would each send G − 1 copies, keeps its ring, both
    ways: the holder and one forwarder on 4 GPUs);
    faster at the end (4 × 8 GPUs, half lost, 16 MiB: 218.7 → 211.2 µs; 238.7 → 222.2
    before the straggler's partials were staged), with the network all-gathers one way
    (with the last pieces' both ways, ``two_way_last``, the two gain the same at this
    size: 217.5 µs with neither, 196.8 with the flat tail, 196.5 with both ways, 196.8
    with both)."""
    topo = fail_nics(hierarchical(4, 4), 0, 2)
    sched = _build(topo, 5, flat_last=2)
    assert _gather_sources(sched, 4, 5) == [{2, 3}, {2, 3}, {2, 3}, {1, 2}, {1, 2}]
    assert _gather_sources(_build(topo, 5, flat_last=0), 4, 5) == [{2, 3}] * 5
    big = fail_nics(hierarchical(4, 8), 0, 4)
    size = Fraction(2**24)
    times = []
    for flat in (0, None):
        b = Builder("hr", big.num_ranks)
        pieces = default_ring_pieces(size, 4)
        hier_ring(b, server_view(big), pieces, size, flat_last=flat, two_way_last=0)
        times.append(simulate(b.build(size, topology=big.shape_fingerprint), big).time_s)
    assert times[1] < 0.98 * times[0]


def test_flat_copies_wait_for_the_last_ring_all_gather() -> None:
    """Each healthy holder's flat copies wait for its sends of the last ring all-gather over
    NVLink (``flat_gate``), and are queued behind them on their shared connection: 4 × 8
    GPUs, half the NICs lost, 24 pieces of 1 MiB, with the copies released at their own
    piece's time the ring's last steps came after them and Z3 found the deadlock. Ungated,
    the flat copies took the holders' NVLink ports from the ring all-gathers ahead of
    them (1 GiB, 8 servers, 1 / 2 NICs lost: 4.986 / 5.135 → 4.950 / 5.085 ms gated)."""
    topo = fail_nics(hierarchical(4, 8), 0, 4)
    size, pieces, flat = Fraction(24 * 2**20), 24, 4
    scheds = {}
    for gate in (True, False):
        b = Builder("hr", topo.num_ranks)
        hier_ring(b, server_view(topo), pieces, size, flat_last=flat, flat_gate=gate)
        scheds[gate] = b.build(size, topology=topo.shape_fingerprint)
    per_piece = len(scheds[True].chunks) // pieces
    for gate, sched in scheds.items():
        gathers = [
            t
            for t in sched.transfers
            if t.op == COPY and t.channel == 1 and t.src // 8 == t.dst // 8 != 0
        ]
        ring = {}  # each rank's sends of the last ring all-gather
        for t in gathers:
            if t.chunk // per_piece == pieces - flat - 1:
                ring.setdefault(t.src, []).append(t)
        flats = [t for t in gathers if t.chunk // per_piece >= pieces - flat]
        assert flats and set(ring) == {t.src for t in flats} and len(ring) == 24
        assert gate == all({r.id for r in ring[t.src]} <= set(t.deps) for t in flats)
        if gate:  # queued after them where they share a connection
            assert all(r.id < t.id for t in flats for r in ring[t.src] if r.dst == t.dst)
    r = verify(scheds[True])
    assert r.verdict == PROVED, str(r)


def test_staged_partials_fold_in_after_the_ring() -> None:
    """The straggler's partials land as copies on :func:`staging_gpu` next to their owner,
    and each is folded into the owner over NVLink after the network ring's last step
    into it (so neither waits for the other to be written first); staged, 3 × 4 GPUs with
    2 NICs lost, 16 MiB in 8 pieces, is faster than with the partials written into the
    owners first (278 → 259 µs; threshold below)."""
    topo = fail_nics(hierarchical(3, 4), 0, 2)
    size = Fraction(2**24)
    servers = server_view(topo)
    rings = nvlink_rings(servers)
    scheds, times = [], []
    for stage in (True, False):
        b = Builder("hr", topo.num_ranks)
        hier_ring(b, servers, 8, size, stage=stage)
        scheds.append(b.build(size, topology=topo.shape_fingerprint, check=True))
        times.append(simulate(scheds[-1], topo).time_s)
    staged = scheds[0]
    by_id = {t.id: t for t in staged.transfers}
    partials = [t for t in staged.transfers if t.src // 4 == 0 and t.dst // 4 != 0]
    folds = {
        (t.src, t.chunk): t
        for t in staged.transfers
        if t.channel == STAGE_CHANNEL and t.src // 4 == t.dst // 4
    }
    assert partials and len(folds) == len(partials)
    for p in partials:
        assert p.op == COPY
        fold = folds[p.dst, p.chunk]
        assert fold.op == REDUCE and fold.dst // 4 == p.dst // 4
        assert p.dst == staging_gpu(rings[p.dst // 4], fold.dst)
        assert p.id in fold.deps
        ring_steps = [
            by_id[d] for d in fold.deps if by_id[d].dst == fold.dst and by_id[d].src // 4 != 0
        ]
        assert [t.op for t in ring_steps] == [REDUCE]  # the ring's last step, before the fold
    unstaged = scheds[1]
    assert not any(
        t.channel == STAGE_CHANNEL and t.src // 4 == t.dst // 4 for t in unstaged.transfers
    )
    assert times[0] < 0.96 * times[1]


@given(st.integers(2, 400), st.sampled_from([2**20, 2**24, 2**28, 2**30, 2**32]))
def test_default_flat_tail_spans_its_bytes(pieces: int, size: int) -> None:
    k = default_flat_tail(Fraction(size), pieces)
    assert 1 <= k <= pieces
    assert k == pieces or k * Fraction(size, pieces) >= FLAT_TAIL_BYTES
    assert k == 1 or (k - 1) * Fraction(size, pieces) < FLAT_TAIL_BYTES


@pytest.mark.parametrize("n", range(2, 11))
def test_ring_pass_two_way_halves_the_hops(n: int) -> None:
    """Both ways, a reduce-scatter then an all-gather is an AllReduce in ``⌈(n − 1)/2⌉``
    steps each, every rank sending and receiving ``n − 1`` chunks per pass (a one-way
    ring's bytes), and no chunk crossing more than ``⌈(n − 1)/2⌉`` hops in a row."""
    b = Builder("two-way", n)
    groups = [[b.chunk(Fraction(1, n))] for _ in range(n)]
    ring = list(range(n))
    steps = b.ring_pass_two_way(ring, groups, 0, REDUCE, release=0.0, step_release=1.0)
    assert steps == n // 2  # ⌈(n − 1)/2⌉
    assert b.ring_pass_two_way(ring, groups, 1, COPY, release=0.0, step_release=1.0) == steps
    sched = b.build(Fraction(n), topology=None, check=True)
    for op in (REDUCE, COPY):
        sent = Counter(t.src for t in sched.transfers if t.op == op)
        got = Counter(t.dst for t in sched.transfers if t.op == op)
        assert set(sent.values()) == set(got.values()) == {n - 1}
        assert all(abs(t.src - t.dst) in (1, n - 1) for t in sched.transfers)
    # the longest dependency chain within one pass: at most ``steps`` transfers
    depth: dict[int, int] = {}
    for t in sched.transfers:  # ids follow program order within a pass
        same = [depth[d] for d in t.deps if sched.by_id[d].op == t.op]
        depth[t.id] = 1 + max(same, default=0)
    assert max(depth.values()) <= steps + 1  # + 1: the owner adds its two chains in turn


def test_two_way_rings_space_their_steps_wider() -> None:
    """The id order's default spacing is :data:`TWO_WAY_SPACING` with the rings both ways
    and :data:`DEFAULT_SPACING` one way (1 GiB, 16 × 8 GPUs, 2 NICs lost: 5.375 ms at 2,
    5.301 at 2.5)."""
    topo = fail_nics(hierarchical(10, 4), 0, 1)
    size = Fraction(2**26)

    def ids(**kw):
        b = Builder("hr", topo.num_ranks)
        hier_ring(b, server_view(topo), 4, size, **kw)
        s = b.build(size, topology=topo.shape_fingerprint, check=False)
        return [(t.src, t.dst, t.chunk, t.channel) for t in s.transfers]

    assert TWO_WAY_SPACING != DEFAULT_SPACING
    for two_way, spacing in ((True, TWO_WAY_SPACING), (False, DEFAULT_SPACING)):
        default = ids(bidirectional=two_way)
        assert default == ids(bidirectional=two_way, spacing=spacing)
        other = TWO_WAY_SPACING + DEFAULT_SPACING - spacing
        assert default != ids(bidirectional=two_way, spacing=other)


def test_rings_both_ways_are_faster_on_many_servers() -> None:
    """12 × 4 GPUs, half of one server's NICs lost, 64 MiB, 16 pieces: both ways beats one
    way (0.826 against 0.882 ms, with no piece's network pass both ways on the one-way
    rings; 0.847 with the first two and last four pieces' both ways), the same bytes in
    about half the hops; both above the bound."""
    topo = fail_nics(hierarchical(12, 4), 0, 2)
    size = Fraction(2**26)
    times = {}
    for two_way in (False, True):
        b = Builder("hr", topo.num_ranks)
        ends = {} if two_way else {"two_way_first": 0, "two_way_last": 0}
        hier_ring(b, server_view(topo), 16, size, bidirectional=two_way, **ends)
        sched = b.build(size, topology=topo.shape_fingerprint, check=False)
        times[two_way] = simulate(sched, topo).time_s
    bound = float(lower_bound(topo, size).seconds)
    assert bound <= times[True] < 0.97 * times[False]


def test_rings_run_both_ways_from_eight_healthy_servers() -> None:
    """The default is one-way up to 7 healthy servers or with 2 GPUs per server, and both
    ways from 8 healthy servers of 4 GPUs on."""
    for servers, gpus, two_way in ((8, 4, False), (9, 4, True), (9, 2, False)):
        topo = fail_nics(hierarchical(servers, gpus), 0, 1)
        default = _build(topo, 1, check=False)
        forced = _build(topo, 1, check=False, two_way=two_way)
        other = _build(topo, 1, check=False, two_way=not two_way)
        assert default.transfers == forced.transfers != other.transfers
        assert two_way == (servers - 1 >= TWO_WAY_MIN_HEALTHY and gpus >= TWO_WAY_MIN_GPUS)


@pytest.mark.parametrize(
    ("servers", "gpus", "lost"), [(3, 4, 0), (4, 4, 1), (5, 8, 2), (4, 8, 4), (6, 4, 3)]
)
def test_bytes_decouple_the_straggler(servers: int, gpus: int, lost: int) -> None:
    """A healthy server moves ``(2(N_h − 1) + 1)/N_h · M`` each way, the straggler ``M``.

    The straggler's dead NICs carry nothing and each alive one carries ``M / a``; on a
    healthy server the rails alive on the straggler carry the same, and so do the dead
    ones (dealing whole dead-rail shards to one NIC per owner would break this with 2 of
    8 lost). Without a sliver (the default gives the straggler one where it can own a
    part, :func:`test_sliver_loads_every_nic_alike`).
    """
    topo = hierarchical(servers, gpus)
    if lost:
        topo = fail_nics(topo, 0, lost)
    out, inn = _net_bytes(_build(topo, 2, check=False, sliver=0), gpus)
    nh = servers - 1 if lost else servers
    healthy = Fraction(2 * (nh - 1) + (1 if lost else 0), nh)
    for srv in range(1 if lost else 0, servers):
        for tally in (out, inn):
            assert sum(v for (x, _), v in tally.items() if x == srv) == healthy
            assert len({tally[srv, c] for c in range(lost, gpus)}) == 1
            assert len({tally[srv, c] for c in range(lost)}) <= 1
    if lost:
        a = gpus - lost
        for tally in (out, inn):
            assert sum(v for (x, _), v in tally.items() if x == 0) == 1
            assert all(tally[0, c] == 0 for c in range(lost))
            assert {tally[0, c] for c in range(lost, gpus)} == {Fraction(1, a)}


@pytest.mark.parametrize(
    ("servers", "gpus", "lost"), [(3, 4, 1), (7, 4, 1), (8, 8, 1), (8, 8, 2), (9, 8, 3), (16, 8, 2)]
)
def test_sliver_loads_every_nic_alike(servers: int, gpus: int, lost: int) -> None:
    """With the straggler owning :func:`default_sliver` ``w`` of every class, every alive
    NIC of the cluster moves ``(1 + (N_h − 1) w)/a · M`` each way, exactly: the straggler
    ``1 + (N_h − 1) w`` over its ``a`` alive NICs, a healthy server
    ``(1 − w)(2N_h − 1)/N_h + w`` over all of its NICs, dead rails included, which is the
    bound's water-filling (its byte floor is the bound). Without the sliver the healthy
    NICs carry more and the straggler's less (the floor 1.023 × the bound on 16 × 8 GPUs
    with 1 NIC lost), and the schedule is still an AllReduce."""
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    w = default_sliver(server_view(topo))
    nh, a = servers - 1, gpus - lost
    assert 0 < w < Fraction(1, nh)
    assert Fraction(2 * nh - 1, nh) * (1 - w) + w == (1 + (nh - 1) * w) * gpus / a
    sched = _build(topo, 1, check=False)
    if servers < 10:
        executor.check(sched)
    # ids in dependency order: every connection's FIFO order can then drain, lowest
    # unfinished id first (no deadlock; Z3 proves the small cases below)
    assert all(d < t.id for t in sched.transfers for d in t.deps)
    out, inn = _net_bytes(sched, gpus)
    per_nic = (1 + (nh - 1) * w) / a
    for tally in (out, inn):
        assert all(tally[0, c] == 0 for c in range(lost))
        assert {v for (x, c), v in tally.items() if (x, c) >= (0, lost)} == {per_nic}
        assert len([v for v in tally.values() if v]) == (servers - 1) * gpus + a
    old_out, _ = _net_bytes(_build(topo, 1, check=False, sliver=0), gpus)
    assert max(v for (x, _), v in old_out.items() if x) > per_nic > old_out[0, lost]


@pytest.mark.parametrize(("servers", "gpus", "lost"), [(3, 4, 1), (4, 4, 1), (3, 8, 2)])
def test_sliver_schedules_are_proved(servers: int, gpus: int, lost: int) -> None:
    """Z3 proves the hierarchical ring with the straggler's sliver lossless, race-free and
    deadlock-free. On 3 × 4 GPUs (one ring hop) a small class's broadcast of the sliver
    was once ordered before the tree reduce it waits for, and the verifier found the
    cycle of six transfers over the straggler's NVLink connections that the exact
    executor, which ignores connection order, could not see."""
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    s = optcc(topo, Fraction(2**20), hier_ring=True, pieces=2, network=RING, nvlink_rs=RING)
    assert Fraction(s.meta_get("share_straggler")) > 0
    r = verify(s)
    assert r.verdict == PROVED, str(r)


@pytest.mark.parametrize("lag", [0, 1, 3, 10])
def test_sliver_results_wait_for_later_partials(lag: int) -> None:
    """``sliver_lag``: the straggler sends the results of piece ``k``'s sliver only after
    its partials of piece ``k + lag`` (the last piece's at the end), from the same GPU, so
    its egress still has work once its last partials have left; and the schedule is
    still an AllReduce. A sliver chunk is one the straggler sends to every healthy
    server; a piece's chunks are allocated together, its sliver's last."""
    servers, gpus, pieces = 5, 4, 6
    topo = fail_nics(hierarchical(servers, gpus), 0, 1)
    b = Builder("hr", topo.num_ranks)
    hier_ring(b, server_view(topo), pieces, M, sliver_lag=lag)
    sched = b.build(M, topology=topo.shape_fingerprint)
    assert all(d < t.id for t in sched.transfers for d in t.deps)

    fans = fan_out(sched, gpus)
    sliver = sorted(c for c, dests in fans.items() if len(dests) == servers - 1)
    assert len(sliver) == sum(1 for dests in fans.values() if len(dests) > 1)
    # each piece's sliver chunks are a run of consecutive ids; the piece of any chunk is
    # the number of runs that end before it
    ends = [c for c in sliver if c + 1 not in sliver]
    assert len(ends) == pieces
    assert_own_results_lagged(sched, gpus, pieces, lag, lambda c: sum(e < c for e in ends))


def test_sliver_is_faster_where_the_straggler_can_own_a_part() -> None:
    """7 × 8 GPUs, 1 NIC lost (β = 7/8 > β*), 64 MiB: the sliver beats the decoupled
    straggler, which loads every healthy NIC beyond the bound while the straggler's sit
    idle part of the time (443 against 466 µs when the sliver's exchange ran inside each
    piece, 423 against 447 with its results lagged; 7 × 4 GPUs at 128 / 256 MiB then:
    1.397 / 2.629 against 1.430 / 2.716 ms, but at 64 MiB, in 6 pieces, 795 against 782
    µs), and OptCC picks it."""
    topo = fail_nics(hierarchical(7, 8), 0, 1)
    size = Fraction(2**26)
    s = optcc(topo, size, check=False)
    assert s.meta_get("variant") == "hierarchical ring"
    assert s.meta_get("share_straggler") == str(default_sliver(server_view(topo)))
    decoupled = optcc(topo, size, check=False, sliver=0)
    assert decoupled.meta_get("variant") == "hierarchical ring"
    assert decoupled.meta_get("share_straggler") == "0"
    t, t0 = simulate(s, topo).time_s, simulate(decoupled, topo).time_s
    assert float(lower_bound(topo, size).seconds) <= t < 0.97 * t0


@pytest.mark.parametrize("servers", [3, 4, 5, 6])
def test_straggler_is_the_only_bottleneck_where_it_can_be(servers: int) -> None:
    """Where the straggler's per-NIC bytes ``M / a`` are at least what a healthy NIC must
    carry on average, no healthy NIC carries more than that, for every count of lost NICs.

    With one rail alive on up to 5 servers (two on 3) the balanced class sizes are
    negative; putting every part on the alive rails, as OptCC once did, loaded them with
    ``(2N − 3)/(N − 1) · M`` each way (4 × 8 GPUs, 7 lost: 1.95 × the bound).
    """
    for lost in range(1, 8):
        topo = fail_nics(hierarchical(servers, 8), 0, lost)
        sched = _build(topo, 1, check=False)
        executor.check(sched)
        out, inn = _net_bytes(sched, 8)
        per_nic_d = Fraction(1, 8 - lost)
        nh = servers - 1
        if Fraction(2 * nh - 1, nh) / 8 > per_nic_d:
            continue  # a healthy NIC must carry more than the straggler's: not attainable
        for tally in (out, inn):
            assert max(v for (x, _), v in tally.items() if x != 0) <= per_nic_d, (servers, lost)


def test_one_nic_left_is_near_the_bound() -> None:
    """4 × 8 GPUs, 7 of 8 NICs lost on one server (β = 1/8), 256 MiB: OptCC within 10 % of
    the bound and faster than R2CC (it took 1.95 × the bound with every part on the one
    alive rail; 1.05 × now, R2CC 1.14 ×)."""
    topo = fail_nics(hierarchical(4, 8), 0, 7)
    assert_optcc_near_bound(topo, Fraction(2**28), "hierarchical ring", 1.1, [r2cc_allreduce])


def test_half_the_nics_lost_near_the_bound_at_256_mib() -> None:
    """4 × 8 GPUs, half of one server's NICs lost, 256 MiB: within 12 % of the bound and
    faster than Balance and R2CC (1.163 × with 32 pieces and spacing 3; 1.116 × with the
    64 pieces of :func:`default_ring_pieces` and spacing 2; 1.104 × with the flat tail;
    1.095 × with the straggler's partials staged)."""
    topo = fail_nics(hierarchical(4, 8), 0, 4)
    assert_optcc_near_bound(
        topo, Fraction(2**28), "hierarchical ring", 1.12, [balance, r2cc_allreduce]
    )


def test_default_ring_pieces_shrink_with_fewer_hops() -> None:
    """Pieces never grow with the servers at one size, never exceed the buffer's
    ``MAX_RING_PIECE_BYTES`` cut, and the egress window always spans two pieces and
    ``EGRESS_WINDOW_BYTES``."""
    for size in (Fraction(2**20), Fraction(2**28), Fraction(2**30), Fraction(3 * 2**30)):
        ks = [default_ring_pieces(size, n) for n in range(2, 40)]
        assert ks == sorted(ks, reverse=True)
        assert all(k >= 2 for k in ks)
        assert all(k == max(2, round(size / MAX_RING_PIECE_BYTES)) for k in ks[8:])
        for k in set(ks):
            w = default_egress_window(size, k)
            assert w >= 2 and w * size / k >= min(EGRESS_WINDOW_BYTES, 2 * size / k)
            assert w == 2 or (w - 1) * size / k < EGRESS_WINDOW_BYTES


def test_classes_cover_the_rails_once() -> None:
    """Alive rails: one class each, none where every part goes on the dead rails (one
    rail alive on 4 servers). Dead rails: one class dealt over the alive rails
    (``rail_d = −1``) where that is even, else one class per alive rail; none if unloaded."""
    for lost in range(8):
        topo = fail_nics(hierarchical(4, 8), 0, lost) if lost else hierarchical(4, 8)
        cls = hier_ring_classes(server_view(topo))
        assert sum(c.size for c in cls) == 1
        assert all(c.size > 0 for c in cls)
        assert len({(c.rail, c.rail_d) for c in cls}) == len(cls)
        alive = set(range(lost, 8)) if lost < 7 else set()
        assert {c.rail for c in cls if c.rail == c.rail_d} == alive
        dead = [c for c in cls if c.rail < lost]
        dealt = dealt_evenly(lost, 8 - lost, 3)
        assert all((c.rail_d == -1) == dealt for c in dead)
        if dead:
            per_rail = len(dead) // lost
            assert per_rail == (1 if dealt else 8 - lost)
    assert len(hier_ring_classes(server_view(fail_nics(hierarchical(4, 8), 0, 4)))) == 8
    assert len(hier_ring_classes(server_view(fail_nics(hierarchical(16, 8), 0, 1)))) == 14


def test_simulated_between_the_bound_and_balance() -> None:
    """5 × 4 GPUs, half of one server's NICs lost, 256 MiB: sound, and faster than Balance."""
    topo = fail_nics(hierarchical(5, 4), 0, 2)
    size = Fraction(2**28)
    sched = optcc(topo, size, hier_ring=True)
    assert sched.meta_get("variant") == "hierarchical ring"
    assert executor.execute(sched).ok
    t = simulate(sched, topo).time_s
    t_balance = simulate(balance(topo, size), topo).time_s
    assert float(lower_bound(topo, size).seconds) <= t < t_balance


def test_optcc_chooses_the_hierarchical_ring_above_eight_servers() -> None:
    n = PIPELINE_MAX_SERVERS + 1
    for lost in (1, 2, 3):
        topo = fail_nics(hierarchical(n, 4), 0, lost)
        s = optcc(topo, M, pieces=1, check=False)
        assert s.meta_get("variant") == "hierarchical ring"
        # β = 3/4 > β*: the straggler owns its sliver; β ≤ 1/2: nothing
        w = default_sliver(server_view(topo))
        assert s.meta_get("share_straggler") == str(w)
        assert (w > 0) == (lost == 1)
    # a straggler whose NICs are all slower (not dead) runs it too, with its sliver
    # (it took the weighted ring before the sliver), and from SLIVER_MIN_SERVERS servers on
    slow = scale_server_nics(hierarchical(n, 2), 0, Fraction(7, 8))
    s = optcc(slow, M, pieces=1, check=False)
    assert s.meta_get("variant") == "hierarchical ring"
    assert Fraction(s.meta_get("share_straggler")) == default_sliver(server_view(slow)) > 0
    for servers, variant in ((SLIVER_MIN_SERVERS - 1, "pipelined"), (SLIVER_MIN_SERVERS, "hier")):
        slow = scale_server_nics(hierarchical(servers, 2), 0, Fraction(7, 8))
        assert optcc(slow, M, pieces=1, check=False).meta_get("variant").startswith(variant)
    assert optcc(slow, M, weighted_ring=True).meta_get("variant") == "weighted ring"
    # two degraded servers alike that own nothing (1 of 2 NICs lost): the ring too, both
    # decoupled (test_hier_pipeline.test_choice_of_variant has the rule's other sides)
    two = fail_nics(fail_nics(hierarchical(n, 2), 0, 1), 1, 1)
    assert optcc(two, M, pieces=1, check=False).meta_get("variant") == "hierarchical ring"
    # up to eight servers: the pipelined schedule where the straggler owns a share
    # (β = 3/4 > β* = 3/5 on 4 servers), the hierarchical ring where it owns nothing
    small = fail_nics(hierarchical(4, 4), 0, 1)
    assert optcc(small, M, pieces=1).meta_get("variant") == "pipelined hierarchical"
    assert optcc(small, M, pieces=1, hier_ring=True).meta_get("variant") == "hierarchical ring"
    half = fail_nics(hierarchical(4, 4), 0, 2)
    assert optcc(half, M, pieces=1).meta_get("variant") == "hierarchical ring"
    assert optcc(half, M, pieces=1, hier_ring=False).meta_get("variant") == "pipelined hierarchical"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"hier_ring": "yes"}, "hier_ring must be"),
        ({"hier_ring": True, "direct": True}, "cannot be combined"),
        ({"hier_ring": True, "weighted_ring": True}, "cannot be combined"),
        ({"hier_ring": True, "pipeline": True}, "cannot be combined"),
        ({"sliver": "x"}, "sliver must be a number"),
        ({"hier_ring": True, "sliver": 1}, r"sliver must be in \[0, 1\)"),
    ],
)
def test_bad_hier_ring_options(kwargs, match) -> None:
    with pytest.raises(ScheduleError, match=match):
        optcc(fail_nics(hierarchical(3, 4), 0, 1), M, **kwargs)


def test_hier_ring_asked_where_it_cannot_run() -> None:
    # NIC 0 lost on one server, NIC 3 on another: too unlike to be seen alike, and since
    # the ring decouples degraded servers that differ, it runs
    two = fail_nics(fail_nics(hierarchical(4, 4), 0, [0]), 1, [3])
    assert optcc(two, M, hier_ring=True, check=False).meta_get("variant") == "hierarchical ring"
    with pytest.raises(ScheduleError, match="pipeline needs the degraded servers' NICs alike"):
        optcc(two, M, pipeline=True)
    # the switch model knows no NICs: two endpoints slowed unlike leave the layered rules
    # only the direct schedule, and the tree packing runs instead (1.201 x the bound,
    # the direct schedule 1.393 at 1 GiB); without it, the direct schedule
    endpoints = switch_model([100, 100, 100, 100, 100, 100, 50, 75])
    assert optcc(endpoints, M, pieces=2).meta_get("variant") == "tree packing"
    assert optcc(endpoints, M, pieces=2, trees=False).meta_get("variant") == "direct"
    with pytest.raises(ScheduleError, match="not a switch model"):
        optcc(endpoints, M, hier_ring=True)
    # a degraded server's alive NICs at two bandwidths (optcc sees it through usable_view)
    uneven = server_view(degrade_link(hierarchical(4, 4), "s0.nic1", "rail1", Fraction(1, 2)))
    assert hier_ring_blocker(uneven) == "the degraded server's alive NICs all at the same bandwidth"
    with pytest.raises(ScheduleError, match="two healthy servers"):
        optcc(fail_nics(fail_nics(hierarchical(3, 4), 0, 1), 1, 1), M, hier_ring=True)
    with pytest.raises(ScheduleError, match="two healthy servers"):
        optcc(fail_nics(hierarchical(2, 4), 0, 1), M, hier_ring=True)


@pytest.mark.parametrize("window", [0, 2])
def test_straggler_egress_window(window: int) -> None:
    """The straggler's partials of piece k depend on its partials of piece k − W (same GPU)."""
    gpus = 4
    topo = fail_nics(hierarchical(4, gpus), 0, 1)
    b = Builder("hr", topo.num_ranks)
    hier_ring(b, server_view(topo), 5, M, net_window=0, egress_window=window)
    sched = b.build(M, topology=topo.shape_fingerprint, check=True)
    per = len(sched.chunks) // 5
    # (the straggler's sliver goes back to the owners on the return channels c + G)
    net_out = [t for t in sched.transfers if t.src // gpus == 0 and t.dst // gpus != 0]
    partials = [t for t in net_out if t.channel < gpus]
    assert len(partials) < len(net_out)
    by_piece: dict[tuple[int, int], set[int]] = {}
    for t in partials:
        by_piece.setdefault((t.chunk // per, t.src), set()).add(t.id)
    held = [
        by_piece[(t.chunk // per - 2, t.src)] <= set(t.deps)
        for t in partials
        if t.chunk // per >= 2
    ]
    assert held and all(held) == (window == 2) and any(held) == (window == 2)


@pytest.mark.parametrize("first", [0, 1, 2])
def test_first_pieces_reduce_both_ways(first: int) -> None:
    """``two_way_first``: the first pieces' network reduce-scatters among the healthy
    servers run both ways (each server sends to both ring neighbours), the later ones
    and every all-gather one way; each piece allocates the same number of chunks, one
    after the other. By default 1 where the straggler owns nothing, else 0."""
    servers, gpus, pieces = 5, 4, 3
    topo = fail_nics(hierarchical(servers, gpus), 0, 2)  # owns nothing
    s = optcc(
        topo, M, hier_ring=True, pieces=pieces, two_way_first=first, two_way_last=0, network=RING
    )
    assert Fraction(s.meta_get("share_straggler")) == 0
    per_piece, rest = divmod(len(s.chunks), pieces)
    assert rest == 0
    pairs: dict[tuple[int, str], set[tuple[int, int]]] = {}
    for t in s.transfers:
        src, dst = t.src // gpus, t.dst // gpus
        if 0 in (src, dst) or src == dst:
            continue
        pairs.setdefault((t.chunk // per_piece, t.op), set()).add((src, dst))
    healthy = servers - 1
    for k in range(pieces):
        assert len(pairs[k, REDUCE]) == (2 if k < first else 1) * healthy, k
        assert len(pairs[k, COPY]) == healthy
    assert optcc(topo, M, hier_ring=True, pieces=pieces).meta_get("two_way_first") == "2"
    coupled = fail_nics(hierarchical(6, 8), 0, 1)
    assert (
        optcc(coupled, Fraction(2**23), check=False, hier_ring=True).meta_get("two_way_first")
        is None
    )


def test_first_piece_both_ways_is_proved() -> None:
    """Z3 proves the hierarchical ring with its first piece's reduce-scatter both ways
    lossless, race-free and deadlock-free (4 × 2 GPUs, the straggler owning nothing)."""
    topo = fail_nics(hierarchical(4, 2), 0, 1)
    s = optcc(topo, Fraction(2**20), hier_ring=True, pieces=2, two_way_first=1)
    assert s.meta_get("two_way_first") == "1"
    r = verify(s)
    assert r.verdict == PROVED, str(r)


@pytest.mark.parametrize("lost", [1, 4])
def test_straggler_all_gathers_both_ways(lost: int) -> None:
    """``straggler_two_way`` (the default): the straggler's NVLink all-gathers send to
    both ring neighbours, each GPU receiving the same bytes as in the one-way ring and
    all of them sending as much (a GPU sends its own group twice and forwards fewer:
    the same per GPU where the groups are equal); the healthy servers' rings are
    unchanged."""
    gpus = 8
    topo = fail_nics(hierarchical(3, gpus), 0, lost)

    def ag(flag: bool) -> tuple[dict[int, set[int]], Counter[int], Counter[int], int]:
        s = optcc(topo, Fraction(2**22), hier_ring=True, pieces=2, straggler_two_way=flag)
        assert s.meta_get("straggler_two_way") == ("1" if flag else "0")
        mine = [
            t
            for t in s.transfers
            if t.op == COPY and t.channel == 1 and t.src // gpus == 0 and t.dst // gpus == 0
        ]
        peers: dict[int, set[int]] = {}
        sent: Counter[int] = Counter()
        got: Counter[int] = Counter()
        for t in mine:
            peers.setdefault(t.src, set()).add(t.dst)
            sent[t.src] += s.chunks[t.chunk].size
            got[t.dst] += s.chunks[t.chunk].size
        healthy = sum(1 for t in s.transfers if t.channel == 1 and t.src // gpus != 0)
        return peers, sent, got, healthy

    two, one = ag(True), ag(False)
    assert all(len(p) == 2 for p in two[0].values()) and len(two[0]) == gpus
    assert all(len(p) == 1 for p in one[0].values()) and len(one[0]) == gpus
    assert two[2] == one[2] and sum(two[1].values()) == sum(one[1].values())
    assert (two[1] == one[1]) == (lost == 4)  # equal groups where the straggler owns none
    assert two[3] == one[3]  # healthy servers: the same transfers
    assert "straggler_two_way" not in dict(
        optcc(hierarchical(3, gpus), Fraction(2**22), hier_ring=True, pieces=2).meta
    )


def test_straggler_two_way_all_gather_is_proved() -> None:
    """Z3 proves the hierarchical ring with the straggler's all-gathers both ways
    lossless, race-free and deadlock-free (3 × 4 GPUs, half the NICs lost)."""
    s = optcc(fail_nics(hierarchical(3, 4), 0, 2), Fraction(2**20), hier_ring=True, pieces=2)
    assert s.meta_get("straggler_two_way") == "1"
    r = verify(s)
    assert r.verdict == PROVED, str(r)


@pytest.mark.parametrize("last", [0, 1, 3])
def test_last_pieces_gather_both_ways(last: int) -> None:
    """``two_way_last``: the last pieces' network all-gathers among the healthy servers
    run both ways (each server sends to both ring neighbours), on connections of their
    own (channel rail + 2G), the earlier ones one way on rail + G; the reduce-scatters
    are not touched. By default 4 where the straggler owns nothing, else 0; nothing
    changes where the rings already run both ways."""
    servers, gpus, pieces = 5, 4, 4
    topo = fail_nics(hierarchical(servers, gpus), 0, 2)  # owns nothing
    s = optcc(
        topo, M, hier_ring=True, pieces=pieces, two_way_first=0, two_way_last=last, network=RING
    )
    per_piece = len(s.chunks) // pieces
    pairs: dict[tuple[int, str], set[tuple[int, int]]] = {}
    channels: dict[int, set[int]] = {}
    for t in s.transfers:
        src, dst = t.src // gpus, t.dst // gpus
        if 0 in (src, dst) or src == dst:
            continue
        k = t.chunk // per_piece
        pairs.setdefault((k, t.op), set()).add((src, dst))
        if t.op == COPY:
            channels.setdefault(k, set()).add(t.channel // gpus)
    healthy = servers - 1
    for k in range(pieces):
        late = k >= pieces - last
        assert len(pairs[k, COPY]) == (2 if late else 1) * healthy, k
        assert channels[k] == ({2} if late else {1}), k
        assert len(pairs[k, REDUCE]) == healthy
    assert optcc(topo, M, hier_ring=True, pieces=pieces).meta_get("two_way_last") == "4"
    sliver = fail_nics(hierarchical(6, 8), 0, 1)
    assert (
        optcc(sliver, Fraction(2**23), check=False, hier_ring=True).meta_get("two_way_last") is None
    )
    # rings both ways already (8 healthy servers): the option changes no transfer, and
    # optcc records neither end as both ways
    wide = fail_nics(hierarchical(9, 4), 0, 2)
    assert default_bidirectional(server_view(wide), False)
    assert not default_bidirectional(server_view(wide), True)
    assert not default_bidirectional(server_view(topo), False)
    built = []
    for n_last in (0, 2):
        bld = Builder("hr", wide.num_ranks)
        hier_ring(bld, server_view(wide), 2, M, two_way_last=n_last)
        built.append(bld.build(M, topology=wide.shape_fingerprint, check=False).transfers)
    assert built[0] == built[1]
    meta = dict(optcc(wide, M, hier_ring=True, pieces=2, check=False).meta)
    assert "two_way_first" not in meta and "two_way_last" not in meta


def test_last_pieces_both_ways_are_proved() -> None:
    """Z3 proves the hierarchical ring with its last piece's network all-gather both
    ways, on connections of their own, lossless, race-free and deadlock-free."""
    topo = fail_nics(hierarchical(4, 2), 0, 1)
    s = optcc(topo, Fraction(2**20), hier_ring=True, pieces=2, network=RING, nvlink_rs=RING)
    assert s.meta_get("two_way_last") == "4" and s.meta_get("two_way_first") == "2"
    r = verify(s)
    assert r.verdict == PROVED, str(r)


@pytest.mark.parametrize(
    ("servers", "gpus", "lost", "slow"),
    [(4, 4, 1, 2), (5, 8, 2, 2), (6, 8, 4, 3), (6, 4, 3, 2), (9, 8, 2, 2)],
)
def test_bytes_decouple_several_degraded_servers(
    servers: int, gpus: int, lost: int, slow: int
) -> None:
    """With ``D`` degraded servers alike, each is decoupled: a healthy server moves
    ``(2(N_h − 1) + D)/N_h · M`` each way (its rings, and each degraded server's partial in
    and result out of the shards it owns), a degraded one ``M`` over its alive NICs alike,
    and its dead ones nothing. Every healthy alive-rail NIC carries the same (and the dead
    rails' alike)."""
    topo = hierarchical(servers, gpus)
    for x in range(slow):
        topo = fail_nics(topo, x, lost)
    sched = _build(topo, 2, check=False, sliver=0)
    executor.check(sched)
    out, inn = _net_bytes(sched, gpus)
    nh, a = servers - slow, gpus - lost
    healthy = Fraction(2 * (nh - 1) + slow, nh)
    for tally in (out, inn):
        for srv in range(slow, servers):
            assert sum(v for (x, _), v in tally.items() if x == srv) == healthy
            assert len({tally[srv, c] for c in range(lost, gpus)}) == 1
            assert len({tally[srv, c] for c in range(lost)}) <= 1
        for srv in range(slow):
            assert all(tally[srv, c] == 0 for c in range(lost))
            assert {tally[srv, c] for c in range(lost, gpus)} == {Fraction(1, a)}


def test_several_degraded_servers_stage_on_gpus_of_their_own() -> None:
    """Each degraded server's partial of a shard lands on its own staging GPU, the
    owner's first, second, ... successor in the NVLink ring; a server has one GPU fewer
    than it has staging places for."""
    topo = fail_nics(fail_nics(hierarchical(5, 4), 0, 1), 1, 1)
    rings = nvlink_rings(server_view(topo))
    sched = _build(topo, 1)
    folds = [t for t in sched.transfers if t.channel == STAGE_CHANNEL and t.src // 4 == t.dst // 4]
    by_owner: dict[tuple[int, int], set[int]] = {}
    for t in folds:
        by_owner.setdefault((t.dst, t.chunk), set()).add(t.src)
    assert by_owner and all(len(v) == 2 for v in by_owner.values())
    for (owner, _chunk), stages in by_owner.items():
        ring = rings[owner // 4]
        assert stages == {staging_gpu(ring, owner, 0), staging_gpu(ring, owner, 1)}
    with pytest.raises(ScheduleError, match="no staging GPU 3"):
        staging_gpu([0, 1, 2, 3], 0, 3)


def test_several_degraded_servers_are_proved() -> None:
    """Z3 proves the hierarchical ring around two degraded servers lossless, race-free and
    deadlock-free (4 × 4 GPUs, one NIC lost on each)."""
    topo = fail_nics(fail_nics(hierarchical(4, 4), 0, 1), 1, 1)
    s = optcc(topo, Fraction(2**20), hier_ring=True, pieces=2)
    assert s.meta_get("variant") == "hierarchical ring"
    r = verify(s)
    assert r.verdict == PROVED, str(r)


@pytest.mark.parametrize(
    ("servers", "gpus", "lost", "slow"), [(6, 4, 1, 2), (8, 8, 2, 2), (9, 8, 1, 3), (12, 8, 1, 2)]
)
def test_slivers_of_several_degraded_servers_load_every_nic_alike(
    servers: int, gpus: int, lost: int, slow: int
) -> None:
    """With ``D`` degraded servers alike each owning :func:`default_sliver` ``w`` (the
    water-filling's share), exchanged with the healthy servers and with each other, every
    alive NIC of the cluster moves ``(1 + (N_h + D − 2) w)/a · M`` each way, exactly; the
    dead ones nothing. The schedule is an AllReduce (the exact executor)."""
    from resilientcc.schedules.optcc import balanced_shares

    topo = hierarchical(servers, gpus)
    for x in range(slow):
        topo = fail_nics(topo, x, lost)
    view = server_view(topo)
    w = default_sliver(view)
    nh, a = servers - slow, gpus - lost
    assert 0 < w < Fraction(1, nh)
    assert w == balanced_shares({sv.index: sv.bandwidth for sv in view})[0]
    sched = _build(topo, 1, check=False)
    executor.check(sched)
    out, inn = _net_bytes(sched, gpus)
    per_nic = (1 + (nh + slow - 2) * w) / a
    for tally in (out, inn):
        for srv in range(slow):
            assert all(tally[srv, c] == 0 for c in range(lost))
        live = {v for (x, c), v in tally.items() if x >= slow or c >= lost}
        assert live == {per_nic}


def test_slivers_of_two_degraded_servers_are_proved() -> None:
    """Z3 proves the hierarchical ring with two degraded servers' slivers (each exchanged
    with the healthy servers and with the other degraded one) lossless, race-free and
    deadlock-free: 5 × 4 GPUs, one NIC lost on each of two."""
    topo = fail_nics(fail_nics(hierarchical(5, 4), 0, 1), 1, 1)
    s = optcc(topo, Fraction(2**20), hier_ring=True, pieces=2, network=RING, nvlink_rs=RING)
    assert Fraction(s.meta_get("share_straggler")) > 0
    r = verify(s)
    assert r.verdict == PROVED, str(r)


def _draw_unlike(data, servers: int, gpus: int):
    """A cluster of ``servers`` × ``gpus`` GPUs with two or more degraded servers that may
    differ, each losing NICs or running every NIC slower (hypothesis draws)."""
    topo = hierarchical(servers, gpus)
    slow = data.draw(st.sets(st.integers(0, servers - 1), min_size=2, max_size=servers - 2))
    for x in sorted(slow):
        if data.draw(st.booleans(), label="lose NICs"):
            lost = data.draw(st.sets(st.integers(0, gpus - 1), min_size=1, max_size=gpus - 1))
            topo = fail_nics(topo, x, sorted(lost))
        else:
            topo = scale_server_nics(topo, x, Fraction(data.draw(st.integers(1, 3)), 4))
    return topo


@settings(max_examples=15, deadline=None)
@given(
    servers=st.integers(4, 5),
    gpus=st.sampled_from([2, 4, 8]),
    data=st.data(),
    pieces=st.integers(1, 3),
)
def test_unlike_degraded_servers_make_an_allreduce(servers: int, gpus: int, data, pieces) -> None:
    """Degraded servers that differ (NICs lost, or all slowed), each decoupled on the
    rails' parts of :func:`unlike_sizes`: an exact AllReduce (the exact executor)."""
    topo = _draw_unlike(data, servers, gpus)
    executor.check(_build(topo, pieces, check=False))


def _exchange_rail(sv, cl) -> int:
    """The rail on which degraded server ``sv`` exchanges class ``cl`` (cut or crossed
    classes): a crossed class on its ``rail_d`` (alive on every degraded server)."""
    if cl.crossed:
        return cl.rail_d
    return cl.rail if cl.rail in sv.alive else cl.rail_d


@pytest.mark.parametrize(
    ("servers", "gpus", "specs"),
    [
        (4, 4, ["0:nic0", "1:x1/2"]),
        (6, 8, ["0:2", "1:x1/2"]),
        (6, 4, ["0:nic0,nic1", "1:nic3", "2:x3/4"]),
        (8, 8, ["0:4", "1:nic7x1/2"]),
    ],
)
def test_unlike_degraded_servers_move_what_the_sizes_say(servers, gpus, specs) -> None:
    """Degraded servers that differ: each moves ``M`` each way, rail ``q``'s part on
    ``q`` where alive and cut evenly over the rails it keeps where lost (nothing on a dead
    NIC); a healthy server's rail-``r`` NIC carries its rings, ``2(N_h − 1)/N_h`` of rail
    ``r``'s part, and ``1/N_h`` of what each degraded server exchanges on ``r``. The
    busiest NIC is the one :func:`unlike_sizes` names, at its time."""
    topo = apply_fail_specs(hierarchical(servers, gpus), specs)
    view = server_view(topo)
    slow = [sv for sv in view if not sv.healthy]
    nh = servers - len(slow)
    classes = hier_ring_classes(view)
    assert all(len(cut) >= 1 for cut in unlike_splits(view).values())
    sched = _build(topo, 2, check=False)
    executor.check(sched)
    out, inn = _net_bytes(sched, gpus)
    on_rail = {
        (sv.index, r): sum(
            (cl.size for cl in classes if _exchange_rail(sv, cl) == r), start=Fraction(0)
        )
        for sv in slow
        for r in range(gpus)
    }
    for tally in (out, inn):
        for sv in slow:
            assert sum(tally[sv.index, r] for r in range(gpus)) == 1
            for r in range(gpus):
                assert tally[sv.index, r] == on_rail[sv.index, r]
                assert r in sv.alive or tally[sv.index, r] == 0
        for h in (sv for sv in view if sv.healthy):
            for r in range(gpus):
                ring = sum((cl.size for cl in classes if cl.rail == r), start=Fraction(0))
                degraded = sum((on_rail[sv.index, r] for sv in slow), start=Fraction(0))
                assert tally[h.index, r] == 2 * (nh - 1) * ring / nh + degraded / nh
    _, busy = unlike_sizes(view)
    secs, link = byte_floor(sched, topo)
    assert ".nic" in link and secs == pytest.approx(busy * float(M), rel=1e-9)


def test_unlike_degraded_servers_are_proved() -> None:
    """Z3 proves the hierarchical ring around two degraded servers that differ (one lost
    NIC 0, the other runs every NIC at half speed; 4 × 4 GPUs) lossless, race-free and
    deadlock-free."""
    topo = apply_fail_specs(hierarchical(4, 4), ["0:nic0", "1:x1/2"])
    s = optcc(topo, Fraction(2**20), pieces=2)
    assert s.meta_get("variant") == "hierarchical ring"
    assert "0/1:" in s.meta_get("classes")  # rail 0 cut over server 0's alive rails
    r = verify(s)
    assert r.verdict == PROVED, str(r)


def test_optcc_rings_around_unlike_servers_where_decoupling_costs_little() -> None:
    """OptCC runs the ring around degraded servers that differ where decoupling them
    costs at most UNLIKE_RING_MAX_EXCESS (and is faster there than the direct schedule it
    ran before), and the direct schedule where it costs more."""
    from resilientcc.schedules.optcc import UNLIKE_RING_MAX_EXCESS, unlike_excess

    topo = apply_fail_specs(hierarchical(4, 8), ["0:1", "1:x1/2"])
    size = Fraction(2**28)
    assert unlike_excess(server_view(topo)) <= UNLIKE_RING_MAX_EXCESS
    ring_s = optcc(topo, size)
    assert ring_s.meta_get("variant") == "hierarchical ring"
    direct_s = optcc(topo, size, hier_ring=False)
    assert direct_s.meta_get("variant") == "direct"
    fast, slow = simulate(ring_s, topo).time_s, simulate(direct_s, topo).time_s
    bound = float(lower_bound(topo, size).seconds)
    assert bound <= fast < 0.9 * slow
    # where decoupling them costs more, the direct schedule from 512 MiB on
    costly = apply_fail_specs(hierarchical(8, 8), ["0:1", "1:2", "2:x1/2"])
    assert unlike_excess(server_view(costly)) > UNLIKE_RING_MAX_EXCESS
    assert optcc(costly, Fraction(2**30), check=False).meta_get("variant") == "direct"


def test_optcc_stays_off_the_direct_schedule_below_512_mib() -> None:
    """Below UNLIKE_DIRECT_MIN_BYTES, with three healthy servers or more, degraded servers
    that differ get the ring family where decoupling them costs more than
    UNLIKE_RING_MAX_EXCESS: seen alike where that costs less than decoupling each (NICs
    0, 3 and 5 lost on three of 8 servers: the water-filling 10.9 % slower alike, 19.9 %
    decoupled), else each decoupled on the ring (up to UNLIKE_RINGS_MAX_EXCESS). Each is
    faster than the direct schedule they ran before, and than Balance."""
    from resilientcc.schedules.optcc import (
        UNLIKE_DIRECT_MIN_BYTES,
        UNLIKE_RING_MAX_EXCESS,
        UNLIKE_RINGS_MAX_EXCESS,
        unlike_excess,
        unlike_rings,
    )

    size = Fraction(2**28)
    assert size < UNLIKE_DIRECT_MIN_BYTES
    alike = apply_fail_specs(hierarchical(8, 8), ["0:nic0", "1:nic3", "2:nic5"])
    costly = apply_fail_specs(hierarchical(8, 8), ["0:1", "1:2", "2:x1/2"])
    scheds = {}
    for topo in (alike, costly):
        sv = server_view(topo)
        assert unlike_excess(sv) > UNLIKE_RING_MAX_EXCESS and unlike_rings(sv, size)
        sched = scheds[topo] = optcc(topo, size)
        assert sched.meta_get("variant") == "hierarchical ring"
        t = simulate(sched, topo).time_s
        bound = float(lower_bound(topo, size).seconds)
        direct_t = simulate(optcc(topo, size, direct=True, check=False), topo).time_s
        assert bound <= t < 0.85 * direct_t
        assert t < simulate(balance(topo, size), topo).time_s
    # seen alike: no degraded server's traffic on a rail one of them lost
    net = [t for t in scheds[alike].transfers if t.src // 8 != t.dst // 8]
    degraded = [t for t in net if t.src // 8 < 3 or t.dst // 8 < 3]
    assert degraded and all(t.channel % 8 not in (0, 3, 5) for t in degraded)
    assert any(t.channel % 8 == 0 for t in net)  # the healthy servers keep rail 0
    # two healthy servers: the direct schedule stays (seen alike it could cost far more);
    # nor where decoupling costs more than UNLIKE_RINGS_MAX_EXCESS (one of four degraded
    # servers with half its NICs lost)
    # (decoupling these two costs 20.9 %: with a third healthy server the ring would run)
    two = apply_fail_specs(hierarchical(4, 8), ["0:nic3", "1:nic0,nic1"])
    assert not unlike_rings(server_view(two), size)
    half = apply_fail_specs(hierarchical(8, 8), ["0:nic0", "1:nic3", "2:nic5", "3:4"])
    assert unlike_excess(server_view(half)) > UNLIKE_RINGS_MAX_EXCESS
    assert not unlike_rings(server_view(half), size)
    assert optcc(half, size, check=False).meta_get("variant") == "direct"
    # nor with more degraded servers than healthy ones (seen alike, the pipelined
    # schedule there took up to twice the direct schedule's time)
    # (seen alike these four cost the water-filling 18.2 %, decoupled 44.5 %)
    # (without the ordered rings, which take such clusters since: tests/test_ordered_rings.py)
    seven = apply_fail_specs(hierarchical(7, 8), ["0:nic0", "1:nic3", "2:nic5", "3:1"])
    assert not unlike_rings(server_view(seven), size)
    assert optcc(seven, size, check=False, ordered_rings=False).meta_get("variant") == "direct"
    assert optcc(seven, size, check=False).meta_get("variant") == "ordered rings"


def test_crossed_parts_bring_the_busiest_nic_to_the_water_filling() -> None:
    """Two NICs lost beside every NIC at half speed (8 × 8 GPUs): the half-speed server
    binds every rail at ``1/8``, so without crossed parts the healthy rails the other
    kept carry its traffic on top of theirs (2.2 % over the bound's water-filling). With
    them, a little of rails 0 and 1's parts is exchanged by both degraded servers on a
    rail both kept, and the busiest NIC comes within rounding of the water-filling; no
    degraded server then moves more than ``1/8`` on any NIC."""
    from resilientcc.schedules.optcc import unlike_excess

    topo = apply_fail_specs(hierarchical(8, 8), ["0:2", "1:x1/2"])
    view = server_view(topo)
    assert unlike_crossed(view)
    crossed = [cl for cl in unlike_classes(view) if cl.crossed]
    assert crossed and all(cl.rail in (0, 1) and cl.rail_d >= 2 for cl in crossed)
    assert unlike_excess(view) < 1e-3
    sizes, _ = unlike_sizes(view)
    assert sum(sizes) == 1 and sizes[0] > Fraction(1, 8) > sizes[2]
    sched = optcc(topo, Fraction(2**24), pieces=2)
    assert "0/4x:17/4096" in sched.meta_get("classes").split(",")
    out, inn = _net_bytes(sched, 8)
    for tally in (out, inn):
        assert all(tally[1, r] == Fraction(1, 8) for r in range(8))
        assert all(tally[0, r] == 0 for r in (0, 1))


@settings(max_examples=25, deadline=None)
@given(data=st.data(), servers=st.integers(4, 9), gpus=st.sampled_from([2, 4, 8]))
def test_crossed_parts_never_load_the_busiest_nic_more(data, servers: int, gpus: int) -> None:
    """The crossed parts only add choices to the sizes' program: with them the busiest
    NIC's time is never more than without (rounding aside), and the plan OptCC runs is
    the crossed one from three healthy servers on."""
    from resilientcc.schedules.hier_ring import UNLIKE_CROSS_MIN_HEALTHY, _unlike_plan

    view = tuple(server_view(_draw_unlike(data, servers, gpus)))
    if hier_ring_blocker(view) is not None:
        return
    crossed, straight = _unlike_plan(view, True), _unlike_plan(view, False)
    assert sum(crossed[1]) + sum(size for _, _, size in crossed[2]) == 1
    assert crossed[3] <= straight[3] * (1 + 2e-3)
    if sum(sv.healthy for sv in view) >= UNLIKE_CROSS_MIN_HEALTHY:
        assert unlike_crossed(view)


def test_crossed_parts_turn_the_direct_schedule_into_the_ring() -> None:
    """5 × 4 GPUs, two NICs lost beside every NIC at half speed, 64 MiB: without crossed
    parts the busiest NIC took 9.1 % longer than the water-filling and OptCC ran the direct
    schedule (1.97 × the bound); with them the ring runs, within 1.35 × the bound, and Z3
    proves it (one piece)."""
    topo = apply_fail_specs(hierarchical(5, 4), ["0:2", "1:x1/2"])
    size = Fraction(2**26)
    s = optcc(topo, size)
    assert s.meta_get("variant") == "hierarchical ring"
    bound = float(lower_bound(topo, size).seconds)
    assert bound <= simulate(s, topo).time_s <= 1.35 * bound
    r = verify(optcc(topo, Fraction(2**20), pieces=1))
    assert r.verdict == PROVED, str(r)


def test_a_rail_lost_with_no_rail_kept_in_common_is_dealt_in_turn() -> None:
    """Rail 0 lost on two servers that kept no rail in common: its part is one class,
    each server deals its owners' shards over its alive rails anew every piece (so over
    the pieces each alive rail carries some), and Z3 proves the schedule (5 × 4 GPUs,
    3 pieces)."""
    topo = apply_fail_specs(hierarchical(5, 4), ["0:nic0,nic1", "1:nic0,nic2,nic3"])
    view = server_view(topo)
    assert unlike_splits(view)[0] == [0]
    s = optcc(topo, Fraction(2**20), hier_ring=True, pieces=3)
    (part,) = [cl.size for cl in hier_ring_classes(view) if cl.rail == 0]
    assert part not in {cl.size for cl in hier_ring_classes(view) if cl.rail != 0}
    rail0 = {c.index for c in s.chunks if c.size == part / 3 / 3}  # 3 pieces, 3 owners
    sent = Counter(t.channel for t in s.transfers if t.src // 4 == 0 and t.dst // 4 >= 2)
    assert rail0 and sent[2] and sent[3] and not sent[0] and not sent[1]
    # each owner gets server 0's partial of rail 0 on another rail from piece to piece
    rails_to: dict[int, list[int]] = {}
    for t in s.transfers:
        if t.src // 4 == 0 and t.dst // 4 >= 2 and t.chunk in rail0:
            rails_to.setdefault(t.dst // 4, []).append(t.channel)
    assert sorted(rails_to) == [2, 3, 4]
    assert all(len(set(rails)) > 1 for rails in rails_to.values())
    r = verify(s)
    assert r.verdict == PROVED, str(r)


def test_unlike_sizes_spread_where_a_degraded_server_binds() -> None:
    """Where a degraded server's NICs bind (6 of 8 lost beside every NIC at half speed:
    its two NICs carry ``M``, 4 · M per server bandwidth, the bound), every sizing is
    optimal for the busiest NIC; the second program spreads the parts over every rail so
    that the busiest healthy NIC carries least (the first alone left four rails empty)."""
    view = server_view(apply_fail_specs(hierarchical(8, 8), ["0:6", "1:x1/2"]))
    sizes, busy = unlike_sizes(view)
    assert busy * 50e9 * 8 == pytest.approx(4.0, rel=1e-9)
    assert all(x > 0 for x in sizes) and sum(sizes) == 1
    # the two rails alive on server 0 carry its dealt parts, so less of their own
    assert sizes[6] == sizes[7] < min(sizes[:6])


def test_sliver_partials_wait_for_the_stragglers_pace() -> None:
    """The healthy servers' partials of piece ``k``'s sliver wait for the straggler's
    partials of piece ``k − sliver_gate`` (default: the network window plus the
    sliver's lag), so they cannot fill its ingress with pieces far ahead: 6 × 4 GPUs, 1
    NIC lost, 1 GiB, 1.051 × the bound without the gate, 1.023 with it when measured
    (4 GiB: 1.104 and 1.023)."""
    from resilientcc.sim import simulate

    topo = fail_nics(hierarchical(6, 4), 0, 1)
    size = Fraction(2**30)
    s = optcc(topo, size, check=False)
    gate = int(s.meta_get("sliver_gate"))
    assert gate == int(s.meta_get("net_window")) + int(s.meta_get("own_lag"))
    pieces = int(s.meta_get("pieces"))

    def gated(sched) -> tuple[int, int]:
        """(sliver partials into the straggler, those that wait for one of its sends)"""
        ids = {t.id: t for t in sched.transfers}
        into = [
            t
            for t in sched.transfers
            if t.dst // 4 == 0 and t.src // 4 != 0 and t.op == "reduce"  # only slivers
        ]
        waiting = [t for t in into if any(ids[d].src // 4 == 0 for d in t.deps)]
        return len(into), len(waiting)

    # every piece's sliver partials but the first `gate` pieces' wait
    total, waiting = gated(s)
    assert total % pieces == 0 and waiting == total // pieces * (pieces - gate)
    ungated = optcc(topo, size, check=False, sliver_gate=0)
    assert ungated.meta_get("sliver_gate") is None
    assert gated(ungated) == (total, 0)
    bound = float(lower_bound(topo, size).seconds)
    t, t0 = simulate(s, topo).time_s, simulate(ungated, topo).time_s
    assert bound <= t < 0.99 * t0


def test_sliver_gate_schedules_are_proved() -> None:
    """Z3 proves a gated sliver schedule lossless, race-free and deadlock-free (4 × 4
    GPUs, 1 NIC lost, 4 pieces, a gate of one piece)."""
    from resilientcc.verify import PROVED, verify

    topo = fail_nics(hierarchical(4, 4), 0, 1)
    s = optcc(
        topo, Fraction(2**20), pieces=4, hier_ring=True, sliver_gate=1, network=RING, nvlink_rs=RING
    )
    assert s.meta_get("sliver_gate") == "1"
    r = verify(s)
    assert r.verdict == PROVED, str(r)


def test_degraded_servers_that_would_own_nothing_alike_stay_as_they_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One server down to 2 of 8 NICs sets the water-filling, so seeing three more degraded
    servers alike with it (on its two rails) costs the water-filling nothing; but none of
    them would own anything, and with more degraded servers than healthy ones the
    decoupled servers then share two rails. Kept as they are, each decoupled on the ring:
    6 servers, 256 MiB, 2.10 -> 1.07 x the bound, ahead of R2CC (1.47)."""
    import resilientcc.schedules.optcc as optcc_module

    size = Fraction(2**28)
    topo = apply_fail_specs(hierarchical(6, 8), ["0:nic2", "1:nic5x3/4", "2:2", "3:6"])
    view = optcc_module.optcc_view(topo, size)
    assert [len(sv.alive) for sv in view[:4]] == [7, 7, 6, 2]  # NIC 5 at 3/4 left out
    sched = optcc(topo, size)
    assert sched.meta_get("variant") == "hierarchical ring"
    bound = float(lower_bound(topo, size).seconds)
    t = simulate(sched, topo).time_s
    assert bound <= t < 1.2 * bound
    assert t < simulate(r2cc_allreduce(topo, size, check=False), topo).time_s
    # seen alike (the view without this rule): every degraded server on rails 6 and 7
    monkeypatch.setattr(optcc_module, "_alike_buys_nothing", lambda servers, view: False)
    alike = optcc_module.optcc_view(topo, size)
    assert all(sv.alive == (6, 7) for sv in alike[:4])
    slow = simulate(optcc(topo, size, check=False), topo).time_s
    assert slow > 1.5 * t
    monkeypatch.undo()
    # as many healthy servers as degraded ones or more: still seen alike (8 servers, half
    # the NICs lost on one and one NIC on another: 1.030 x the bound at 1 GiB seen alike,
    # 1.105 decoupled as they are)
    eight = optcc_module.optcc_view(apply_fail_specs(hierarchical(8, 8), ["0:4", "1:1"]), size)
    assert eight[1].alive == eight[0].alive


def test_straggler_all_gathers_one_way_where_it_owns_a_sliver() -> None:
    """6 servers, 2 of 8 NICs lost on one, 256 MiB: the straggler owns a sliver, and its
    NVLink all-gathers both ways took 1.1715 × the bound against 1.1196 one way (the
    default from 256 MiB, :func:`default_straggler_two_way`)."""
    from resilientcc.bounds import lower_bound
    from resilientcc.schedules.hier_ring import default_straggler_two_way
    from resilientcc.schedules.optcc import optcc
    from resilientcc.sim import simulate
    from resilientcc.topology import apply_fail_specs, hierarchical

    t = apply_fail_specs(hierarchical(6, 8), ["0:2"])
    size = Fraction(2**28)
    one_way = optcc(t, size)
    assert one_way.meta_get("variant") == "hierarchical ring"
    assert one_way.meta_get("straggler_two_way") == "0"
    both = optcc(t, size, straggler_two_way=True, check=False)
    assert both.meta_get("straggler_two_way") == "1"
    bound = float(lower_bound(t, size).seconds)
    fast, slow = simulate(one_way, t).time_s, simulate(both, t).time_s
    assert bound <= fast < 0.97 * slow
    # owning nothing, or below 256 MiB, both ways as before
    assert default_straggler_two_way(Fraction(0), size)
    assert default_straggler_two_way(Fraction(1, 20), Fraction(2**27))
