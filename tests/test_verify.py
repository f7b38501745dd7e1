"""Unit tests of resilientcc.verify on hand-written schedules (known answers + hypothesis)."""

from __future__ import annotations

import dataclasses
import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.errors import ScheduleError, VerificationError
from resilientcc.schedules.executor import execute
from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
from resilientcc.verify import (
    PROVED,
    UNKNOWN,
    VIOLATED,
    check_deadlock_free,
    check_lossless,
    check_race_free,
    race_pairs_graph,
    verify,
)
from resilientcc.verify.encode import ScheduleGraph
from resilientcc.verify.examples import chain_allreduce, ring_allreduce


def sched(p: int, ts: list[Transfer], nchunks: int = 1) -> Schedule:
    return Schedule("t", p, Fraction(64), uniform_chunks(nchunks), tuple(ts))


def with_transfers(s: Schedule, ts: list[Transfer]) -> Schedule:
    return dataclasses.replace(s, transfers=tuple(ts))


@pytest.mark.parametrize("p", [2, 3, 5, 8])
@pytest.mark.parametrize("channels", [1, 3])
def test_reference_schedules_proved(p: int, channels: int) -> None:
    for s in (ring_allreduce(p, channels), chain_allreduce(p)):
        r = verify(s)
        assert r.verdict == PROVED, str(r)
        assert r.property == "all"
        assert {x.property for x in r.results} == {"lossless", "race_free", "deadlock_free"}
        assert r.counterexample is None


def test_double_reduce_found_with_multiplicity() -> None:
    ts = [Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "reduce", deps=(0,))]
    r = check_lossless(sched(2, ts))
    assert r.verdict == VIOLATED
    cex = r.counterexample
    assert cex is not None
    assert (cex.rank, cex.chunk, cex.contribution, cex.multiplicity) == (0, 0, 0, 2)
    assert "counted 2 times" in str(cex)
    ex = execute(sched(2, ts))
    assert any(
        (v.rank, v.chunk, v.contribution, v.multiplicity) == (0, 0, 0, 2) for v in ex.violations
    )


def test_missing_transfer_gives_multiplicity_zero() -> None:
    s = ring_allreduce(4)
    ts = [t for t in s.transfers if t.id != len(s.transfers) - 1]
    r = verify(with_transfers(s, ts))
    assert r.verdict == VIOLATED and r.property == "lossless"
    assert r.counterexample is not None and r.counterexample.multiplicity == 0


def test_race_found_and_both_transfers_reported() -> None:
    # copy back to 0 does not wait for the reduce into 1
    ts = [Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "copy")]
    r = check_race_free(sched(2, ts))
    assert r.verdict == VIOLATED
    assert r.counterexample is not None
    assert {t.id for t in r.counterexample.transfers} == {0, 1}
    assert r.counterexample.rank == 1
    assert race_pairs_graph(sched(2, ts))


def test_write_write_race() -> None:
    ts = [
        Transfer(0, 0, 2, 0, "reduce"),
        Transfer(1, 1, 2, 0, "reduce"),
        Transfer(2, 2, 0, 0, "copy", deps=(0, 1)),
        Transfer(3, 2, 1, 0, "copy", deps=(0, 1)),
    ]
    s = sched(3, ts)
    assert execute(s).ok
    r = verify(s)
    assert r.verdict == VIOLATED and r.property == "race_free"
    assert r.counterexample is not None
    assert {t.id for t in r.counterexample.transfers} == {0, 1}


def test_fifo_order_counts_as_happens_before() -> None:
    # #1 reads rank 1 only after #0 (same connection 1->2, FIFO) was issued, and #0
    # reads rank 1 after #x wrote it: the FIFO edge makes #2's read safe.
    ts = [
        Transfer(0, 0, 1, 0, "reduce"),
        Transfer(1, 1, 2, 0, "reduce", deps=(0,)),
        Transfer(2, 2, 0, 0, "copy", deps=(1,)),
        Transfer(3, 2, 1, 0, "copy", deps=(1,)),
    ]
    assert verify(sched(3, ts)).verdict == PROVED


def test_deadlock_cycle_from_fifo_and_deps() -> None:
    # #0 and #1 share connection 0->1 (FIFO: #0 before #1) but #0 waits for #2 which waits for #1
    ts = [
        Transfer(0, 0, 1, 0, "reduce", deps=(2,)),
        Transfer(1, 0, 1, 1, "reduce"),
        Transfer(2, 1, 0, 1, "copy", deps=(1,)),
    ]
    s = sched(2, ts, nchunks=2)
    r = check_deadlock_free(s)
    assert r.verdict == VIOLATED
    assert r.counterexample is not None
    assert {t.id for t in r.counterexample.transfers} == {0, 1, 2}
    assert any("FIFO" in line for line in r.counterexample.trace)
    rep = verify(s)
    assert rep.verdict == VIOLATED and rep.property == "deadlock_free"
    assert [x.property for x in rep.results] == ["deadlock_free"]


def test_dep_cycle_is_a_deadlock() -> None:
    ts = [Transfer(0, 0, 1, 0, "reduce", deps=(1,)), Transfer(1, 1, 0, 0, "copy", deps=(0,))]
    r = verify(sched(2, ts))
    assert r.verdict == VIOLATED and r.property == "deadlock_free"
    assert ScheduleGraph(sched(2, ts)).find_cycle()


def test_unknown_is_not_violated() -> None:
    r = verify(ring_allreduce(4), timeout_s=1e-9)
    assert r.verdict == UNKNOWN
    assert r.counterexample is None
    assert all(x.verdict == UNKNOWN for x in r.results)
    assert "timeout" in r.results[0].detail


def test_bad_arguments() -> None:
    with pytest.raises(VerificationError):
        verify(ring_allreduce(3), properties=("nonsense",))
    with pytest.raises(VerificationError):
        verify(ring_allreduce(3), failures=3)
    bad = sched(2, [Transfer(0, 0, 0, 0, "reduce")])
    with pytest.raises(ScheduleError):
        verify(bad)


def test_report_text_and_dict() -> None:
    ts = [Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "reduce", deps=(0,))]
    r = verify(sched(2, ts))
    d = r.to_dict()
    assert d["verdict"] == "violated" and d["property"] == "lossless"
    assert d["counterexample"]["multiplicity"] == 2
    assert "lossless violated" in str(r)
    assert r.result("lossless") is not None and r.result("failover_lossless") is None


# ----------------------------------------------------------------- hypothesis: agreement


@st.composite
def random_schedules(draw: st.DrawFn) -> Schedule:
    p = draw(st.integers(2, 4))
    nchunks = draw(st.integers(1, 2))
    n = draw(st.integers(1, 9))
    ts = []
    for i in range(n):
        src = draw(st.integers(0, p - 1))
        dst = draw(st.integers(0, p - 2))
        dst = dst if dst < src else dst + 1
        deps = (
            tuple(sorted(set(draw(st.lists(st.integers(0, max(0, i - 1)), max_size=2)))))
            if i
            else ()
        )
        ts.append(
            Transfer(
                i,
                src,
                dst,
                draw(st.integers(0, nchunks - 1)),
                draw(st.sampled_from(["reduce", "copy"])),
                deps,
                draw(st.integers(0, 1)),
            )
        )
    return Schedule("h", p, Fraction(64), uniform_chunks(nchunks), tuple(ts))


@settings(max_examples=60, deadline=None)
@given(random_schedules())
def test_z3_agrees_with_executor_and_graph(s: Schedule) -> None:
    lossless = check_lossless(s)
    assert lossless.verdict == (PROVED if execute(s).ok else VIOLATED)
    race = check_race_free(s)
    assert race.verdict == (VIOLATED if race_pairs_graph(s) else PROVED)
    if race.counterexample is not None:
        a, b = race.counterexample.transfers
        unordered = {(x.tid, y.tid) for x, y in race_pairs_graph(s)}
        assert (a.id, b.id) in unordered or (b.id, a.id) in unordered


@settings(max_examples=30, deadline=None)
@given(random_schedules(), st.integers(0, 8))
def test_reversed_dep_agrees_with_cycle_search(s: Schedule, pick: int) -> None:
    # add a back edge to create a possible cycle; Z3 and the graph search must agree
    ts = list(s.transfers)
    t = ts[pick % len(ts)]
    last = ts[-1]
    if last.id != t.id:
        ts[ts.index(t)] = dataclasses.replace(t, deps=(*t.deps, last.id))
    s2 = with_transfers(s, ts)
    r = check_deadlock_free(s2)
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(t.id for t in s2.transfers)
    g.add_edges_from((d, t.id) for t in s2.transfers for d in t.deps)
    conns: dict[tuple[int, int, int], list[int]] = {}
    for t in sorted(s2.transfers, key=lambda t: t.id):
        conns.setdefault((t.src, t.dst, t.channel), []).append(t.id)
    for ids in conns.values():
        g.add_edges_from(itertools.pairwise(ids))
    has_cycle = not nx.is_directed_acyclic_graph(g)
    assert has_cycle == (ScheduleGraph(s2).order is None)
    assert r.verdict == (VIOLATED if has_cycle else PROVED)


def test_cycle_without_deadlock_check_is_unknown_not_proved() -> None:
    ts = [Transfer(0, 0, 1, 0, "reduce", deps=(1,)), Transfer(1, 1, 0, 0, "copy", deps=(0,))]
    r = verify(sched(2, ts), properties=("race_free",))
    assert r.verdict == UNKNOWN and r.property == "race_free"


def brute_force_race(s: Schedule) -> bool:
    """Every conflicting pair of accesses, ordered or not, by networkx reachability."""
    import networkx as nx

    g = nx.DiGraph()
    for t in s.transfers:
        g.add_edge(("S", t.id), ("E", t.id))
        for d in t.deps:
            g.add_edge(("E", d), ("S", t.id))
    conns: dict[tuple[int, int, int], list[int]] = {}
    for t in sorted(s.transfers, key=lambda t: t.id):
        conns.setdefault((t.src, t.dst, t.channel), []).append(t.id)
    for ids in conns.values():
        for a, b in itertools.pairwise(ids):
            g.add_edge(("S", a), ("S", b))
    acc = [(("S", t.id), (t.src, t.chunk), False) for t in s.transfers]
    acc += [(("E", t.id), (t.dst, t.chunk), True) for t in s.transfers]
    for i, (ea, ka, wa) in enumerate(acc):
        for eb, kb, wb in acc[i + 1 :]:
            conflict = ka == kb and (wa or wb) and ea != eb
            if conflict and not nx.has_path(g, ea, eb) and not nx.has_path(g, eb, ea):
                return True
    return False


@settings(max_examples=60, deadline=None)
@given(random_schedules())
def test_race_verdict_matches_all_pairs_brute_force(s: Schedule) -> None:
    if ScheduleGraph(s).order is None:
        return
    assert (check_race_free(s).verdict == VIOLATED) == brute_force_race(s)
