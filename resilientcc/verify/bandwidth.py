"""Bandwidth check of a timed schedule (a simulator result): no link is over-subscribed.

Given the simulator's transmit interval ``[start_s, tx_end_s]`` and bytes of every
transfer, and the route of each transfer, a link ``ℓ`` of capacity ``c_ℓ`` must carry
the bytes of every transfer that transmits entirely inside a window ``[a, b]``
within that window:

    ∀ ℓ, a ≤ b:   Σ_{t on ℓ, a ≤ start_t, tx_end_t ≤ b} bytes_t  ≤  c_ℓ · (b − a)

(a necessary condition whatever the rates inside the intervals were). Z3 searches
for a link and a window that break it (``QF_LRA``, one query per link, times and
bytes as exact rationals of the simulator's floats, with a relative tolerance
``rel_tol`` for float rounding); ``unsat`` for every link is the proof.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

from resilientcc.schedules.ir import Schedule
from resilientcc.topology.model import Topology
from resilientcc.verify.encode import Deadline, run_check
from resilientcc.verify.result import PROVED, UNKNOWN, VIOLATED, Counterexample, PropertyResult

__all__ = ["check_bandwidth"]

PROPERTY = "bandwidth"


def check_bandwidth(
    schedule: Schedule,
    topology: Topology,
    result: Any,
    *,
    rel_tol: float = 1e-6,
    timeout_s: float | None = None,
) -> PropertyResult:
    """Prove that the timed schedule ``result`` (a ``SimResult``) respects link capacities.

    Args:
        schedule: the simulated schedule.
        topology: the topology it ran on.
        result: :func:`resilientcc.sim.simulate`'s result for them.
        rel_tol: slack for float rounding in the simulator's times.
    """
    import z3

    from resilientcc.sim.routing import Router

    t0 = time.perf_counter()
    deadline = Deadline(timeout_s)
    router = Router(topology)
    by_id = schedule.by_id
    on_link: dict[int, list[int]] = {}
    for i, tid in enumerate(result.transfer_ids):
        t = by_id[int(tid)]
        if t.route is not None:
            links = router.pinned(t.route, t.src, t.dst, f"transfer {t.id}")
        else:
            links = router.route(t.src, t.dst, t.channel)
        for lk in links:
            on_link.setdefault(lk, []).append(i)
    unknown_reason = ""
    for lk, idx in sorted(on_link.items()):
        cap = Fraction(float(result.link_capacity[lk])) * Fraction(1 + rel_tol)
        a, b = z3.Real("a"), z3.Real("b")
        load = z3.Sum(
            [
                z3.If(
                    z3.And(
                        a <= z3.RealVal(Fraction(float(result.start_s[i]))),
                        z3.RealVal(Fraction(float(result.tx_end_s[i]))) <= b,
                    ),
                    z3.RealVal(Fraction(float(result.nbytes[i]))),
                    z3.RealVal(0),
                )
                for i in idx
            ]
        )
        solver = z3.SolverFor("QF_LRA")
        solver.add(a <= b, load > z3.RealVal(cap) * (b - a) + 1)
        answer, reason = run_check(solver, deadline)
        if answer == "sat":
            m = solver.model()
            av = m.eval(a, model_completion=True).as_fraction()
            bv = m.eval(b, model_completion=True).as_fraction()
            inside = [
                i
                for i in idx
                if av <= Fraction(float(result.start_s[i]))
                and Fraction(float(result.tx_end_s[i])) <= bv
            ]
            total = sum(float(result.nbytes[i]) for i in inside)
            name = result.link_names[lk]
            cex = Counterexample(
                PROPERTY,
                f"link {name} carries {total:.6g} bytes in [{float(av):.6g}, {float(bv):.6g}] s, "
                f"more than its capacity allows ({float(cap) * float(bv - av):.6g})",
                transfers=tuple(by_id[int(result.transfer_ids[i])] for i in inside[:8]),
            )
            return PropertyResult(
                PROPERTY, VIOLATED, cex, time.perf_counter() - t0, f"z3 sat on link {name}"
            )
        if answer == "unknown":
            unknown_reason = reason
            if deadline.expired():
                break
    secs = time.perf_counter() - t0
    if unknown_reason:
        return PropertyResult(PROPERTY, UNKNOWN, None, secs, f"z3: {unknown_reason}")
    return PropertyResult(PROPERTY, PROVED, None, secs, f"z3 unsat on {len(on_link)} links")
