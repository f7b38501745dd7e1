"""OptCC against the baselines across failure patterns (prints a table; no assertions).

Usage: python benchmarks/bench_patterns.py [--servers 4] [--size 256MiB] [--patterns all]

For each pattern on N x 8 H100-class GPUs: the LP lower bound, the simulated times of
balance, r2cc_allreduce and optcc, each as a ratio to the bound, and the variant OptCC
chose. Patterns are the CLI's --fail forms (``S:K`` K NICs down, ``S:nic1,nic5`` those
NICs down, ``S:x0.5`` all of S's NICs at half bandwidth, ``S:nic1x0.5`` one NIC at half
bandwidth) joined with ``+``. The ratios of one row come from one run, side by side.
"""

from __future__ import annotations

import argparse
import time

from resilientcc.bounds import lower_bound
from resilientcc.schedules.generators import generate
from resilientcc.sim import simulate
from resilientcc.topology import apply_fail_specs, hierarchical
from resilientcc.topology.model import Topology
from resilientcc.units import parse_size

PATTERNS = (
    "none",
    "0:1",
    "0:2",
    "0:4",
    "0:6",
    "0:7",
    "0:x7/8",
    "0:x1/2",
    "0:x1/8",
    "0:nic1x1/2",
    "0:nic1,nic2x1/2",
    "0:1+1:1",
    "0:4+1:4",
    "0:nic0+1:nic3",
    "0:4+1:1",
    "0:1+1:1+2:1",
    "0:2+1:x1/2",
    "0:nic0+1:nic3+2:nic5",
    "0:nic0+1:nic3+2:nic7+3:x7/8",
    "0:nic6+1:nic3,nic4+2:nic2x1/2+3:1",
)
ALGOS = ("balance", "r2cc_allreduce", "optcc")


def build(servers: int, pattern: str) -> Topology:
    topo = hierarchical(servers, 8)
    return topo if pattern == "none" else apply_fail_specs(topo, pattern.split("+"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--patterns", default="all", help="'+'-joined specs, ';'-separated")
    a = ap.parse_args()
    size = parse_size(a.size)
    patterns = PATTERNS if a.patterns == "all" else tuple(a.patterns.split(";"))
    print(f"{a.servers} x 8 GPUs, {a.size}; times as ratios to the LP bound")
    head = "".join(f" {x:>15}" for x in ALGOS)
    print(f"{'pattern':24} {'bound ms':>9}{head}  optcc variant")
    for pattern in patterns:
        topo = build(a.servers, pattern)
        bound = float(lower_bound(topo, size).seconds)
        cells = []
        variant = ""
        t0 = time.perf_counter()
        for algo in ALGOS:
            sched = generate(algo, topo, size, check=False)
            cells.append(simulate(sched, topo).time_s / bound)
            if algo == "optcc":
                variant = sched.meta_get("variant") or ""
        best = min(cells[:-1])
        mark = "" if cells[-1] <= best else "  (a baseline is faster)"
        row = "".join(f" {c:15.3f}" for c in cells)
        print(
            f"{pattern:24} {bound * 1e3:9.3f}{row}  {variant}{mark}"
            f"  [{time.perf_counter() - t0:.0f} s]",
            flush=True,
        )


if __name__ == "__main__":
    main()
