"""OptCC on small buffers: its defaults against the large-buffer schedule (prints a table).

Usage: python benchmarks/bench_small.py [--sizes 1MiB,4MiB,16MiB,32MiB] [--clusters all]

Up to a few tens of MiB an AllReduce is latency-bound, and OptCC switches to the
hierarchical ring with its fewest-step passes (docs/schedules.md, "Small buffers"). For
each cluster (``SERVERS/PATTERN`` on 8-GPU servers, PATTERN as the CLI's --fail, ``-`` for
none) and size this prints the simulated time of OptCC's default, of what it ran before
(the same variant with rings and the straggler's sliver, or the pipelined schedule, or
NCCL's ring: ``hier_ring=False`` where the default is the hierarchical ring only because
the buffer is small), their ratio, and the lower bound that counts latency. Times in µs,
one run side by side per row; no assertions.
"""

from __future__ import annotations

import argparse
from fractions import Fraction
from typing import Any

from resilientcc.bounds import latency_lower_bound
from resilientcc.schedules.generators import generate
from resilientcc.schedules.optcc import (
    PIPELINE_MAX_SERVERS,
    optcc_view,
    ring_options,
    small_only,
)
from resilientcc.sim import simulate
from resilientcc.topology import apply_fail_specs, hierarchical
from resilientcc.topology.model import Topology
from resilientcc.units import parse_size

CLUSTERS = ("8/0:1", "16/0:1", "16/0:4", "8/0:4", "4/0:4", "4/0:1", "4/-", "8/-", "16/-")


def build(spec: str) -> Topology:
    servers, pattern = spec.split("/")
    topo = hierarchical(int(servers), 8)
    return topo if pattern == "-" else apply_fail_specs(topo, pattern.split("+"))


def before(topo: Topology, size: Fraction, variant: str) -> tuple[str, dict[str, Any]]:
    """What OptCC ran before the small-buffer defaults, as options: where the default is
    not the hierarchical ring, the same; where it is only because the buffer is small,
    the variant for a large buffer (``hier_ring=False``), and with no degraded server
    above 8 servers NCCL's ring (which large buffers ran there until the direct network
    pass, ``optcc.healthy_network``); else the hierarchical ring with rings at the rings'
    depth (up to 63 servers: halving from 64)."""
    if variant != "hierarchical ring":
        return "unchanged", {}
    servers = optcc_view(topo)
    healthy = all(sv.healthy for sv in servers) and len(servers) > PIPELINE_MAX_SERVERS
    if healthy or small_only(servers, size):
        return "large-buffer variant", {"hier_ring": False}
    return "rings", ring_options(size, len(servers))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1MiB,4MiB,16MiB,32MiB")
    ap.add_argument("--clusters", default="all", help="';'-separated SERVERS/PATTERN")
    a = ap.parse_args()
    clusters = CLUSTERS if a.clusters == "all" else tuple(a.clusters.split(";"))
    print(
        f"{'cluster':>8} {'size':>6} {'default':>9} {'before':>9} {'ratio':>6}"
        f" {'lat. bound':>10}  default's variant / network; before"
    )
    for spec in clusters:
        topo = build(spec)
        for text in a.sizes.split(","):
            size = Fraction(parse_size(text))
            new = generate("optcc", topo, size, check=False)
            what, opts = before(topo, size, str(new.meta_get("variant")))
            old = generate("optcc", topo, size, check=False, **opts)
            t_new = simulate(new, topo).time_s
            t_old = simulate(old, topo).time_s
            lat = float(latency_lower_bound(topo, size).seconds)
            shape = f"{new.meta_get('variant')} / {new.meta_get('network') or '-'}"
            print(
                f"{spec:>8} {text:>6} {t_new * 1e6:9.1f} {t_old * 1e6:9.1f}"
                f" {t_new / t_old:6.3f} {lat * 1e6:10.1f}  {shape}; {what}",
                flush=True,
            )


if __name__ == "__main__":
    main()
