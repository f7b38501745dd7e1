"""Closed forms of the switch model: known answers and sympy identities."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.bounds import fault_free_ring_time, lower_bound
from resilientcc.bounds.closed_form import (
    BETA,
    BW,
    MSG,
    N,
    P,
    derive,
    evaluate,
    straggler_bound,
    switch_bound,
    threshold_beta,
)
from resilientcc.errors import InputError
from resilientcc.topology import switch_model, uniform_switch

GB = 10**9
GIB = 2**30


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 17, 64])
def test_homogeneous_is_two_n_minus_one_over_n(n: int) -> None:
    b, m = 100 * GB, GIB
    expected = Fraction(2 * (n - 1), n) * m / b if n > 1 else Fraction(0)
    assert switch_bound([b] * n, size=m)[0] == expected
    assert lower_bound(uniform_switch(n, b), m).seconds == expected
    assert straggler_bound(n, 1, b, m) == expected


@given(
    n=st.integers(2, 200),
    beta=st.fractions(min_value=Fraction(1, 100), max_value=1, max_denominator=1000),
)
@settings(max_examples=60, deadline=None)
def test_straggler_formula_matches_general_switch_bound(n: int, beta: Fraction) -> None:
    b = Fraction(7, 3)
    expected = max(1 / beta, Fraction(2 * (n - 1)) / (n - 1 + beta)) / b
    assert straggler_bound(n, beta, b) == expected
    assert switch_bound([beta * b] + [b] * (n - 1))[0] == expected
    # the sympy expression evaluates to the same exact value
    assert evaluate(derive().bound, n=n, beta=beta, B=b, M=1) == expected


def test_threshold_is_derived_and_equals_hand_derivation() -> None:
    thr = threshold_beta()
    assert sp.simplify(thr - (N - 1) / (2 * N - 3)) == 0
    # at the threshold the two terms coincide; just below it the straggler's cut wins
    for n in (2, 3, 4, 10, 100):
        t = evaluate(thr, n=n)
        assert 1 / t == Fraction(2 * (n - 1)) / (n - 1 + t)
        below = t * Fraction(99, 100)
        assert 1 / below > Fraction(2 * (n - 1)) / (n - 1 + below)
    assert sp.limit(thr, N, sp.oo) == sp.Rational(1, 2)


def test_overheads_equal_hand_derived_expressions() -> None:
    cf = derive()
    assert sp.simplify(cf.fault_free - 2 * (N - 1) / N * MSG / BW) == 0
    assert sp.simplify(cf.overhead_above - (1 - BETA) / (N - 1 + BETA)) == 0
    assert sp.simplify(cf.overhead_below - (N / (2 * (N - 1) * BETA) - 1)) == 0
    assert sp.simplify(cf.overhead_ring - (P / (2 * (P - 1) * BETA) - 1)) == 0
    assert sp.simplify(cf.overhead_ring_half - 1 / (P - 1)) == 0
    assert sp.simplify(cf.below_limit - (1 / (2 * BETA) - 1)) == 0
    # at beta = 1/2 (below the threshold) the overhead over the optimum is 1/(n-1)
    assert sp.simplify(cf.overhead_below.subs(BETA, sp.Rational(1, 2)) - 1 / (N - 1)) == 0


def test_asymptotic_order_is_one_over_n() -> None:
    cf = derive()
    assert cf.order == sp.O(1 / N, (N, sp.oo))
    assert cf.limit_n_overhead == 1


def test_latex_printable() -> None:
    tex = derive().latex()
    assert tex["threshold"] == r"\frac{n - 1}{2 n - 3}"
    assert all(isinstance(v, str) and v for v in tex.values())


def test_piecewise_overhead() -> None:
    from resilientcc.bounds.closed_form import overhead_vs_optimum

    ov = overhead_vs_optimum()
    assert evaluate(ov, n=4, beta=Fraction(1, 2)) == Fraction(1, 3)
    assert evaluate(ov, n=4, beta=Fraction(9, 10)) == Fraction(1, 10) / Fraction(39, 10)


def test_flagship_closed_form_overhead_is_one_over_p_minus_one() -> None:
    """4 servers (server 0 at half its 8 x 50 GB/s), 32 GPUs in NCCL's ring: 1/31."""
    b = 400 * GB
    sm = switch_model([b / 2, b, b, b])
    res = lower_bound(sm, GIB, "closed_form")
    assert res.method == "closed_form"
    assert res.seconds == 2 * Fraction(GIB) / b
    assert straggler_bound(4, Fraction(1, 2), b, GIB) == res.seconds
    ring32 = Fraction(2 * 31, 32) * GIB / b
    assert res.seconds / ring32 - 1 == Fraction(1, 31)
    assert evaluate(derive().overhead_ring_half, p=32) == Fraction(1, 31)
    # against the 4-endpoint ring itself the overhead is 1/(n-1)
    assert res.seconds / fault_free_ring_time(sm, GIB) - 1 == Fraction(1, 3)


def test_heterogeneous_ingress_and_binding_text() -> None:
    secs, why = switch_bound([10, 10, 10], [10, 10, 1], size=5)
    assert secs == 5 and "endpoint 2 must receive" in why
    secs, why = switch_bound([10, 10, 10, 10], [100, 100, 100, 100], size=1)
    assert secs == Fraction(6, 40) and why.startswith("gossip") and "leave" in why


def test_bad_inputs() -> None:
    with pytest.raises(InputError):
        straggler_bound(0, Fraction(1, 2))
    with pytest.raises(InputError):
        straggler_bound(4, 0)
    with pytest.raises(InputError):
        switch_bound([1, -1])
    with pytest.raises(InputError):
        evaluate(threshold_beta(), q=3)
