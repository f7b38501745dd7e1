"""Timing growth of the LP lower bound on rail-optimised clusters with one degraded server.

Run: ``python benchmarks/bench_lp_bound.py [--repeat 3] [--sizes 32,128,512,1024]``.
Prints a table (median of ``--repeat`` runs, wall seconds) for:

* ``full``: the LP on the whole graph (GPUs, NVSwitches, NICs, rail switches);
* ``contracted``: the LP with server islands contracted (a relaxation), no check;
* ``contracted+cert``: contracted, then the lifted solution checked on the full graph;
* ``auto``: what ``lower_bound(topo, size)`` does (contracts above
  ``resilientcc.bounds.search.CONTRACT_ABOVE`` vertices, certifies up to ``CERTIFY_UP_TO``).

Server 0 loses 4 of its 8 NICs; 1 GiB. No assertion: timing lives here, not in tests.
"""

from __future__ import annotations

import argparse
import statistics
import time

from resilientcc.bounds import lower_bound
from resilientcc.bounds.lp import clear_cache, lp_bound
from resilientcc.topology import fail_nics, hierarchical

SIZE = 2**30


def _time(fn, repeat: int) -> tuple[float, object]:
    times, res = [], None
    for _ in range(repeat):
        clear_cache()  # time the solve, not the in-process cache
        t0 = time.perf_counter()
        res = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="32,128,512,1024", help="GPU counts (multiples of 8)")
    args = ap.parse_args()
    import cvxpy  # noqa: F401  (import cost excluded from the timings)

    lp_bound(hierarchical(2, 2), SIZE)  # warm up solver and caches
    header = (
        f"{'GPUs':>5} {'vertices':>8} {'links':>6} {'full s':>8} {'contr. s':>8} "
        f"{'contr+cert s':>12} {'auto s':>7}  {'bound (M/B)':>11}  binding"
    )
    print(header)
    print("-" * len(header))
    for p in (int(x) for x in args.sizes.split(",")):
        topo = fail_nics(hierarchical(p // 8, 8), 0, 4)
        t_full, r_full = _time(lambda t=topo: lp_bound(t, SIZE, contract=False), args.repeat)
        t_con, r_con = _time(
            lambda t=topo: lp_bound(t, SIZE, contract=True, certify=False), args.repeat
        )
        t_cert, r_cert = _time(
            lambda t=topo: lp_bound(t, SIZE, contract=True, certify=True), args.repeat
        )
        t_auto, r_auto = _time(lambda t=topo: lower_bound(t, SIZE), args.repeat)
        vals = {r.seconds for r in (r_full, r_con, r_cert, r_auto)}  # type: ignore[attr-defined]
        assert len(vals) == 1, f"bounds disagree at {p} GPUs: {vals}"
        print(
            f"{p:>5} {len(topo.nodes):>8} {len(topo.links):>6} {t_full:>8.3f} {t_con:>8.3f} "
            f"{t_cert:>12.3f} {t_auto:>7.3f}  {r_auto.normalized!s:>11}  "  # type: ignore[attr-defined]
            f"{r_auto.binding}"  # type: ignore[attr-defined]
        )


if __name__ == "__main__":
    main()
