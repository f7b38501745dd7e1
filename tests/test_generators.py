"""Every generator is an exact, race-free AllReduce with FIFO-consistent ids (p = 2…64)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resilientcc.errors import InputError, ScheduleError
from resilientcc.schedules import executor
from resilientcc.schedules._build import Builder, binomial_order, server_view
from resilientcc.schedules.generators import GENERATORS, generate
from resilientcc.schedules.hierarchical import hierarchical as hier_gen
from resilientcc.schedules.ir import COPY, Schedule
from resilientcc.topology import fail_nics, hierarchical, scale_server_nics, switch_model
from resilientcc.topology.model import Topology

MINE = ("hierarchical", "r2cc_allreduce", "optcc")


def race_free(s: Schedule) -> None:
    """Assert: ids are a topological order, and accesses to a (rank, chunk) with a write are ordered."""
    n = len(s.transfers)
    pos = {t.id: i for i, t in enumerate(sorted(s.transfers, key=lambda t: t.id))}
    for t in s.transfers:
        assert all(d < t.id for d in t.deps), f"transfer {t.id} depends on a later id"
    # reachability by bitsets, in id order
    reach = [0] * n
    for t in sorted(s.transfers, key=lambda t: t.id):
        r = 0
        for d in t.deps:
            r |= reach[pos[d]] | (1 << pos[d])
        reach[pos[t.id]] = r
    touches: dict[tuple[int, int], list[tuple[int, bool]]] = {}
    for t in s.transfers:
        touches.setdefault((t.src, t.chunk), []).append((pos[t.id], False))
        touches.setdefault((t.dst, t.chunk), []).append((pos[t.id], True))
    for key, acc in touches.items():
        for i, (a, wa) in enumerate(acc):
            for b, wb in acc[i + 1 :]:
                if a == b or not (wa or wb):
                    continue
                lo, hi = min(a, b), max(a, b)
                assert reach[hi] >> lo & 1, f"unordered accesses to {key}: transfers {lo}, {hi}"


def cluster(
    servers: int, gpus: int, fails: list[tuple[int, int]], scale: Fraction | None
) -> Topology:
    t = hierarchical(servers, gpus)
    lost: dict[int, int] = {}
    for s, k in fails:  # keep at least one NIC alive on every server
        if gpus > 1 and servers > 1 and s < servers and k > 0 and lost.get(s, 0) + k < gpus:
            t = fail_nics(t, s, k)
            lost[s] = lost.get(s, 0) + k
    if scale is not None and servers > 1:
        t = scale_server_nics(t, servers - 1, scale)
    return t


#: message sizes: a byte, odd and fractional byte counts (exact non-uniform chunks), and
#: sizes at which OptCC's pipeline depth grows
SIZES = st.one_of(
    st.integers(1, 4096).map(Fraction),
    st.sampled_from([Fraction(10**6, 3), Fraction(3_000_007), Fraction(2**20), Fraction(2**26)]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    servers=st.integers(2, 8),
    gpus=st.integers(1, 8),
    fails=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 7)), max_size=2),
    scale=st.sampled_from([None, Fraction(1, 2), Fraction(3, 4)]),
    algo=st.sampled_from(MINE),
    size=SIZES,
)
def test_generators_exact_on_random_clusters(servers, gpus, fails, scale, algo, size):
    topo = cluster(servers, gpus, fails, scale)
    s = generate(algo, topo, size)  # check=True: the executor runs inside
    assert s.topology == topo.shape_fingerprint
    assert s.ranks == servers * gpus
    assert s.size == size and sum(c.size for c in s.chunks) == 1  # fractions of the buffer
    assert executor.execute(s).ok


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    servers=st.integers(2, 8),
    gpus=st.integers(1, 8),
    fails=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 7)), max_size=2),
    algo=st.sampled_from(["ring", "balance"]),
    size=SIZES,
)
def test_baseline_generators_exact_on_random_clusters(servers, gpus, fails, algo, size):
    topo = cluster(servers, gpus, fails, None)
    s = generate(algo, topo, size)
    assert s.size == size and sum(c.size for c in s.chunks) == 1  # fractions of the buffer
    assert executor.execute(s).ok


@pytest.mark.parametrize("algo", sorted(GENERATORS))
@pytest.mark.parametrize("servers,gpus,lost", [(2, 2, 1), (3, 4, 2), (4, 8, 4)])
def test_all_generators_exact_and_race_free(algo, servers, gpus, lost):
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    s = generate(algo, topo, Fraction(2**20))
    assert executor.execute(s).ok
    if len(s.transfers) <= 6000:
        race_free(s)


@pytest.mark.parametrize("algo", MINE)
def test_pipelined_sizes_race_free(algo):
    topo = fail_nics(hierarchical(3, 4), 1, 2)
    s = generate(algo, topo, Fraction(2**30))
    assert executor.execute(s).ok
    race_free(s)


@pytest.mark.parametrize("algo", MINE)
def test_switch_model_and_single_server(algo):
    for topo in (switch_model([100, 100, 50, 100]), hierarchical(1, 4), hierarchical(2, 1)):
        s = generate(algo, topo, Fraction(10**6))
        assert executor.execute(s).ok
        race_free(s)


@pytest.mark.parametrize("algo", sorted(GENERATORS))
@pytest.mark.parametrize("gpus,nics", [(6, 3), (2, 2), (4, 1)])
def test_single_server_with_every_nic_down(algo, gpus, nics):
    # no network is needed, so no NIC is: OptCC and R2CC divided by the server's zero
    # bandwidth (found by a random audit); R2CC now runs the NVLink ring, OptCC the
    # tree packing over NVLink (from 3 GPUs; on 2 the ring)
    topo = fail_nics(hierarchical(1, gpus, nics_per_server=nics), 0, nics)
    s = generate(algo, topo, Fraction(10**6 + 3))
    assert executor.execute(s).ok
    race_free(s)
    if algo == "optcc":
        rule = s.meta_get("variant_rule")
        if gpus >= 3:
            assert s.meta_get("variant") == "tree packing"
            assert rule.startswith("one server, 3 to 40 GPUs: reduce and broadcast trees")
        else:
            assert rule == "one server, no network: NCCL's ring over NVLink"


@pytest.mark.parametrize("algo", MINE)
def test_bad_options_and_sizes(algo):
    topo = hierarchical(2, 2)
    with pytest.raises(ScheduleError):
        generate(algo, topo, Fraction(0))
    with pytest.raises(ScheduleError):
        generate(algo, topo, Fraction(1), bogus=1)


@pytest.mark.parametrize("algo", sorted(GENERATORS))
def test_sizes_beyond_an_exbibyte_are_refused(algo):
    """Every generator refuses sizes whose simulated times would overflow floats."""
    with pytest.raises(InputError, match="too large"):
        generate(algo, hierarchical(2, 2), Fraction(2**60 + 1))


def test_hierarchical_structure():
    topo = hierarchical(4, 8)
    s = hier_gen(topo, Fraction(2**30))
    # intra RS + AG: 2·7 steps × 8 GPUs × 4 groups per server ... and rail rings
    net = [t for t in s.transfers if t.src // 8 != t.dst // 8]
    assert {t.channel for t in net} == set(range(8))
    # each rail ring: 2(n−1) steps × n GPUs, one chunk each
    assert len(net) == 8 * 2 * 3 * 4
    # GPU g of each server only talks to GPU g of the others over the network
    assert all(t.src % 8 == t.dst % 8 for t in net)


def test_builder_auto_deps_make_program_order():
    b = Builder("t", 3)
    c = b.chunk(Fraction(1))
    a = b.add(0, 1, c)  # 1 += 0
    d = b.add(2, 1, c)  # 1 += 2: after a (write-write)
    e = b.add(1, 0, c, COPY)  # read 1 after both; write 0 after a read it
    f = b.add(1, 2, c, COPY)
    s = b.build(Fraction(8), topology=None)
    by = {t.id: t for t in s.transfers}
    assert s.transfers[1].deps == (0,)
    assert set(by[2].deps) == {0, 1} and set(by[3].deps) == {1}
    assert (a, d, e, f) == (0, 1, 2, 3)
    race_free(s)


def test_binomial_order_depth():
    for n in range(1, 17):
        edges = binomial_order(n)
        assert len(edges) == n - 1
        depth = {0: 0}
        for c, p in reversed(edges):
            depth[c] = depth[p] + 1
        assert max(depth.values()) <= int(np.ceil(np.log2(n)))


def test_server_view_health():
    t = fail_nics(hierarchical(3, 8), 1, 2)
    sv = server_view(t)
    assert [s.healthy for s in sv] == [True, False, True]
    assert sv[1].alive == (2, 3, 4, 5, 6, 7)
    assert sv[1].egress == sv[0].egress * Fraction(6, 8)
    assert sv[0].rail_rank(3) == 3 and sv[2].rail_rank(0) == 16


def test_builder_arrange_gives_busy_positions_to_idle_gpus():
    """A binomial reduce's root keeps its place; the 2-child position goes to the least-received GPU."""

    b = Builder("t", 8)
    x = b.chunk(Fraction(1))
    # ranks 1..6 have received a lot, rank 7 nothing
    for r in range(1, 7):
        b.add(0, r, x, "copy", nbytes=100.0)
    out = b.arrange(list(range(8)), "reduce")
    assert out[0] == 0 and sorted(out) == list(range(8))
    children = [0] * 8
    for _c, p in binomial_order(8):
        children[p] += 1
    busiest = max(range(1, 8), key=lambda i: children[i])
    assert out[busiest] == 7
    # bcast: by sends; rank 0 sent 600 bytes so it never gets a busy free position
    out_b = b.arrange([3, 0, 1, 2, 4, 5, 6, 7], "bcast")
    assert out_b[0] == 3 and out_b[busiest] != 0
