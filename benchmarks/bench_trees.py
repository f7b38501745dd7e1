"""Benchmark of the tree packing (``trees``) on topologies without servers.

Usage::

    python benchmarks/bench_trees.py [--size 256MiB] [--repeat 3]

One row per graph of ``docs_src/custom_topology/graphs.py``. Times are × the LP lower
bound: the packing's own bandwidth time (``M / throughput``, no latency, no pipeline),
the simulated ``trees`` schedule with and without latency, and, on the same graph with
every GPU made a server of its own (the layered generators need servers), NCCL's ring
and OptCC's layered rules (``trees=False``; by default OptCC packs trees there too),
simulated side by side in the same run. Then the wall time of
packing, building (exact check included) and simulating ``trees`` (medians of
``--repeat``), its tree pairs, pieces, lanes and transfers.
"""

from __future__ import annotations

import argparse
import runpy
import statistics
import time
from pathlib import Path

from resilientcc.bounds import lower_bound
from resilientcc.schedules.generators import generate
from resilientcc.schedules.tree_packing import pack_trees, tree_allreduce
from resilientcc.sim import simulate
from resilientcc.topology.io import topology_from_dict
from resilientcc.units import parse_size

GRAPHS = runpy.run_path(
    str(Path(__file__).resolve().parent.parent / "docs_src" / "custom_topology" / "graphs.py")
)["GRAPHS"]


def _timed(fn, repeat: int):  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    size = parse_size(args.size)
    head = (
        "| graph | GPUs | bound | packing | trees | trees, no latency | ring (servers of one) "
        "| optcc (servers of one) | pack | build | simulate | pairs / pieces / lanes / transfers |"
    )
    print(f"size {args.size}; times × the LP bound; wall times medians of {args.repeat}")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for label, make in GRAPHS.items():
        topo = topology_from_dict(make())
        served = topology_from_dict(make(servers=True))
        bound = float(lower_bound(topo, size).seconds)
        pk, t_pack = _timed(lambda topo=topo: pack_trees(topo), args.repeat)
        sched, t_build = _timed(
            lambda topo=topo, pk=pk: tree_allreduce(topo, size, packing=pk), args.repeat
        )
        res, t_sim = _timed(lambda s=sched, topo=topo: simulate(s, topo), args.repeat)
        zero = simulate(sched, topo, zero_latency=True)
        others = [
            simulate(generate(a, served, size, **opts), served).time_s / bound
            for a, opts in (("ring", {}), ("optcc", {"trees": False}))
        ]
        meta = dict(sched.meta)
        print(
            f"| {label} | {topo.num_ranks} | {bound * 1e3:.3f} ms | {pk.time_s(size) / bound:.3f} "
            f"| **{res.time_s / bound:.3f}** | {zero.time_s / bound:.3f} | {others[0]:.3f} "
            f"| {others[1]:.3f} | {t_pack:.2f} s | {t_build:.2f} s | {t_sim:.2f} s "
            f"| {len(pk.pairs)} / {meta['pieces']} / {meta['lanes']} / {len(sched.transfers):,} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
