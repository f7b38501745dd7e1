"""Benchmark of ``resilientcc.runtime``: wall time of a run against the transfers it has.

Usage::

    python benchmarks/bench_runtime.py [--algorithms ring,optcc] [--clusters 2x4,4x4,4x8]
        [--backends local,gloo] [--elements 4096] [--repeat 3]

One row per (algorithm, cluster): transfers, then for each backend the median wall time
of ``--repeat`` runs (every rank a thread) and the transfers per second it makes, and the
ratio gloo / local when both ran. Server 0 has lost one NIC; every run is checked exact
(a wrong one stops the benchmark). The runs of one row are side by side, on one machine.
"""

from __future__ import annotations

import argparse
import statistics
from fractions import Fraction

from resilientcc.runtime import run_schedule
from resilientcc.schedules.generators import generate
from resilientcc.topology import fail_nics, hierarchical


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--algorithms", default="ring,hierarchical,balance,r2cc_allreduce,optcc")
    ap.add_argument("--clusters", default="2x4,4x4,4x8")
    ap.add_argument("--backends", default="local,gloo")
    ap.add_argument("--elements", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", default="1MiB", help="schedule size (shapes the pieces)")
    args = ap.parse_args()
    from resilientcc.units import parse_size

    size = Fraction(parse_size(args.size))
    backends = args.backends.split(",")
    head = ["algorithm", "cluster", "transfers"]
    for b in backends:
        head += [f"{b} ms", f"{b} transfers/s"]
    if {"local", "gloo"} <= set(backends):
        head.append("gloo / local")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for cluster in args.clusters.split(","):
        n, g = (int(x) for x in cluster.split("x"))
        topo = fail_nics(hierarchical(n, g), 0, 1)
        for algo in args.algorithms.split(","):
            s = generate(algo, topo, size)
            row = [algo, f"{n} x {g}", f"{len(s.transfers):,}"]
            med = {}
            for b in backends:
                times = []
                for k in range(args.repeat):
                    r = run_schedule(s, elements=args.elements, backend=b, seed=k)
                    if not r.exact:
                        raise SystemExit(
                            f"{algo} on {cluster} ({b}): wrong on ranks {r.wrong_ranks}"
                        )
                    times.append(r.wall_s)
                med[b] = statistics.median(times)
                row += [f"{med[b] * 1e3:.1f}", f"{len(s.transfers) / med[b]:,.0f}"]
            if {"local", "gloo"} <= set(backends):
                row.append(f"{med['gloo'] / med['local']:.1f}")
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
