"""Benchmark of a silent NIC failure in ``resilientcc.runtime``: what finding it costs.

Usage::

    python benchmarks/bench_failover.py [--algorithms ring,optcc] [--clusters 2x4,4x4]
        [--timeouts 0.1,0.5,2] [--backend local] [--elements 4096] [--repeat 3]

One row per (algorithm, cluster, acknowledgement timeout). Server 0 has lost one NIC
(the schedule is built for it); during the run NIC 1 of server 1 dies *silently*, both
ways (``nic_failures``): for every GPU of server 1 that sends on it, and for every other
GPU's sends on that rail into server 1, at each sender's send number ``h`` there, ``h``
half the fewest sends of a server-1 GPU on it. It swallows what it is given, and each
sender finds out only when a receiver has sent no acknowledgement on that channel for
``timeout`` seconds. Columns: the median wall time without the failure and with
it (side by side, ``--repeat`` runs each), the difference, how many messages the dead
NIC swallowed, the longest time from the failure to its discovery, and the longest a
live channel waited for an acknowledgement in the runs without the failure (how far the
timeout could be lowered before live channels are given up). Every run is checked exact.
"""

from __future__ import annotations

import argparse
import statistics
from fractions import Fraction

from resilientcc.runtime import nic_failures, rank_plans, run_schedule
from resilientcc.schedules.generators import generate
from resilientcc.topology import fail_nics, hierarchical


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--algorithms", default="ring,optcc")
    ap.add_argument("--clusters", default="2x4,4x4")
    ap.add_argument("--timeouts", default="0.1,0.5,2")
    ap.add_argument("--backend", default="local")
    ap.add_argument("--elements", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", default="1MiB", help="schedule size (shapes the pieces)")
    args = ap.parse_args()
    from resilientcc.units import parse_size

    size = Fraction(parse_size(args.size))
    head = [
        "algorithm",
        "cluster",
        "ack timeout s",
        "no failure ms",
        "silent failure ms",
        "difference ms",
        "swallowed",
        "found after s",
        "longest live wait ms",
    ]
    print(f"backend {args.backend}; NIC 1 of server 1 dies silently halfway")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for cluster in args.clusters.split(","):
        n, g = (int(x) for x in cluster.split("x"))
        topo = fail_nics(hierarchical(n, g), 0, 1)
        for algo in args.algorithms.split(","):
            s = generate(algo, topo, size)
            plans = rank_plans(s)
            half = min(plans[r].sends_on(1) for r in range(g, 2 * g) if plans[r].sends_on(1))
            fails = nic_failures(s, topo, 1, 1, after=half // 2, outcome="silent")
            for timeout in (float(x) for x in args.timeouts.split(",")):
                clean, broken, swallowed, found, live = [], [], [], [], []
                for k in range(args.repeat):
                    for failures, walls in (((), clean), (fails, broken)):
                        r = run_schedule(
                            s,
                            elements=args.elements,
                            backend=args.backend,
                            failures=failures,
                            seed=k,
                            ack_timeout_s=timeout,
                        )
                        if not r.exact:
                            raise SystemExit(f"{algo} on {cluster}: wrong on ranks {r.wrong_ranks}")
                        walls.append(r.wall_s)
                        if failures:
                            swallowed.append(r.dropped)
                            found.append(r.detect_s)
                        else:
                            live.append(r.max_ack_gap_s)
                a, b = statistics.median(clean), statistics.median(broken)
                row = [
                    algo,
                    f"{n} x {g}",
                    f"{timeout:g}",
                    f"{a * 1e3:.1f}",
                    f"{b * 1e3:.1f}",
                    f"{(b - a) * 1e3:+.1f}",
                    f"{statistics.median(swallowed):g}",
                    f"{max(found):.3f}",
                    f"{max(live) * 1e3:.1f}",
                ]
                print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
