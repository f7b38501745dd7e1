"""OptCC's tree packing against the schedule its layered rules fall back to.

Usage::

    python benchmarks/bench_fallback_trees.py [--seeds 0:100] [--large] [--sizes 8MiB,64MiB,256MiB] [--servers N] [--by-time] [--by-gpus]

Where OptCC's layered rules leave only the direct schedule or NCCL's ring (servers with
fewer NICs than GPUs, degraded servers that differ, ...), it packs trees
(``fallback_trees_rule``). This measures that rule on the random clusters of
``scripts/random_audit.py`` (``--large``: its large draw): for every seed whose cluster
has two GPUs or more and at most ``TREES_MAX_GPUS``, and every size where
``choose_variant(..., trees=False)`` gives the direct schedule or the ring, both
schedules are generated and simulated side by side, and the trees' time over the
fallback's is kept (below 1: the trees faster). It prints one line per case with
``-v``, then a table per size, fallback and server count: cases, how many the trees
won, the median, worst and best ratio, the median time to pack the trees, and how far
OptCC's default choice was from the faster of the two (geometric mean, and the cases
more than 5 % behind). ``--by-time`` groups the cases by the size read at 400 GB/s
(``optcc.pieces_bytes``: the size times 400 GB/s over the fastest server's bandwidth),
the scale the fallback rules read; ``--by-gpus`` splits three servers or more by their
number of GPUs, as ``FALLBACK_TREES_MIN_BYTES`` does.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from resilientcc.schedules.optcc import (
    FALLBACK_TREES_MIN_BYTES,
    TREES_MAX_GPUS,
    choose_variant,
    optcc,
    optcc_view,
    pieces_bytes,
)
from resilientcc.sim import simulate
from resilientcc.units import format_size

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from random_audit import case_options, draw_case, parse_seeds, parse_sizes

#: ``(size or its bin, fallback, servers) -> [(trees / fallback, packing seconds,
#: OptCC's default choice over the faster of the two), ...]``; ``servers`` is ``(rank,
#: fewest GPUs of its bin, label)``, so that the rows sort one, two, then three servers
#: or more by GPUs
Results = dict[tuple[int, str, tuple[int, int, str]], list[tuple[float, float, float]]]

#: with ``--by-time``, the bins (bytes read at 400 GB/s, :func:`pieces_bytes`) cases fall in
TIME_BINS = (0, 2**19, 2**21, 2**23, 2**25, 2**27)


def gpu_bin(gpus: int) -> tuple[int, str]:
    """The bin of ``FALLBACK_TREES_MIN_BYTES`` a cluster of ``gpus`` GPUs falls in: its
    fewest GPUs, and its label."""
    low = 1
    for most, _ in FALLBACK_TREES_MIN_BYTES:
        if gpus <= most:
            return low, f"{low}–{most}"
        low = most + 1
    return low, f"{low}+"


def time_bin(read: Fraction) -> int:
    """The largest of :data:`TIME_BINS` at or below ``read``."""
    return max(b for b in TIME_BINS if b <= read)


def measure(
    seeds: range,
    large: bool,
    sizes: Sequence[Fraction],
    verbose: bool = False,
    servers: int | None = None,
    by_time: bool = False,
    by_gpus: bool = False,
) -> Results:
    """:data:`Results`; only clusters of ``servers`` servers if given; with ``by_time``
    keyed by the bin of the size read at 400 GB/s instead of the size; with ``by_gpus``
    clusters of three servers or more also by their number of GPUs (the bins of
    ``FALLBACK_TREES_MIN_BYTES``)."""
    out: Results = defaultdict(list)
    for seed in seeds:
        case = draw_case(seed, large)
        topo = case.topology
        n = len(topo.servers)
        if topo.num_ranks > TREES_MAX_GPUS or topo.num_ranks < 2 or servers not in (None, n):
            continue
        view = optcc_view(topo) if by_time else None
        where = (min(n, 3) - 1, 0, {1: "one", 2: "two"}.get(n, "3 or more"))
        if by_gpus and n > 2:
            low, label = gpu_bin(topo.num_ranks)
            where = (2, low, f"3 or more, {label} GPUs")
        for size in sizes:
            fallback = choose_variant(topo, size, trees=False).variant
            if fallback not in ("direct", "ring"):
                continue
            base = simulate(optcc(topo, size, trees=False), topo).time_s
            t0 = time.perf_counter()
            trees = optcc(topo, size, trees=True)
            packing = time.perf_counter() - t0
            ratio = simulate(trees, topo).time_s / base
            chosen = ratio if choose_variant(topo, size).variant == "trees" else 1.0
            key = time_bin(pieces_bytes(view, size)) if view is not None else int(size)
            out[key, fallback, where].append((ratio, packing, chosen / min(ratio, 1.0)))
            if verbose:
                print(f"seed {seed}: {case.desc.rsplit(';', 1)[0]}; {format_size(size)}, {fallback}:"
                      f" trees {ratio:.3f} x ({packing:.1f} s to pack)", flush=True)  # fmt: skip
    return out


def table(results: Results, by_time: bool = False) -> str:
    """The markdown table of :func:`measure`'s results: per size (or bin), fallback and
    server count, how often the trees won, their ratios, the packing time, and how far
    OptCC's default choice was from the faster of the two (geometric mean; cases more
    than 5 % behind)."""
    head = "read at 400 GB/s, from" if by_time else "size"
    lines = [
        f"| {head} | fallback | servers | cases | trees faster | median | worst | best"
        " | packing | choice / faster | behind > 5 % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (size, fallback, (_, _, servers)), rows in sorted(results.items()):
        ratios = [r for r, _, _ in rows]
        pack = statistics.median(p for _, p, _ in rows)
        lost = [c for _, _, c in rows]
        lines.append(
            f"| {format_size(size)} | {fallback} | {servers} | {len(rows)} | {sum(r < 1 for r in ratios)} |"
            f" {statistics.median(ratios):.3f} | {max(ratios):.3f} | {min(ratios):.3f} |"
            f" {pack:.1f} s | {statistics.geometric_mean(lost):.3f} | {sum(c > 1.05 for c in lost)} |"
        )  # fmt: skip
    every = [c for rows in results.values() for _, _, c in rows]
    lines.append(
        f"\nOptCC's choice over the faster of the two, every case: geometric mean"
        f" {statistics.geometric_mean(every):.3f}, more than 5 % behind in"
        f" {sum(c > 1.05 for c in every)} of {len(every)}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = case_options(__doc__.split("\n\n")[0], "0:100", "8MiB,64MiB,256MiB")
    ap.add_argument("--servers", type=int, help="only clusters of this many servers")
    ap.add_argument(
        "--by-time",
        action="store_true",
        help="group by the size read at 400 GB/s (pieces_bytes) instead of the size",
    )
    ap.add_argument(
        "--by-gpus",
        action="store_true",
        help="split three servers or more by their number of GPUs",
    )
    args = ap.parse_args(argv)
    results = measure(
        parse_seeds(args.seeds),
        args.large,
        parse_sizes(args.sizes),
        args.verbose,
        args.servers,
        args.by_time,
        args.by_gpus,
    )
    print(table(results, args.by_time) if results else "no case where OptCC falls back")


if __name__ == "__main__":
    main()
