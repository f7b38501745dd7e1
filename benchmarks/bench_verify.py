"""Benchmark of ``resilientcc.verify``: seconds per property against the number of GPUs.

Usage::

    python benchmarks/bench_verify.py [--max-gpus 64] [--algorithms optcc,ring] [--failover-max 16]

Prints one table row per (algorithm, GPUs): transfers, then seconds for
deadlock_free, race_free, lossless and (up to ``--failover-max`` GPUs) failover_lossless
for every single-channel failure. Topology: ``hierarchical(p/8, 8)`` with server 0
missing half its NICs (the degraded case the schedules are built for).
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

from resilientcc.schedules.generators import generate
from resilientcc.topology import fail_nics, hierarchical
from resilientcc.verify import (
    check_deadlock_free,
    check_failover_lossless,
    check_lossless,
    check_race_free,
)
from resilientcc.verify.encode import ScheduleGraph


def topology(p: int):  # type: ignore[no-untyped-def]
    g = 8 if p >= 16 else max(2, p // 2)
    topo = hierarchical(p // g, g)
    return fail_nics(topo, 0, g // 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-gpus", type=int, default=64)
    ap.add_argument("--algorithms", default="optcc,ring,hierarchical,balance,r2cc_allreduce")
    ap.add_argument("--failover-max", type=int, default=16)
    ap.add_argument("--sizes", default="4,8,16,32,64")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if int(x) <= args.max_gpus]
    print(
        f"{'algorithm':15s} {'GPUs':>4s} {'transfers':>9s} {'deadlock':>9s} {'race':>8s} "
        f"{'lossless':>9s} {'3 props':>8s} {'failover':>9s}  verdicts"
    )
    for name in args.algorithms.split(","):
        for p in sizes:
            s = generate(name, topology(p), Fraction(1 << 30))
            g = ScheduleGraph(s)
            row = []
            verdicts = []
            total = 0.0
            for f in (check_deadlock_free, check_race_free, check_lossless):
                t0 = time.perf_counter()
                r = f(s, graph=g)
                dt = time.perf_counter() - t0
                total += dt
                row.append(f"{dt:8.2f}s")
                verdicts.append(r.verdict)
            fo = "        -"
            if p <= args.failover_max:
                t0 = time.perf_counter()
                r = check_failover_lossless(s, graph=g)
                fo = f"{time.perf_counter() - t0:8.2f}s"
                verdicts.append(r.verdict)
            print(
                f"{name:15s} {p:4d} {len(s.transfers):9d} {row[0]:>9s} {row[1]:>8s} "
                f"{row[2]:>9s} {total:7.2f}s {fo:>9s}  {','.join(verdicts)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
