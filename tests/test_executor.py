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
    executor_compiled,
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
        ((Transfer(0, 0, 1, 0, "reduce", channel=2**20),), "above 1,048,575"),
    ],
)
def test_structure_errors(transfers, msg):
    with pytest.raises(ScheduleError, match=msg):
        Schedule("bad", 2, Fraction(8), uniform_chunks(1), transfers).check_structure()


ENGINES = ["python", "compiled"] if executor_compiled.available() else ["python"]


def dense_execute(s: Schedule) -> tuple[bool, list[tuple[int, int, int, int]], int]:
    """The executor's definition, written out: one p × p multiplicity matrix per chunk."""
    import numpy as np

    p = s.ranks
    by_id = s.by_id
    state = {c: np.eye(p, dtype=np.int64) for c in range(len(s.chunks))}
    for i in topological_order(s):
        t = by_id[i]
        for c in t.chunk_ids:
            if t.op == "copy":
                state[c][t.dst] = state[c][t.src]
            else:
                state[c][t.dst] += state[c][t.src]
    bad = [
        (int(r), c, int(k), int(state[c][r, k]))
        for c in range(len(s.chunks))
        for r, k in np.argwhere(state[c] != 1)
    ]
    return not bad, bad, len(bad)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_shared_vectors_give_the_dense_executors_answer(data):
    """Random (mostly wrong) schedules: copies, reduces, runs of chunks, shared sources.
    The executor, which shares vectors between copies (in Python and compiled), reports
    exactly the violations, in the same order, that the dense matrix per chunk gives."""
    p = data.draw(st.integers(1, 5), label="ranks")
    nchunks = data.draw(st.integers(1, 3), label="chunks")
    ts = []
    for i in range(data.draw(st.integers(0, 14), label="transfers")):
        if p == 1:
            break
        src = data.draw(st.integers(0, p - 1))
        dst = data.draw(st.integers(0, p - 2))
        dst += dst >= src
        chunk = data.draw(st.integers(0, nchunks - 1))
        count = data.draw(st.integers(1, nchunks - chunk))
        deps = (
            tuple(data.draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True))) if i else ()
        )
        op = data.draw(st.sampled_from(["copy", "reduce"]))
        ts.append(Transfer(i, src, dst, chunk, op, deps, count=count))
    s = Schedule("rand", p, Fraction(64), uniform_chunks(nchunks), tuple(ts))
    ok, bad, n = dense_execute(s)
    for engine in ENGINES:
        res = execute(s, max_violations=10**6, engine=engine)
        assert res.ok == ok and res.num_violations == n
        got = [(v.rank, v.chunk, v.contribution, v.multiplicity) for v in res.violations]
        assert got == bad
    if n > 3:  # the listing stops at max_violations, the count does not
        for engine in ENGINES:
            res = execute(s, max_violations=3, engine=engine)
            assert res.num_violations == n and len(res.violations) == 3


def test_large_schedule_same_answer_in_both_engines():
    """A generated schedule above the compiled threshold, and a broken copy of it."""
    from dataclasses import replace

    from resilientcc.schedules.optcc import optcc
    from resilientcc.topology import fail_nics, hierarchical

    topo = fail_nics(hierarchical(4, 8), 0, 2)
    s = optcc(topo, Fraction(2**26), check=False)
    assert sum(t.count for t in s.transfers) >= 20_000
    broken = replace(s, transfers=s.transfers[:-1])  # the last transfer dropped
    for sched in (s, broken):
        results = [execute(sched, engine=e) for e in ENGINES]
        assert len({(r.ok, r.num_violations, r.violations) for r in results}) == 1
    assert execute(s).ok and not execute(broken).ok


def _repeated_pattern(data: st.DataObject) -> Schedule:
    """A random pattern of transfers on two chunks, repeated over several pieces (pairs
    of chunks), some pieces with one transfer dropped or its op flipped: many chunks see
    the same operations (twins) and some do not."""
    p = data.draw(st.integers(2, 5), label="ranks")
    pattern = []
    for _ in range(data.draw(st.integers(1, 10), label="pattern")):
        src = data.draw(st.integers(0, p - 1))
        dst = data.draw(st.integers(0, p - 2))
        dst += dst >= src
        first = data.draw(st.integers(0, 1))
        count = data.draw(st.integers(1, 2 - first))
        pattern.append((src, dst, first, count, data.draw(st.sampled_from(["copy", "reduce"]))))
    pieces = data.draw(st.integers(1, 5), label="pieces")
    ts: list[Transfer] = []
    for k in range(pieces):
        change = data.draw(st.integers(-1, len(pattern) - 1), label=f"change {k}")
        for j, (src, dst, first, count, op) in enumerate(pattern):
            if j == change:
                if data.draw(st.booleans(), label="drop"):
                    continue
                op = "copy" if op == "reduce" else "reduce"
            deps = (len(ts) - 1,) if ts else ()  # one chain: a single order of execution
            ts.append(Transfer(len(ts), src, dst, 2 * k + first, op, deps, count=count))
    return Schedule("pattern", p, Fraction(64), uniform_chunks(2 * pieces), tuple(ts))


@pytest.mark.skipif(not executor_compiled.available(), reason="needs numba")
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_twin_chunks_run_once_and_give_the_dense_answer(data):
    """The compiled executor runs one chunk per group of chunks with the same operations
    and lists the others' violations from it: the same listing, order and count as the
    dense matrices, also when the listing is cut inside a twin's rows."""
    s = _repeated_pattern(data)
    ok, bad, n = dense_execute(s)
    for cut in (10**6, data.draw(st.integers(0, max(n, 1)), label="cut")):
        res = execute(s, max_violations=cut, engine="compiled")
        assert res.ok == ok and res.num_violations == n
        got = [(v.rank, v.chunk, v.contribution, v.multiplicity) for v in res.violations]
        assert got == bad[:cut]


@pytest.mark.skipif(not executor_compiled.available(), reason="needs numba")
def test_twins_are_confirmed_not_trusted_to_the_hash(monkeypatch):
    """With every chunk's hash made equal, the element-by-element comparison must still
    tell the chunks apart: a broken piece among correct ones is still found, with the
    dense executor's listing."""
    from dataclasses import replace

    import numpy as np

    from resilientcc.schedules.optcc import optcc
    from resilientcc.topology import fail_nics, hierarchical

    s = optcc(fail_nics(hierarchical(2, 4), 0, 1), Fraction(2**22), pieces=4, check=False)
    assert execute(s, engine="compiled").ok  # (compiles the kernels before the patch)
    # one reduce of the second piece made a copy: a partial sum overwritten
    second = len(s.chunks) // 4
    i = next(i for i, t in enumerate(s.transfers) if t.op == "reduce" and t.chunk >= second)
    ts = list(s.transfers)
    ts[i] = replace(ts[i], op="copy")
    broken = replace(s, transfers=tuple(ts))
    want = dense_execute(broken)
    assert not want[0]

    def same_hash(p, cptr, *_):
        return np.zeros(len(cptr) - 1, np.uint64), np.zeros(len(cptr) - 1, np.uint64)

    monkeypatch.setattr(executor_compiled, "_hashes", same_hash)
    res = execute(broken, max_violations=10**6, engine="compiled")
    assert (res.ok, res.num_violations) == (False, want[2])
    got = [(v.rank, v.chunk, v.contribution, v.multiplicity) for v in res.violations]
    assert got == want[1]


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_topological_order_takes_the_smallest_ready_id_first(data):
    """Random DAGs, numbered in a topological order (the shortcut: sorted ids) or not
    (the heap): both give the order that always takes the smallest ready id."""
    n = data.draw(st.integers(1, 12), label="transfers")
    label = list(range(n))
    if data.draw(st.booleans(), label="shuffled ids"):
        label = data.draw(st.permutations(label))
    ts = []
    for i in range(n):  # transfer i (id label[i]) depends on some earlier ones
        deps = data.draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        ts.append(Transfer(label[i], 0, 1, 0, "copy", tuple(sorted(label[d] for d in deps))))
    s = Schedule("dag", 2, Fraction(8), uniform_chunks(1), tuple(ts))
    done: list[int] = []
    left = {t.id: set(t.deps) for t in ts}
    while left:  # the definition, written out
        i = min(i for i, d in left.items() if d <= set(done))
        done.append(i)
        del left[i]
    assert list(topological_order(s)) == done


@pytest.mark.parametrize(
    ("change", "msg"),
    [
        ({"ranks": 2**17 + 1}, "more than 131,072"),
        ({"size": Fraction(2**60 + 1)}, "above 2\\*\\*60 bytes"),
        ({"collective": "allgather"}, "only allreduce"),
    ],
)
def test_schedules_beyond_what_the_tools_carry(change, msg):
    """A schedule file can claim anything: these would overflow floats or make the
    executor and the verifier allocate per rank, or ask for another collective."""
    from dataclasses import replace

    ok = Schedule("s", 2, Fraction(8), uniform_chunks(1), (Transfer(0, 0, 1, 0, "reduce"),))
    ok.check_structure()
    with pytest.raises(ScheduleError, match=msg):
        replace(ok, **change).check_structure()
