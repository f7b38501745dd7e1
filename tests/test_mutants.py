"""Mutation testing: every semantically wrong mutant is rejected with a counterexample.

Mutants of the real generators' schedules on small topologies (drop a transfer,
duplicate a reduce, retarget a transfer's rank or chunk, delete a dependency, swap
copy/reduce). The oracle is independent of Z3: the exact executor, graph
reachability for races and a cycle search (``mutants.classify``). Z3 and the
executor must also agree on the lossless verdict of every mutant.
"""

from __future__ import annotations

import importlib.util
import random
from collections import Counter
from fractions import Fraction

from resilientcc.schedules.executor import execute
from resilientcc.schedules.generators import GENERATORS, generate
from resilientcc.topology import fail_nics, hierarchical
from resilientcc.verify import PROVED, VIOLATED, check_lossless, verify
from resilientcc.verify.encode import ScheduleGraph
from resilientcc.verify.mutants import KINDS, classify, generate_mutants

ALGORITHMS = ("ring", "hierarchical", "balance", "r2cc_allreduce", "optcc")
SHAPES = [(2, 2, 2, 1), (3, 1, 1, 0), (2, 2, 2, 0)]  # servers, GPUs/server, NICs, failed NICs


def base_schedules():  # type: ignore[no-untyped-def]
    for name in ALGORITHMS:
        assert importlib.util.find_spec(GENERATORS[name][0]) is not None, name
        for n, g, k, failed in SHAPES:
            topo = hierarchical(n, g, k)
            if failed:
                topo = fail_nics(topo, 0, failed)
            yield generate(name, topo, Fraction(1 << 20))


def test_kill_rate_is_100_percent() -> None:
    rng = random.Random(2024)
    total = wrong = killed = equivalent = 0
    by_kind: Counter[str] = Counter()
    escaped = []
    for s in base_schedules():
        for m in generate_mutants(s, rng, per_kind=6):
            total += 1
            by_kind[m.kind] += 1
            is_wrong, why = classify(m.schedule)
            report = verify(m.schedule)
            if ScheduleGraph(m.schedule).dep_order is not None:
                # Z3's lossless verdict agrees with the exact executor on every mutant
                done = report.result("lossless")
                z3_ok = (done or check_lossless(m.schedule)).verdict == PROVED
                assert z3_ok == execute(m.schedule).ok, m.description
            if is_wrong:
                wrong += 1
                if report.verdict == VIOLATED and report.counterexample is not None:
                    killed += 1
                    assert str(report.counterexample)
                else:
                    escaped.append((m.schedule.name, m.description, why, report.verdict))
            else:
                equivalent += 1
                assert report.verdict == PROVED, (m.description, str(report))
    print(
        f"\nmutants: {total} ({dict(by_kind)}), wrong {wrong}, killed {killed}, "
        f"equivalent {equivalent}"
    )
    assert total >= 500
    assert set(by_kind) == set(KINDS)
    assert not escaped, escaped[:5]
    assert killed == wrong  # kill rate 100 %
    assert wrong + equivalent == total


def test_each_kind_is_caught_on_a_ring() -> None:
    from resilientcc.verify.examples import ring_allreduce

    s = ring_allreduce(4, 2)
    rng = random.Random(7)
    seen: Counter[str] = Counter()
    for m in generate_mutants(s, rng, per_kind=3):
        wrong, _ = classify(m.schedule)
        if wrong:
            assert verify(m.schedule).verdict == VIOLATED
            seen[m.kind] += 1
    assert set(seen) == set(KINDS)
