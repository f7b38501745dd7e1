"""Closed-form lower bounds for the switch model, derived symbolically with sympy.

The switch model (DESIGN.md §4): ``n`` endpoints on one non-blocking switch, endpoint
``i`` with egress ``o_i`` and ingress ``n_i`` bytes/s, AllReduce of ``M`` bytes:

* every endpoint's contribution must leave it and the result must enter it:
  ``T >= M / o_i`` and ``T >= M / n_i``;
* one-way gossip: every element needs at least ``2(n-1)`` transfers between endpoints,
  each using one uplink and one downlink: ``T >= 2(n-1) M / sum(o)`` and
  ``T >= 2(n-1) M / sum(n)``.

With one straggler at ``beta * B`` and the others at ``B`` this is
``T_LB = M/B * max(1/beta, 2(n-1)/(n-1+beta))``. The functions here build those
expressions with sympy (threshold, overheads and asymptotics are *derived* by
solving and simplifying, not typed in) and evaluate them exactly to
:class:`~fractions.Fraction` for concrete rational inputs.

>>> straggler_bound(4, Fraction(1, 2))
Fraction(2, 1)
>>> threshold_beta().subs(N, 4)
3/5
>>> switch_bound([100, 100, 50], size=1)[0]
Fraction(1, 50)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any

import sympy as sp

from resilientcc.errors import InputError
from resilientcc.units import as_fraction

__all__ = [
    "BETA",
    "BW",
    "MSG",
    "ClosedForm",
    "N",
    "P",
    "asymptotic_order",
    "derive",
    "evaluate",
    "fault_free_optimum",
    "overhead_above_threshold",
    "overhead_below_threshold",
    "overhead_vs_optimum",
    "overhead_vs_ring",
    "ring_time",
    "straggler_bound",
    "straggler_bound_expr",
    "switch_bound",
    "threshold_beta",
]

#: number of endpoints (servers) in the switch model
N = sp.Symbol("n", positive=True, integer=True)
#: bandwidth fraction of the straggler
BETA = sp.Symbol("beta", positive=True)
#: healthy endpoint bandwidth (bytes/s)
BW = sp.Symbol("B", positive=True)
#: message size (bytes)
MSG = sp.Symbol("M", positive=True)
#: number of GPUs of NCCL's flat ring
P = sp.Symbol("p", positive=True, integer=True)


def _terms() -> tuple[sp.Expr, sp.Expr]:
    """The two terms of the straggler bound, in units of M/B: the straggler's own
    cut ``1/beta`` and the gossip term ``2(n-1)/(sum of bandwidths / B)``."""
    cut = 1 / BETA
    total_bw = (N - 1) + BETA  # sum of endpoint bandwidths in units of B
    gossip = 2 * (N - 1) / total_bw
    return cut, gossip


def straggler_bound_expr() -> sp.Expr:
    """``T_LB = M/B * max(1/beta, 2(n-1)/(n-1+beta))`` as a sympy expression."""
    cut, gossip = _terms()
    return MSG / BW * sp.Max(cut, gossip)


def fault_free_optimum() -> sp.Expr:
    """The fault-free optimum ``2(n-1)/n * M/B`` (the gossip term at ``beta = 1``)."""
    _, gossip = _terms()
    return sp.simplify(MSG / BW * gossip.subs(BETA, 1))


def ring_time() -> sp.Expr:
    """Bandwidth term of NCCL's fault-free flat ring over ``p`` GPUs: ``2(p-1)/p * M/B``."""
    return 2 * (P - 1) / P * MSG / BW


@cache
def threshold_beta() -> sp.Expr:
    """The ``beta`` at which the gossip term starts to dominate, solved from
    ``1/beta = 2(n-1)/(n-1+beta)``: ``(n-1)/(2n-3)``."""
    cut, gossip = _terms()
    sols = sp.solve(sp.Eq(cut, gossip), BETA)
    if len(sols) != 1:  # pragma: no cover - algebra guard
        raise RuntimeError(f"expected one threshold, got {sols}")
    return sp.simplify(sols[0])


@cache
def overhead_above_threshold() -> sp.Expr:
    """Overhead over the fault-free optimum when ``beta >= beta*``: ``(1-beta)/(n-1+beta)``."""
    _, gossip = _terms()
    ff = fault_free_optimum() / (MSG / BW)
    return sp.factor(sp.simplify(gossip / ff - 1))


@cache
def overhead_below_threshold() -> sp.Expr:
    """Overhead over the fault-free optimum when ``beta <= beta*``: ``n/(2(n-1)beta) - 1``."""
    cut, _ = _terms()
    ff = fault_free_optimum() / (MSG / BW)
    return sp.simplify(cut / ff - 1)


def overhead_vs_optimum() -> sp.Expr:
    """Piecewise overhead of the straggler bound over the fault-free optimum."""
    return sp.Piecewise(
        (overhead_below_threshold(), threshold_beta() > BETA),
        (overhead_above_threshold(), True),
    )


@cache
def overhead_vs_ring() -> sp.Expr:
    """Overhead of the straggler bound over NCCL's fault-free ring over ``p`` GPUs
    (``n`` servers, ``beta`` below the threshold, e.g. ``beta = 1/2``):
    ``p / (2 (p-1) beta) - 1``; at ``beta = 1/2`` this is ``1/(p-1)``."""
    cut, _ = _terms()
    return sp.simplify(cut / (ring_time() / (MSG / BW)) - 1)


@cache
def asymptotic_order() -> tuple[sp.Expr, sp.Expr]:
    """``(O-term, limit of n * overhead)`` of the overhead at ``beta = 1/2`` as ``n -> oo``.

    Returns ``(O(1/n), 1)``: the unavoidable overhead of a half-bandwidth straggler
    vanishes like ``1/(n-1)``.
    """
    ov = overhead_below_threshold().subs(BETA, sp.Rational(1, 2))
    order = sp.O(ov, (N, sp.oo))
    lim = sp.limit(N * ov, N, sp.oo)
    return order, lim


@dataclass(frozen=True)
class ClosedForm:
    """The derived expressions, each printable with :meth:`latex`."""

    bound: sp.Expr
    threshold: sp.Expr
    fault_free: sp.Expr
    overhead_above: sp.Expr
    overhead_below: sp.Expr
    overhead_ring: sp.Expr
    overhead_ring_half: sp.Expr
    order: sp.Expr
    limit_n_overhead: sp.Expr
    below_limit: sp.Expr

    def latex(self) -> dict[str, str]:
        """Every expression as a LaTeX string."""
        return {k: sp.latex(v) for k, v in self.__dict__.items()}


@cache
def derive() -> ClosedForm:
    """Derive every closed form once (cached).

    >>> cf = derive()
    >>> cf.threshold
    (n - 1)/(2*n - 3)
    >>> sp.simplify(cf.overhead_ring_half - 1 / (P - 1))
    0
    """
    order, lim = asymptotic_order()
    below = overhead_below_threshold()
    return ClosedForm(
        bound=straggler_bound_expr(),
        threshold=threshold_beta(),
        fault_free=fault_free_optimum(),
        overhead_above=overhead_above_threshold(),
        overhead_below=below,
        overhead_ring=overhead_vs_ring(),
        overhead_ring_half=sp.simplify(overhead_vs_ring().subs(BETA, sp.Rational(1, 2))),
        order=order,
        limit_n_overhead=lim,
        below_limit=sp.limit(below, N, sp.oo),
    )


def _to_fraction(value: sp.Expr) -> Fraction:
    v = sp.nsimplify(value) if not isinstance(value, sp.Rational) else value
    if not isinstance(v, sp.Rational):
        raise InputError(f"expression did not evaluate to a rational number: {value}")
    return Fraction(int(v.p), int(v.q))


def evaluate(expr: sp.Expr, **values: Any) -> Fraction:
    """Evaluate one of the expressions for rational inputs, exactly.

    Keyword names: ``n``, ``beta``, ``B``, ``M``, ``p``.

    >>> evaluate(threshold_beta(), n=4)
    Fraction(3, 5)
    """
    syms = {"n": N, "beta": BETA, "B": BW, "M": MSG, "p": P}
    subs = {}
    for k, v in values.items():
        if k not in syms:
            raise InputError(f"unknown symbol {k!r} (use n, beta, B, M, p)")
        f = as_fraction(v, k)
        subs[syms[k]] = sp.Rational(f.numerator, f.denominator)
    out = sp.simplify(expr.subs(subs))
    return _to_fraction(out)


def straggler_bound(n: int, beta: object, bandwidth: object = 1, size: object = 1) -> Fraction:
    """``M/B * max(1/beta, 2(n-1)/(n-1+beta))`` exactly (default units: ``M = B = 1``).

    Computed directly in rationals (the same formula as :func:`straggler_bound_expr`).
    """
    if not isinstance(n, int) or n < 1:
        raise InputError(f"n: must be a positive integer, got {n!r}")
    b = as_fraction(beta, "beta")
    if not 0 < b <= 1:
        raise InputError(f"beta: must be in (0, 1], got {beta!r}")
    bw = as_fraction(bandwidth, "bandwidth")
    m = as_fraction(size, "size")
    if bw <= 0 or m <= 0:
        raise InputError("bandwidth and size must be positive")
    if n == 1:
        return Fraction(0)
    return m / bw * max(1 / b, Fraction(2 * (n - 1)) / (n - 1 + b))


def _bw(x: Fraction) -> str:
    from resilientcc.bounds.result import format_bandwidth

    return format_bandwidth(x)


def switch_bound(
    egress: Sequence[object], ingress: Sequence[object] | None = None, size: object = 1
) -> tuple[Fraction, str]:
    """General heterogeneous switch model:
    ``T >= max_i(M/o_i, M/n_i, 2(n-1)M/sum(o), 2(n-1)M/sum(n))``.

    Returns ``(bound in seconds, which term binds)``; exact.
    """
    o = [as_fraction(x, "egress") for x in egress]
    ing = [as_fraction(x, "ingress") for x in (egress if ingress is None else ingress)]
    m = as_fraction(size, "size")
    n = len(o)
    if n != len(ing):
        raise InputError(f"{n} egress values but {len(ing)} ingress values")
    if any(x <= 0 for x in (*o, *ing)) or m <= 0:
        raise InputError("bandwidths and size must be positive")
    if n <= 1:
        return Fraction(0), "a single endpoint needs no communication"
    cands: list[tuple[Fraction, str]] = []
    for i in range(n):
        cands.append((m / o[i], f"cut: endpoint {i} must send M out over {_bw(o[i])}"))
        cands.append((m / ing[i], f"cut: endpoint {i} must receive M over {_bw(ing[i])}"))
    so, si = sum(o, Fraction(0)), sum(ing, Fraction(0))
    cands.append(
        (
            2 * (n - 1) * m / so,
            f"gossip: {2 * (n - 1)}·M must leave the {n} endpoints over {_bw(so)}",
        )
    )
    cands.append(
        (
            2 * (n - 1) * m / si,
            f"gossip: {2 * (n - 1)}·M must enter the {n} endpoints over {_bw(si)}",
        )
    )
    return max(cands, key=lambda c: c[0])
