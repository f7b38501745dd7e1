"""Failover-lossless: proofs with dedup, the double-reduce counterexample without it."""

from __future__ import annotations

from fractions import Fraction

import pytest

from resilientcc.schedules.executor import execute
from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
from resilientcc.verify import PROVED, VIOLATED, check_failover_lossless, verify
from resilientcc.verify.examples import chain_allreduce, ring_allreduce
from resilientcc.verify.failover import failure_scenarios, replay_commits


@pytest.mark.parametrize("p,channels", [(2, 1), (3, 2), (4, 2), (6, 3)])
def test_dedup_proves_every_single_failure(p: int, channels: int) -> None:
    r = check_failover_lossless(ring_allreduce(p, channels))
    assert r.verdict == PROVED, r
    assert f"{channels} failure scenarios" in r.detail


@pytest.mark.parametrize("p,channels", [(3, 2), (4, 2), (5, 3)])
def test_without_dedup_a_double_reduce_is_found(p: int, channels: int) -> None:
    s = ring_allreduce(p, channels)
    r = check_failover_lossless(s, dedup=False)
    assert r.verdict == VIOLATED
    cex = r.counterexample
    assert cex is not None and cex.failure is not None
    assert cex.multiplicity is not None and cex.multiplicity >= 2
    # the doubled transfer is an in-flight, delivered reduce on the failed channel
    doubled = dict(cex.failure.committed)
    assert doubled and all(n == 2 for n in doubled.values())
    outcomes = dict(cex.failure.in_flight)
    for tid in doubled:
        t = s.by_id[tid]
        assert t.op == "reduce" and t.channel in cex.failure.channels
        assert outcomes[tid].startswith("delivered")
    # the executor replays the same commits and sees the same wrong multiplicity
    ex = execute(replay_commits(s, doubled), max_violations=10**6)
    assert (cex.rank, cex.chunk, cex.contribution, cex.multiplicity) in {
        (v.rank, v.chunk, v.contribution, v.multiplicity) for v in ex.violations
    }
    text = str(cex)
    assert "delivered" in text and "commits" in text and "counted" in text


def test_copy_only_failures_are_harmless_even_without_dedup() -> None:
    # a channel that carries only copies: a second commit writes the same data again
    s = chain_allreduce(3)
    ts = tuple(
        t if t.op == "reduce" else Transfer(t.id, t.src, t.dst, t.chunk, t.op, t.deps, 1)
        for t in s.transfers
    )
    s = Schedule("c", 3, Fraction(8), uniform_chunks(1), ts)
    assert check_failover_lossless(s, dedup=False, channels=(1,)).verdict == PROVED
    assert check_failover_lossless(s, dedup=False, channels=(0,)).verdict == VIOLATED


def test_two_failures() -> None:
    s = ring_allreduce(4, 3)
    assert check_failover_lossless(s, failures=2).verdict == PROVED
    r = check_failover_lossless(s, failures=2, dedup=False)
    assert r.verdict == VIOLATED
    assert r.counterexample is not None and r.counterexample.failure is not None
    assert len(r.counterexample.failure.channels) == 2
    assert len(failure_scenarios(s, 2)) == 3


def test_per_server_failures() -> None:
    s = ring_allreduce(4, 2)
    assert len(failure_scenarios(s, 1, gpus_per_server=2)) == 4
    r = check_failover_lossless(s, gpus_per_server=2)
    assert r.verdict == PROVED and "4 failure scenarios" in r.detail
    r = check_failover_lossless(s, gpus_per_server=2, dedup=False)
    assert r.verdict == VIOLATED
    assert r.counterexample is not None and r.counterexample.failure is not None
    server = r.counterexample.failure.server
    assert server is not None
    assert all(t.src // 2 == server for t in r.counterexample.transfers)


def test_verify_failover_flags() -> None:
    s = ring_allreduce(3, 2)
    assert verify(s, failover=True).verdict == PROVED
    r = verify(s, failover=True, dedup=False)
    assert r.verdict == VIOLATED and r.property == "failover_lossless"
    assert r.result("lossless") is not None and r.result("lossless").verdict == PROVED  # type: ignore[union-attr]
    r2 = verify(s, failover=True, failures=2, dedup=False)
    assert r2.verdict == VIOLATED


def test_failover_on_a_broken_schedule_is_violated_too() -> None:
    s = ring_allreduce(3)
    s = Schedule("b", 3, s.size, s.chunks, s.transfers[:-1])
    assert check_failover_lossless(s).verdict == VIOLATED
