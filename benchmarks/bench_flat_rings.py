"""OptCC's flat rings against the direct schedule, by the rings' latency over their bandwidth time.

Usage::

    python benchmarks/bench_flat_rings.py [--set fit|held-out|healthy] [--sizes 1MiB,64MiB,1GiB]

Where one server is mildly degraded and the layered schedules do not run (servers with
fewer NICs than GPUs, say), OptCC's rules used to give flat rings over every GPU at any
size: the weighted ring above 8 servers, the split (rings on a part ``f`` of the buffer,
the decoupled direct schedule on the rest) below. ``optcc.rings_pay`` now lets them run
only where :func:`~resilientcc.schedules.optcc.ring_latency_ratio` says their latency
pays, and the split not at all on servers with fewer NICs than GPUs. For each cluster
of the set and each size this simulates both sides, the rings
(the weighted ring, or the split with ``f`` from ``split_fraction``) and the direct
schedule alone (``ring_fraction=0``), and prints the ratio, both times, the direct
schedule's time over the rings' and what OptCC runs now; then, per kind of cluster and
side of the limit, how often the direct schedule was faster. ``fit`` is the set the
limits were drawn from, ``held-out`` other clusters and sizes, ``healthy`` clusters
with no degraded server, NCCL's ring against the direct schedule (the first six
clusters the fit, the rest held out; each at its own sizes unless ``--sizes``).
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from resilientcc.schedules._build import ServerInfo
from resilientcc.schedules.optcc import (
    RINGS_MAX_LATENCY_RATIO,
    RINGS_ONE_NIC_MAX_LATENCY_RATIO,
    balanced_shares,
    choose_variant,
    optcc,
    optcc_view,
    ring_latency_ratio,
    split_fraction,
)
from resilientcc.schedules.ring import ring
from resilientcc.sim import simulate
from resilientcc.topology import apply_fail_specs, hierarchical
from resilientcc.topology.model import Topology
from resilientcc.units import format_size, format_time, parse_size

#: (servers, GPUs per server, NICs per server, failures, the layered variants refused)
Cluster = tuple[int, int, int, tuple[str, ...], bool]

_SIZES = "4KiB,64KiB,1MiB,4MiB,16MiB,32MiB,64MiB,128MiB,256MiB,512MiB,1GiB"
FIT: tuple[tuple[Cluster, str], ...] = (
    ((5, 8, 4, ("1:nic0x3/4",), False), "4KiB,64KiB,1MiB"),
    ((8, 8, 4, ("1:nic0x3/4",), False), _SIZES),
    ((8, 8, 2, ("0:x3/4",), False), _SIZES),
    ((6, 8, 1, ("4:x3/4",), False), _SIZES),
    ((12, 8, 4, ("0:1",), False), _SIZES),
    ((16, 8, 4, ("2:nic3x1/2",), False), "32MiB,128MiB,512MiB,1GiB"),
    ((10, 4, 1, ("0:x7/8",), False), "4KiB,1MiB,16MiB,64MiB,256MiB,1GiB"),
    ((16, 4, 1, ("0:x7/8",), False), "4KiB,1MiB,16MiB,64MiB,256MiB,1GiB"),
    ((16, 8, 2, ("3:x7/8",), False), "4KiB,1MiB,16MiB,64MiB,256MiB,1GiB"),
    ((8, 8, 8, ("0:1",), True), "64KiB,1MiB,16MiB,64MiB,256MiB,1GiB"),
    ((4, 8, 8, ("0:1",), True), "64KiB,1MiB,16MiB,64MiB,256MiB,1GiB"),
    ((12, 8, 8, ("0:2",), True), "64KiB,1MiB,16MiB,64MiB,256MiB,1GiB"),
)
_HELD = "2MiB,8MiB,24MiB,48MiB,96MiB,192MiB,384MiB,768MiB"
HELD_OUT: tuple[tuple[Cluster, str], ...] = (
    ((7, 8, 4, ("2:1",), False), _HELD),
    ((10, 8, 2, ("0:x3/4",), False), _HELD),
    ((14, 8, 4, ("5:1",), False), _HELD),
    ((20, 4, 2, ("1:nic0x3/4",), False), _HELD),
    ((9, 8, 4, ("3:nic0x1/2",), False), _HELD),
    ((12, 4, 1, ("0:x7/8",), False), _HELD),
    ((12, 8, 2, ("0:x7/8",), False), _HELD),
    ((5, 8, 2, ("0:x3/4",), False), "2MiB"),
    ((8, 4, 1, ("0:x3/4",), False), "2MiB"),
    ((6, 8, 8, ("0:1",), True), _HELD),
    ((9, 8, 5, ("0:1",), False), "8MiB,32MiB,256MiB"),
    ((6, 8, 4, ("0:1",), False), "32MiB,128MiB,256MiB"),
)
_HEALTHY = "1MiB,16MiB,64MiB,256MiB,1GiB"
_HEALTHY_HELD = "2MiB,8MiB,24MiB,48MiB,96MiB,384MiB"
#: no degraded server: NCCL's ring against the direct schedule (the first six the fit,
#: the rest held out)
HEALTHY: tuple[tuple[Cluster, str], ...] = (
    ((8, 8, 4, (), False), _HEALTHY),
    ((6, 8, 2, (), False), _HEALTHY),
    ((16, 4, 1, (), False), _HEALTHY),
    ((12, 8, 4, (), False), _HEALTHY),
    ((6, 8, 4, (), False), _HEALTHY),
    ((10, 8, 1, (), False), _HEALTHY),
    ((7, 8, 2, (), False), _HEALTHY_HELD),
    ((20, 4, 2, (), False), _HEALTHY_HELD),
    ((9, 8, 4, (), False), _HEALTHY_HELD),
    ((16, 8, 2, (), False), _HEALTHY_HELD),
    ((11, 4, 1, (), False), _HEALTHY_HELD),
)
SETS = {"fit": FIT, "held-out": HELD_OUT, "healthy": HEALTHY}
_REFUSED: dict[str, Any] = {"pipeline": False, "hier_ring": False}


def topology_of(cluster: Cluster) -> Topology:
    n, g, k, fails, _ = cluster
    return apply_fail_specs(hierarchical(n, g, nics_per_server=k), list(fails))


def describe(cluster: Cluster) -> str:
    n, g, k, fails, refused = cluster
    return f"{n} x {g} GPUs, {k} NICs, {'+'.join(fails) or 'no failure'}" + (
        " (layered refused)" if refused else ""
    )


def rings_side(
    topo: Topology, view: Sequence[ServerInfo], size: Fraction, refused: bool
) -> tuple[str, dict[str, Any]]:
    """The rings OptCC's rules gave before the latency limit: NCCL's ring with no
    degraded server, the weighted ring where it is the rule at 1 GiB, else the split with
    its bandwidth-only ring part (``view``: OptCC's view of ``topo`` at ``size``)."""
    opts = _REFUSED if refused else {}
    if all(sv.healthy for sv in view):
        return "NCCL's ring", {"ring": True}
    if choose_variant(topo, Fraction(2**30), **opts).variant == "weighted_ring":
        return "weighted ring", {"weighted_ring": True}
    f = split_fraction(view, balanced_shares({sv.index: sv.bandwidth for sv in view}))
    return f"split f={f}", {"ring_fraction": f, **opts}


def side(ratio: float, fewer: bool, rings: str) -> str:
    """Where a case falls under OptCC's rule: the split on servers with fewer NICs than
    GPUs never runs; otherwise the rings run where the ratio is at most the limit."""
    if rings == "NCCL's ring":
        limit = RINGS_MAX_LATENCY_RATIO if fewer else RINGS_ONE_NIC_MAX_LATENCY_RATIO
        return f"no degraded server, NCCL's ring, ratio {'>' if ratio > limit else '<='} {limit}"
    if fewer and rings.startswith("split"):
        return "fewer NICs than GPUs, the split"
    limit = RINGS_MAX_LATENCY_RATIO if fewer else RINGS_ONE_NIC_MAX_LATENCY_RATIO
    kind = "fewer NICs than GPUs, the weighted ring" if fewer else "a NIC per GPU, the split"
    return f"{kind}, ratio {'>' if ratio > limit else '<='} {limit}"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), default="fit", help="the clusters (default fit)")
    ap.add_argument("--sizes", help="comma-separated sizes for every cluster")
    ap.add_argument("--clusters", type=int, help="only the first N clusters of the set")
    args = ap.parse_args(argv)
    chosen = SETS[args.set][: args.clusters]
    groups: dict[str, list[float]] = defaultdict(list)
    print("| cluster | size | ratio | rings | rings' time | direct | direct / rings | OptCC now |")
    print("|---|---|---|---|---|---|---|---|")
    for cluster, sizes in chosen:
        topo = topology_of(cluster)
        fewer = cluster[2] < cluster[1]
        for text in (args.sizes or sizes).split(","):
            size = Fraction(parse_size(text))
            view = optcc_view(topo, size)
            rings, asked = rings_side(topo, view, size, cluster[4])
            if rings == "split f=0":
                continue  # the straggler owns nothing here: no rings either way
            ratio = ring_latency_ratio(view, size)
            rings_schedule = (
                ring(topo, size, check=False)
                if asked.get("ring")
                else optcc(topo, size, check=False, **asked)
            )
            t_rings = simulate(rings_schedule, topo).time_s
            alone: dict[str, Any] = (
                {"direct": True} if rings == "NCCL's ring" else {"ring_fraction": Fraction(0)}
            )
            t_direct = simulate(optcc(topo, size, check=False, **alone), topo).time_s
            now = optcc(topo, size, check=False, **(_REFUSED if cluster[4] else {}))
            groups[side(ratio, fewer, rings)].append(t_direct / t_rings)
            print(
                f"| {describe(cluster)} | {format_size(size)} | {ratio:.2f} | {rings} |"
                f" {format_time(t_rings)} | {format_time(t_direct)} | {t_direct / t_rings:.3f} |"
                f" {now.meta_get('variant')} |",
                flush=True,
            )
    print()
    print("| where | cases | direct faster | median direct / rings | range |")
    print("|---|---|---|---|---|")
    for where, ratios in sorted(groups.items()):
        print(
            f"| {where} | {len(ratios)} | {sum(r < 1 for r in ratios)} |"
            f" {statistics.median(ratios):.3f} | {min(ratios):.3f}–{max(ratios):.3f} |"
        )


if __name__ == "__main__":
    main()
