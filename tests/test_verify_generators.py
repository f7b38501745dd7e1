"""Every generated schedule (ring, balance, hierarchical, r2cc_allreduce, optcc) is proved."""

from __future__ import annotations

import importlib.util
from fractions import Fraction

import pytest

from resilientcc.schedules.executor import execute
from resilientcc.schedules.generators import GENERATORS, generate
from resilientcc.topology import fail_nics, hierarchical
from resilientcc.topology.model import Topology
from resilientcc.verify import PROVED, check_lossless, race_pairs_graph, verify

ALGORITHMS = ("ring", "balance", "hierarchical", "r2cc_allreduce", "optcc")

# (servers, gpus per server, NICs per server, NICs failed on server 0)
SMALL = [(2, 1, 1, 0), (2, 2, 2, 1), (2, 4, 2, 1), (4, 2, 2, 1), (3, 2, 2, 0), (4, 4, 2, 1)]


def need(name: str) -> None:
    module = GENERATORS[name][0]
    if importlib.util.find_spec(module) is None:  # pragma: no cover - only while it is written
        pytest.skip(f"generator module {module} does not exist yet")


def topo(n: int, g: int, k: int, failed: int) -> Topology:
    t = hierarchical(n, g, k)
    return fail_nics(t, 0, failed) if failed else t


@pytest.mark.parametrize("name", ALGORITHMS)
@pytest.mark.parametrize("shape", SMALL, ids=lambda s: "x".join(map(str, s)))
def test_small_schedules_proved(name: str, shape: tuple[int, int, int, int]) -> None:
    need(name)
    s = generate(name, topo(*shape), Fraction(1 << 20))
    r = verify(s, failover=s.ranks <= 8)
    assert r.verdict == PROVED, str(r)
    # independent cross-checks
    assert execute(s).ok
    assert not race_pairs_graph(s)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_degraded_16_gpu_failover(name: str) -> None:
    need(name)
    s = generate(name, topo(2, 8, 4, 2), Fraction(1 << 20))
    r = verify(s, failover=name == "optcc")
    assert r.verdict == PROVED, str(r)


@pytest.mark.parametrize("name", ["ring", "optcc"])
def test_64_gpus(name: str) -> None:
    need(name)
    s = generate(name, topo(8, 8, 1, 0), Fraction(1 << 20))
    assert s.ranks == 64
    r = verify(s)
    assert r.verdict == PROVED, str(r)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_two_failures_and_no_dedup_on_generated(name: str) -> None:
    need(name)
    s = generate(name, topo(2, 2, 2, 0), Fraction(1 << 20))
    assert verify(s, failover=True, failures=2).verdict == PROVED
    if any(t.op == "reduce" for t in s.transfers):
        r = verify(s, failover=True, dedup=False)
        assert r.verdict == "violated" and r.property == "failover_lossless"
        assert r.counterexample is not None and r.counterexample.multiplicity != 1


@pytest.mark.parametrize("name", ALGORITHMS)
def test_lossless_agrees_with_executor(name: str) -> None:
    need(name)
    s = generate(name, topo(2, 4, 2, 1), Fraction(1 << 20))
    assert (check_lossless(s).verdict == PROVED) == execute(s).ok
