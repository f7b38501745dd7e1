"""Transfers of several consecutive chunks (``Transfer.count``), through every layer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.errors import ScheduleError
from resilientcc.schedules import execute
from resilientcc.schedules._build import Builder, chunk_runs
from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
from resilientcc.schedules.msccl import from_msccl_xml, to_msccl_xml
from resilientcc.schedules.serialize import schedule_from_dict, schedule_to_dict
from resilientcc.sim import simulate
from resilientcc.topology import hierarchical
from resilientcc.verify import verify


def grouped_ring(p: int, per_group: int, merge: int) -> Schedule:
    """A ring AllReduce over ``p`` ranks whose groups are ``per_group`` consecutive chunks."""
    b = Builder("grouped", p)
    groups = [[b.chunk(Fraction(1, p * per_group)) for _ in range(per_group)] for _ in range(p)]
    ring = list(range(p))
    b.ring_reduce_scatter(ring, groups, 0, merge=merge)
    b.ring_all_gather(ring, groups, 1, merge=merge)
    return b.build(Fraction(2**20), topology=None)


def test_runs_cover_the_chunks_in_order():
    assert chunk_runs((7, 3, 4, 5, 9, 8)) == [(3, 3), (7, 3)]
    assert chunk_runs(range(10), longest=4) == [(0, 3), (3, 3), (6, 4)]
    assert chunk_runs(()) == []


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 40), max_size=25), st.integers(1, 8))
def test_runs_property(chunks, longest):
    runs = chunk_runs(chunks, longest)
    covered = [c for first, k in runs for c in range(first, first + k)]
    assert covered == sorted(chunks)
    assert all(1 <= k <= longest for _, k in runs)
    # a maximal run is cut into parts that differ by at most one chunk
    for first, k in chunk_runs(chunks):
        parts = [n for f, n in runs if first <= f < first + k]
        assert max(parts) - min(parts) <= 1


@pytest.mark.parametrize("p,per_group,merge", [(2, 3, 3), (4, 3, 3), (5, 4, 2), (3, 7, 4)])
def test_merged_ring_is_exact_with_fewer_transfers(p, per_group, merge):
    merged = grouped_ring(p, per_group, merge)
    single = grouped_ring(p, per_group, 1)
    assert execute(merged).ok
    parts = -(-per_group // merge)
    assert len(merged.transfers) == 2 * p * (p - 1) * parts
    assert len(single.transfers) == 2 * p * (p - 1) * per_group
    # the same bytes leave every rank
    for r in range(p):
        sent = [
            sum(s.transfer_bytes(t) for t in s.transfers if t.src == r) for s in (merged, single)
        ]
        assert sent[0] == sent[1]


def test_executor_applies_every_chunk_of_a_run():
    s = grouped_ring(3, 4, 4)
    assert max(t.count for t in s.transfers) == 4
    # one chunk short on one reduce: exactly that chunk goes wrong
    i, t = next((i, t) for i, t in enumerate(s.transfers) if t.op == "reduce")
    ts = list(s.transfers)
    ts[i] = dataclasses.replace(t, count=t.count - 1)
    res = execute(dataclasses.replace(s, transfers=tuple(ts)))
    assert not res.ok
    assert {v.chunk for v in res.violations} == {t.chunk + t.count - 1}


@pytest.mark.parametrize("count", [0, 3])
def test_structure_rejects_runs_past_the_end(count):
    s = Schedule(
        "x", 2, Fraction(8), uniform_chunks(2), (Transfer(0, 0, 1, 0, "copy", count=count),)
    )
    with pytest.raises(ScheduleError, match=r"transfer 0: .* chunks from chunk 0"):
        s.check_structure()


def test_json_round_trip_keeps_counts_and_old_rows_load():
    s = grouped_ring(4, 3, 3)
    d = schedule_to_dict(s)
    assert {len(row) for row in d["transfers"]} == {9}
    assert schedule_from_dict(d) == s
    single = grouped_ring(4, 3, 1)
    assert {len(row) for row in schedule_to_dict(single)["transfers"]} == {8}
    bad = schedule_to_dict(s)
    bad["transfers"][0][8] = 99
    with pytest.raises(ScheduleError, match=r"transfers\[0\]|transfer 0"):
        schedule_from_dict(bad)


def test_msccl_round_trip_and_cnt():
    s = grouped_ring(4, 3, 3)
    xml = to_msccl_xml(s)
    assert from_msccl_xml(xml) == s
    # a run of 3 of the 12 equal chunks is one step of cnt 3
    assert 'cnt="3"' in xml and 'cnt="1"' not in xml
    # read without the round-trip attributes: the runs come back as runs
    foreign = from_msccl_xml(to_msccl_xml(s, roundtrip=False))

    def moves(x: Schedule) -> list[tuple[int, int, int, int, str]]:
        return sorted((t.src, t.dst, t.chunk, t.count, t.op) for t in x.transfers)

    assert moves(foreign) == moves(s)


def test_simulated_run_costs_its_bytes_once():
    """A run of k chunks is one flow of k chunks' bytes: one latency, the same bandwidth."""
    topo = hierarchical(2, 1)
    size = Fraction(2**26)
    whole = Schedule("a", 2, size, uniform_chunks(1), (Transfer(0, 0, 1, 0, "copy"),))
    run = Schedule("b", 2, size, uniform_chunks(4), (Transfer(0, 0, 1, 0, "copy", count=4),))
    one = Schedule("c", 2, size, uniform_chunks(4), (Transfer(0, 0, 1, 0, "copy"),))
    t_whole, t_run, t_one = (simulate(x, topo).time_s for x in (whole, run, one))
    assert t_run == pytest.approx(t_whole, rel=1e-12)
    assert t_one < t_run
    assert np.array_equal(simulate(run, topo).link_bytes, simulate(whole, topo).link_bytes)


def test_verifier_proves_merged_and_rejects_a_short_run():
    s = grouped_ring(3, 2, 2)
    res = verify(s, failover=True)
    assert res.proved, str(res)
    assert res.result("failover_lossless") is not None
    i, t = next((i, t) for i, t in enumerate(s.transfers) if t.op == "copy")
    ts = list(s.transfers)
    ts[i] = dataclasses.replace(t, count=1)
    bad = verify(dataclasses.replace(s, transfers=tuple(ts)))
    assert (bad.verdict, bad.property) == ("violated", "lossless")
    assert bad.counterexample is not None
    assert bad.counterexample.chunk == t.chunk + 1


def test_hier_ring_merge_moves_the_same_bytes_in_fewer_transfers():
    from resilientcc.schedules._build import server_view
    from resilientcc.schedules.hier_ring import hier_ring
    from resilientcc.topology import fail_nics

    topo = fail_nics(hierarchical(5, 4), 0, 2)
    size = Fraction(2**24)
    out = []
    for merge in (1, 2, 4):
        b = Builder("optcc", topo.num_ranks)
        hier_ring(b, server_view(topo), 3, size, merge=merge)
        s = b.build(size, topology=topo.shape_fingerprint)  # checked by the executor
        out.append((s, simulate(s, topo)))
    (s1, r1), (s2, r2), (s4, r4) = out
    assert len(s4.transfers) < len(s2.transfers) < len(s1.transfers)
    assert max(t.count for t in s4.transfers) == 4
    assert np.allclose(r2.link_bytes, r1.link_bytes) and np.allclose(r4.link_bytes, r1.link_bytes)


# --- race tracking by intervals of chunks (Builder(runs=True)) -------------------------

_OPS = st.lists(
    st.tuples(
        st.integers(0, 3),  # src
        st.integers(0, 3),  # dst
        st.integers(0, 11),  # first chunk
        st.integers(1, 6),  # count
        st.sampled_from(["reduce", "copy"]),
    ).filter(lambda op: op[0] != op[1] and op[2] + op[3] <= 12),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(_OPS)
def test_run_tracking_adds_the_same_dependencies_as_per_chunk_tracking(ops):
    # the interval tracker must keep exactly the per-chunk state: every transfer gets the
    # same deps (last writers of what it reads and writes, readers of what it writes)
    per_chunk, by_runs = Builder("a", 4), Builder("b", 4, runs=True)
    for b in (per_chunk, by_runs):
        for _ in range(12):
            b.chunk(Fraction(1, 12))
        for src, dst, first, count, op in ops:
            b.add(src, dst, first, op, 0, count=count)
    assert [set(x) for x in by_runs._deps] == [set(x) for x in per_chunk._deps]
    # and they are right, checked chunk by chunk from scratch: a transfer waits for the
    # last writes of (src, c) and (dst, c) and for the reads of (dst, c) since
    for i, (src, dst, first, count, _op) in enumerate(ops):
        want = set()
        for c in range(first, first + count):
            touching = [j for j in range(i) if ops[j][2] <= c < ops[j][2] + ops[j][3]]
            for rank in (src, dst):
                writes = [j for j in touching if ops[j][1] == rank]
                if writes:
                    want.add(writes[-1])
            since = max((j for j in touching if ops[j][1] == dst), default=-1)
            want.update(j for j in touching if j > since and ops[j][0] == dst)
        assert set(by_runs._deps[i]) == want, (i, ops[: i + 1])


def _forced_builder(runs: bool) -> Callable[..., Builder]:
    """``Builder`` with race tracking by runs on or off, whatever the caller asks."""
    return lambda name, ranks, **_: Builder(name, ranks, runs=runs)


@pytest.mark.parametrize(
    "servers,lost,options",
    [
        (6, 1, {"hier_ring": True, "nvlink_merge": 3}),
        (5, 4, {"hier_ring": True, "nvlink_merge": 4, "network": "halving"}),
        (4, 2, {"hier_ring": True}),
    ],
)
def test_optcc_is_the_same_schedule_with_either_tracker(monkeypatch, servers, lost, options):
    import resilientcc.schedules.optcc as optcc_module
    from resilientcc.schedules.optcc import optcc
    from resilientcc.topology import fail_nics

    topo = fail_nics(hierarchical(servers, 8), 0, lost)
    size = Fraction(2**26)
    made = []
    for runs in (False, True):
        monkeypatch.setattr(optcc_module, "Builder", _forced_builder(runs))
        made.append(optcc(topo, size, **options))
    assert made[0].transfers == made[1].transfers
    assert made[0].chunks == made[1].chunks
    assert execute(made[1]).ok
