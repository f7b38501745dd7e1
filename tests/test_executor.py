"""The exact executor: known answers, and properties over hand-built ring schedules."""

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.errors import ScheduleError
from resilientcc.schedules import (
    Schedule,
    Transfer,
    check,
    execute,
    topological_order,
    uniform_chunks,
)


def mini_ring(p: int) -> Schedule:
    """A textbook ring AllReduce over p ranks, p chunks (independent of the generators)."""
    ts: list[Transfer] = []
    last: dict[tuple[int, int], int] = {}  # (rank, chunk) -> id of last transfer writing it
    for step in range(2 * (p - 1)):
        for r in range(p):
            c = (r - step) % p
            dst = (r + 1) % p
            op = "reduce" if step < p - 1 else "copy"
            deps = tuple(d for d in (last.get((r, c)),) if d is not None)
            tid = len(ts)
            ts.append(Transfer(tid, r, dst, c, op, deps))
        for t in ts[-p:]:
            last[(t.dst, t.chunk)] = t.id
    return Schedule("mini-ring", p, Fraction(1024), uniform_chunks(p), tuple(ts))


@pytest.mark.parametrize("p", [2, 3, 4, 7, 16])
def test_ring_is_exact(p):
    res = execute(mini_ring(p))
    assert res.ok, str(res)
    assert len(res.order) == 2 * (p - 1) * p


def test_double_reduce_is_caught_as_multiplicity_two():
    s = mini_ring(4)
    t = s.transfers[0]
    dup = Transfer(len(s.transfers), t.src, t.dst, t.chunk, "reduce", t.deps)
    bad = Schedule(s.name, s.ranks, s.size, s.chunks, (*s.transfers, dup))
    res = execute(bad)
    assert not res.ok
    assert any(v.multiplicity == 2 for v in res.violations)


def test_dropped_transfer_is_caught_as_missing():
    s = mini_ring(5)
    victim = s.transfers[-1]
    kept = tuple(
        Transfer(t.id, t.src, t.dst, t.chunk, t.op, tuple(d for d in t.deps if d != victim.id))
        for t in s.transfers
        if t.id != victim.id
    )
    res = execute(Schedule(s.name, s.ranks, s.size, s.chunks, kept))
    assert not res.ok
    assert any(v.rank == victim.dst and v.chunk == victim.chunk for v in res.violations)
    with pytest.raises(ScheduleError, match="not a correct AllReduce"):
        check(Schedule(s.name, s.ranks, s.size, s.chunks, kept))


@settings(max_examples=40, deadline=None)
@given(p=st.integers(2, 9), data=st.data())
def test_swapping_copy_and_reduce_breaks_the_ring(p, data):
    s = mini_ring(p)
    i = data.draw(st.integers(0, len(s.transfers) - 1))
    t = s.transfers[i]
    flipped = Transfer(
        t.id, t.src, t.dst, t.chunk, "copy" if t.op == "reduce" else "reduce", t.deps
    )
    ts = list(s.transfers)
    ts[i] = flipped
    assert not execute(Schedule(s.name, p, s.size, s.chunks, tuple(ts))).ok


def test_cycle_is_reported():
    ts = (Transfer(0, 0, 1, 0, "reduce", (1,)), Transfer(1, 1, 0, 0, "copy", (0,)))
    with pytest.raises(ScheduleError, match="cycle"):
        topological_order(Schedule("cyc", 2, Fraction(8), uniform_chunks(1), ts))


@pytest.mark.parametrize(
    ("transfers", "msg"),
    [
        ((Transfer(0, 0, 0, 0, "reduce"),), "both rank"),
        ((Transfer(0, 0, 5, 0, "reduce"),), "out of range"),
        ((Transfer(0, 0, 1, 3, "reduce"),), "unknown chunk"),
        ((Transfer(0, 0, 1, 0, "sum"),), "unknown op"),
        ((Transfer(0, 0, 1, 0, "reduce", (9,)),), "unknown transfer"),
        ((Transfer(0, 0, 1, 0, "reduce"), Transfer(0, 1, 0, 0, "copy")), "duplicate"),
    ],
)
def test_structure_errors(transfers, msg):
    with pytest.raises(ScheduleError, match=msg):
        Schedule("bad", 2, Fraction(8), uniform_chunks(1), transfers).check_structure()
