"""The fast event loop against a naive one; incremental max-min (``sim.sharing``) against
max-min from scratch; the max-min core (``sim.maxmin``).

``naive_simulate`` is the simulator's semantics written the obvious way: at every event,
max-min over *all* active flows from scratch and every flow's remaining bytes advanced.
The real one (``sim.flow``) recomputes only the components touched by a change, keeps
slower flows' rates, groups flows by class and tracks progress lazily; on small random
schedules both must agree to rounding.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
from resilientcc.sim import Router, maxmin_rates, simulate
from resilientcc.sim.flow import _dominated
from resilientcc.sim.maxmin import waterfill
from resilientcc.sim.sharing import Sharing
from resilientcc.topology import fail_nics, hierarchical, switch_model
from resilientcc.topology.model import Topology


def naive_simulate(schedule: Schedule, topology: Topology) -> dict[str, np.ndarray]:
    """Per-transfer start / tx end / end times, no base latency (same tolerances)."""
    router = Router(topology)
    ts = schedule.transfers
    n = len(ts)
    pos = {t.id: i for i, t in enumerate(ts)}
    routes = [
        router.pinned(t.route, t.src, t.dst, "")
        if t.route
        else router.route(t.src, t.dst, t.channel)
        for t in ts
    ]
    links = topology.links
    cap = np.array([float(lk.capacity) for lk in links])
    lat = [sum(float(links[li].latency) for li in r) for r in routes]
    size = [float(schedule.chunks[t.chunk].size * schedule.size) for t in ts]
    pred = [-1] * n
    last: dict[tuple[int, int, int], int] = {}
    for i in sorted(range(n), key=lambda i: ts[i].id):
        key = (ts[i].src, ts[i].dst, ts[i].channel)
        pred[i] = last.get(key, -1)
        last[key] = i
    deps = [{pos[d] for d in t.deps} for t in ts]
    start, txend, end = [math.nan] * n, [math.nan] * n, [math.nan] * n
    rem: dict[int, float] = {}
    pending: list[tuple[float, int]] = []  # (completion time, transfer)
    t = 0.0
    while True:
        for i in range(n):
            if (
                math.isnan(start[i])
                and all(not math.isnan(end[d]) for d in deps[i])
                and (pred[i] < 0 or not math.isnan(txend[pred[i]]))
            ):
                start[i] = t
                rem[i] = size[i]
        active = sorted(rem)
        fe = np.array([f for f, i in enumerate(active) for _ in routes[i]], dtype=np.int64)
        le = np.array([li for i in active for li in routes[i]], dtype=np.int64)
        rate = maxmin_rates(fe, le, len(active), cap)
        tf = [rem[i] / r for i, r in zip(active, rate, strict=True)]
        tn = min([t + x for x in tf] + [c for c, _ in pending], default=math.inf)
        if tn == math.inf:
            break
        dt = tn - t
        for i, r, x in zip(active, rate, tf, strict=True):
            if x <= dt * (1 + 1e-10) + tn * 1e-13:
                del rem[i]
                txend[i] = tn
                pending.append((tn + lat[i], i))
            else:
                rem[i] -= r * dt
        t = tn
        for c, i in [p for p in pending if p[0] <= t * (1 + 1e-12) + 1e-300]:
            end[i] = c
            pending.remove((c, i))
    return {"start_s": np.array(start), "tx_end_s": np.array(txend), "end_s": np.array(end)}


def random_schedule(data: st.DataObject, topo: Topology, chunks: int) -> Schedule:
    """Random transfers, deps and channels; some routes pinned to another channel's path."""
    ranks = topo.num_ranks
    router = Router(topo)
    n = data.draw(st.integers(1, 30), label="transfers")
    ts = []
    for i in range(n):
        src = data.draw(st.integers(0, ranks - 1))
        dst = data.draw(st.integers(0, ranks - 2))
        dst += dst >= src
        deps = data.draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        route = None
        if data.draw(st.integers(0, 4)) == 0:
            path = router.route(src, dst, data.draw(st.integers(0, 3)))
            route = (topo.links[path[0]].src, *(topo.links[li].dst for li in path))
        ts.append(
            Transfer(
                i,
                src,
                dst,
                data.draw(st.integers(0, chunks - 1)),
                "copy",
                deps=tuple(deps),
                channel=data.draw(st.integers(0, 3)),
                route=route,
            )
        )
    order = data.draw(st.permutations(range(n)))
    size = Fraction(data.draw(st.integers(1, 10**9)))
    return Schedule("rand", ranks, size, uniform_chunks(chunks), tuple(ts[i] for i in order))


TOPOLOGIES = {
    "hier-2x4-fail": fail_nics(hierarchical(2, 4), 0, 1),
    "hier-3x2": hierarchical(3, 2, nic_bw=450e9),  # NICs as fast as NVLink: more sharing
    "switch": switch_model([10, 30, 30, 50], [20, 20, 40, 60]),
}


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(TOPOLOGIES)), data=st.data())
def test_fast_event_loop_matches_naive_one(name: str, data: st.DataObject) -> None:
    topo = TOPOLOGIES[name]
    s = random_schedule(data, topo, 4)
    res = simulate(s, topo, base_latency=0)
    ref = naive_simulate(s, topo)
    span = float(np.max(ref["end_s"]))
    assert res.time_s == pytest.approx(span, rel=1e-9)
    for key, want in ref.items():
        np.testing.assert_allclose(getattr(res, key), want, rtol=0, atol=1e-9 * span)


def test_fast_event_loop_matches_naive_one_on_a_degraded_cluster() -> None:
    """Many flows per link, several classes per component, flows joining and leaving."""
    from resilientcc.schedules.balance import balance

    topo = fail_nics(hierarchical(2, 4), 0, 2)
    s = balance(topo, Fraction(10**6))
    res = simulate(s, topo, base_latency=0)
    ref = naive_simulate(s, topo)
    span = float(np.max(ref["end_s"]))
    for key, want in ref.items():
        np.testing.assert_allclose(getattr(res, key), want, rtol=0, atol=1e-9 * span)


# ----------------------------------------------------------------- max-min core
def test_waterfill_classes_equal_repeated_flows() -> None:
    mult = [3, 1, 2]
    fcap = [5.0, 1.0, 9.0]
    links = [[0], [0, 1], [1, 2]]
    cap = [4.0, 6.0, 9.0]
    rates = waterfill(mult, fcap, links, cap)
    flat = waterfill(
        [1] * 6,
        [fcap[k] for k in range(3) for _ in range(mult[k])],
        [links[k] for k in range(3) for _ in range(mult[k])],
        cap,
    )
    assert flat == pytest.approx([rates[0]] * 3 + [rates[1]] + [rates[2]] * 2)
    # link 0: class 1 is capped at 1, class 0's three flows share the other 3
    assert rates == pytest.approx([1.0, 1.0, 2.5])


def test_waterfill_private_cap_and_mapping_capacities() -> None:
    # a private cap below every share binds first; capacities may be a mapping
    assert waterfill([1, 1], [0.5, 9.0], [[7], [7]], {7: 2.0}) == pytest.approx([0.5, 1.5])
    assert waterfill([2], [math.inf], [[]], []) == [math.inf]


@settings(max_examples=40, deadline=None)
@given(
    caps=st.lists(st.integers(1, 50), min_size=1, max_size=5),
    classes=st.lists(
        st.tuples(st.integers(1, 4), st.lists(st.integers(0, 4), max_size=3, unique=True)),
        min_size=1,
        max_size=6,
    ),
)
def test_waterfill_is_max_min_fair(caps: list[int], classes: list[tuple[int, list[int]]]) -> None:
    links = [sorted({x % len(caps) for x in ls}) for _, ls in classes]
    mult = [m for m, _ in classes]
    fcap = [min([caps[x] for x in ls], default=math.inf) for ls in links]
    rate = waterfill(mult, fcap, links, [float(c) for c in caps])
    load = [0.0] * len(caps)
    for k, ls in enumerate(links):
        for x in ls:
            load[x] += mult[k] * rate[k]
    assert all(load[x] <= caps[x] * (1 + 1e-9) for x in range(len(caps)))
    for k, ls in enumerate(
        links
    ):  # a bottleneck: its private cap, or a full link where it is fastest
        assert rate[k] >= fcap[k] * (1 - 1e-9) or any(
            load[x] >= caps[x] * (1 - 1e-9)
            and all(rate[j] <= rate[k] * (1 + 1e-9) for j in range(len(links)) if x in links[j])
            for x in ls
        )


# ----------------------------------------------------------------- incremental max-min
LINK_CAPS = st.lists(st.integers(1, 60), min_size=1, max_size=6)


def flow_classes(min_size: int) -> st.SearchStrategy[list[tuple[int, list[int]]]]:
    """Classes as (private cap, links), links taken modulo the number of links."""
    return st.lists(
        st.tuples(
            st.integers(1, 60), st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True)
        ),
        min_size=min_size,
        max_size=8,
    )


def sharing_case(
    caps: list[int], classes: list[tuple[int, list[int]]]
) -> tuple[list[float], list[tuple[int, ...]], list[float]]:
    """(capacities, each class's links, each class's private cap) of a drawn case."""
    links = [tuple(sorted({x % len(caps) for x in ls})) for _, ls in classes]
    fcap = [
        float(min([f] + [caps[x] for x in ls])) for (f, _), ls in zip(classes, links, strict=True)
    ]
    return [float(c) for c in caps], links, fcap


def assert_max_min(
    sh: Sharing, links: list[tuple[int, ...]], fcap: list[float], cap: list[float]
) -> None:
    """``sh``'s rates are max-min from scratch over its active classes."""
    active = [k for k in range(len(links)) if sh.mult[k]]
    want = waterfill(
        [sh.mult[k] for k in active], [fcap[k] for k in active], [links[k] for k in active], cap
    )
    for k, w in zip(active, want, strict=True):
        assert sh.rate[k] == pytest.approx(w, rel=1e-9)


@settings(max_examples=300, deadline=None)
@given(
    caps=LINK_CAPS,
    classes=flow_classes(1),
    ops=st.lists(
        st.lists(st.tuples(st.booleans(), st.integers(0, 7)), min_size=1, max_size=3), max_size=25
    ),
)
def test_sharing_keeps_max_min_rates_as_flows_join_and_leave(
    caps: list[int], classes: list[tuple[int, list[int]]], ops: list[list[tuple[bool, int]]]
) -> None:
    cap, links, fcap = sharing_case(caps, classes)
    sh = Sharing(links, fcap, cap, 1e-9)
    for batch in ops:
        for join, k in batch:
            k %= len(links)
            if join:
                sh.join(k)
            elif sh.mult[k]:
                sh.leave(k)
        before = list(sh.rate)
        changed = dict(sh.update())
        for k in range(len(links)):  # exactly the changed rates are reported, with the old one
            assert changed.get(k, sh.rate[k]) == before[k]
            assert (k in changed) == (sh.rate[k] != before[k])
        assert_max_min(sh, links, fcap, cap)


@settings(max_examples=300, deadline=None)
@given(
    caps=LINK_CAPS,
    classes=flow_classes(2),
    batches=st.lists(
        st.tuples(
            st.booleans(),  # a batch whose leaves and joins cancel, class by class
            st.lists(st.tuples(st.booleans(), st.integers(0, 7)), min_size=1, max_size=4),
        ),
        max_size=25,
    ),
)
def test_sharing_skips_updates_whose_joins_and_leaves_cancel(
    caps: list[int],
    classes: list[tuple[int, list[int]]],
    batches: list[tuple[bool, list[tuple[bool, int]]]],
) -> None:
    """A batch in which every class that lost a flow gains one back (a connection's next
    transfer starting as its last one ends), some classes emptying and filling again in
    between, is skipped and changes no rate; other batches are recomputed. The rates stay
    those of a Sharing that recomputes every batch and of max-min from scratch."""
    cap, links, fcap = sharing_case(caps, classes)
    sh = Sharing(links, fcap, cap, 1e-9)
    ref = Sharing(links, fcap, cap, 1e-9, skip_cancelled=False)
    for k in range(len(links)):  # every class active, some twice
        for s in (sh, ref):
            s.join(k)
            if k % 2:
                s.join(k)
    sh.update()
    ref.update()
    for cancel, ops in batches:
        skipped, epoch, before = sh.skipped, sh.epoch, list(sh.rate)
        seq: list[tuple[bool, int]] = []
        if cancel:  # each listed class loses all its flows or one, then gets them back
            for every, k in ops:
                k %= len(links)
                m = sh.mult[k] if every else min(sh.mult[k], 1)
                seq += [(False, k)] * m + [(True, k)] * m
        else:
            mult = list(sh.mult)
            for join, k in ops:
                k %= len(links)
                if join or mult[k]:
                    seq.append((join, k))
                    mult[k] += 1 if join else -1
        for join, k in seq:
            for s in (sh, ref):
                s.join(k) if join else s.leave(k)
        sh.update()
        ref.update()
        if cancel and seq:
            assert sh.skipped == skipped + 1 and sh.epoch == epoch
            assert sh.rate == before  # emptied classes have their rates back
        elif any(n for n in _net(seq).values()):
            assert sh.skipped == skipped
        assert_max_min(sh, links, fcap, cap)
        for k in range(len(links)):
            assert sh.rate[k] == pytest.approx(ref.rate[k], rel=1e-9)


def _pair(links: list[tuple[int, ...]], fcap: list[float], cap: list[float]) -> list[Sharing]:
    """A Sharing that leaves classes out of updates, and one that does not."""
    return [Sharing(links, fcap, cap, 1e-9), Sharing(links, fcap, cap, 1e-9, leave_out=False)]


@pytest.mark.parametrize(
    ("links", "fcap", "cap", "start", "leave", "want"),
    [
        # k crosses A (shared with m) and B, which has slack and carries j (capped at 6).
        # When m leaves, k alone would fill B at 4 < 6: B binds j too, both get 5.
        ([(0, 1), (0,), (1,)], [100.0, 100.0, 6.0], [6.0, 10.0], [1, 1, 1], [1], [5, None, 5]),
        # B is full, x on top at 4, j (capped at 3) below it is left out. When z's five
        # flows leave A, y's five rise and x and y alone would share B at 1.5 < 3: B binds
        # j too, all get 12/7.
        (
            [(1,), (1,), (0, 1), (0,)],
            [100.0, 3.0, 100.0, 100.0],
            [10.0, 12.0],
            [1, 1, 5, 5],
            [3] * 5,
            [12 / 7, 12 / 7, 12 / 7, None],
        ),
    ],
    ids=["link with slack", "full link"],
)
@pytest.mark.parametrize("max_widen", [8, 0], ids=["widen", "redo"])
def test_sharing_widens_where_a_link_binds_a_class_it_left_out(
    links: list[tuple[int, ...]],
    fcap: list[float],
    cap: list[float],
    start: list[int],
    leave: list[int],
    want: list[float | None],
    max_widen: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A class that an update left out (on a link with slack, or slower than the top of a
    full link) is added back when the new rates fill that link below its rate; allowed
    no widening, the update is redone leaving nothing out, with the same rates."""
    import resilientcc.sim.sharing as sharing

    monkeypatch.setattr(sharing, "_MAX_WIDEN", max_widen)
    sh, ref = _pair(links, fcap, cap)
    for s in (sh, ref):
        for k, m in enumerate(start):
            for _ in range(m):
                s.join(k)
        s.update()
        for k in leave:
            s.leave(k)
        s.update()
    assert (sh.widened, sh.redone, ref.widened) == (1, int(max_widen == 0), 0)
    for k, w in enumerate(want):
        if w is not None:
            assert sh.rate[k] == pytest.approx(w, rel=1e-12)
            assert ref.rate[k] == pytest.approx(w, rel=1e-12)


def _random_sharing_run(rng: random.Random) -> Sharing:
    """Five links, ten classes of up to three links, a few flows each, then 20 single
    joins or leaves: each update checked against max-min from scratch and against a
    Sharing that leaves no class out."""
    caps = [rng.randint(4, 12) for _ in range(5)]
    classes = [(rng.randint(1, 12), rng.sample(range(5), rng.randint(1, 3))) for _ in range(10)]
    cap, links, fcap = sharing_case(caps, classes)
    sh, ref = _pair(links, fcap, cap)
    flows = [rng.randint(1, 3) for _ in links]
    for s in (sh, ref):
        for k, m in enumerate(flows):
            for _ in range(m):
                s.join(k)
        s.update()
    for _ in range(20):
        k = rng.randrange(len(links))
        join = rng.random() < 0.5
        if not join and not sh.mult[k]:
            continue
        for s in (sh, ref):
            s.join(k) if join else s.leave(k)
            s.update()
        assert_max_min(sh, links, fcap, cap)
        for k2 in range(len(links)):
            assert sh.rate[k2] == pytest.approx(ref.rate[k2], rel=1e-9)
    return sh


def test_sharing_leaves_out_only_classes_that_keep_their_rates() -> None:
    """Leaving classes out changes no rate, on 300 seeded random runs, about one in
    fourteen of which had to widen (so that branch is exercised, not just possible)."""
    runs = [_random_sharing_run(random.Random(seed)) for seed in range(300)]
    assert sum(sh.widened > 0 for sh in runs) >= 15


def test_dominated_links_are_the_ones_that_always_fill_later() -> None:
    """Link 1 carries a subset of link 0's routes and is wider: dominated. Links 2 and 3
    carry the same routes at the same capacity: the higher index goes; link 2 stays,
    narrower than link 0. Link 4 too, though it carries fewer routes than link 0."""
    paths = [(0, 1, 2, 3), (0, 2, 3), (0, 4)]
    cap = np.array([10.0, 12.0, 8.0, 8.0, 5.0])
    assert sorted(_dominated(paths, cap)) == [1, 3]


@settings(max_examples=200, deadline=None)
@given(caps=LINK_CAPS, classes=flow_classes(1), flows=st.lists(st.integers(0, 3), min_size=8))
def test_dropping_dominated_links_changes_no_rate(
    caps: list[int], classes: list[tuple[int, list[int]]], flows: list[int]
) -> None:
    """Max-min rates over every link and over the undominated ones are the same."""
    cap, links, fcap = sharing_case(caps, classes)
    gone = set(_dominated(links, np.array(cap)))
    kept = [tuple(x for x in ls if x not in gone) for ls in links]
    assert all(kept)  # a route keeps a link: the one that dominates the others
    active = [k for k in range(len(links)) if flows[k]]
    mult = [flows[k] for k in active]
    full = waterfill(mult, [fcap[k] for k in active], [links[k] for k in active], cap)
    less = waterfill(mult, [fcap[k] for k in active], [kept[k] for k in active], cap)
    assert less == pytest.approx(full, rel=1e-12)


def _net(seq: list[tuple[bool, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for join, k in seq:
        out[k] = out.get(k, 0) + (1 if join else -1)
    return out


def test_progress_reports_completed_transfers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``progress`` sees the completed transfers and the simulated time grow, never past
    the totals, and the result is the same with it."""
    import resilientcc.sim.flow as flow
    from resilientcc.schedules.balance import balance

    monkeypatch.setattr(flow, "PROGRESS_EVERY", 8)
    topo = fail_nics(hierarchical(3, 4), 0, 1)
    sched = balance(topo, Fraction(2**24))
    calls: list[tuple[int, int, float]] = []
    res = simulate(sched, topo, progress=lambda *a: calls.append(a))
    assert len(calls) == res.num_events // 8
    assert all(total == len(sched.transfers) for _, total, _ in calls)
    done = [c[0] for c in calls]
    times = [c[2] for c in calls]
    assert done == sorted(done) and times == sorted(times)
    assert 0 < done[-1] < len(sched.transfers) and times[-1] < res.time_s
    assert simulate(sched, topo).time_s == res.time_s
