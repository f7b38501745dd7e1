"""OptCC's tree packing against its layered rules on degraded servers that differ.

Usage::

    python benchmarks/bench_unlike_trees.py [--seeds 0:400] [--large] [--sizes 16MiB,32MiB,64MiB] [-v]

On three degraded servers or more that are not all alike, up to ``TREES_MAX_GPUS``
GPUs, OptCC packs trees (``optcc.trees_rule``): from ``TREES_SMALL_MIN_BYTES`` on up to
``TREES_SMALL_MAX_GPUS`` GPUs, from ``TREES_MIN_BYTES`` above. This measures the rule
on the random clusters of ``scripts/random_audit.py`` (``--large``: its large draw)
where its condition holds: for every size, OptCC's variant without the trees
(``trees=False``: the hierarchical ring, the ordered rings, ...) and the trees are
generated and simulated side by side. It prints one line per case with ``-v``, then a
table per size and number of GPUs: cases, how many the trees won, the geometric mean,
the worst and the best of the trees' time over the other's, and in how many OptCC's
rules give the trees (this rule, or where the others leave only the direct schedule,
``fallback_trees_rule``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from resilientcc.schedules.optcc import TREES_MAX_GPUS, unlike_trees
from resilientcc.topology.model import Topology
from resilientcc.units import format_size

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from random_audit import case_options, parse_seeds, parse_sizes, ratio_cells, trees_cases

#: the GPU counts the table groups the clusters by (upper ends, inclusive)
GPU_BINS = (16, 24, 32, TREES_MAX_GPUS)

#: ``(bytes, GPU bin) -> [(trees / other, whether the rule gives the trees), ...]``
Results = dict[tuple[int, int], list[tuple[float, bool]]]


def measure(seeds: range, large: bool, sizes: Sequence[Fraction], verbose: bool = False) -> Results:
    """:data:`Results` for the clusters of ``seeds`` where the trees rule's condition
    (three degraded servers or more, not all alike, up to ``TREES_MAX_GPUS`` GPUs) holds."""

    def bin_of(topo: Topology) -> tuple[tuple[object, ...], str] | None:
        if not unlike_trees(topo):
            return None
        return (min(b for b in GPU_BINS if topo.num_ranks <= b),), ""

    return trees_cases(seeds, large, sizes, bin_of, verbose)  # type: ignore[return-value]


def table(results: Results) -> str:
    """The markdown table of :func:`measure`'s results."""
    lines = [
        "| size | GPUs | cases | trees faster | geometric mean | worst | best | OptCC: trees |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (size, gpus), rows in sorted(results.items()):
        ratios = [r for r, _ in rows]
        low = max((b for b in GPU_BINS if b < gpus), default=0) + 1
        lines.append(
            f"| {format_size(size)} | {low}–{gpus} | {len(rows)} | {ratio_cells(ratios)} |"
            f" {sum(c for _, c in rows)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = case_options(__doc__.split("\n\n")[0], "0:400", "16MiB,32MiB,64MiB")
    args = ap.parse_args(argv)
    results = measure(parse_seeds(args.seeds), args.large, parse_sizes(args.sizes), args.verbose)
    print(table(results) if results else "no cluster where the rule's condition holds")


if __name__ == "__main__":
    main()
