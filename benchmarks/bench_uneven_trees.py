"""OptCC's tree packing against its layered rules where a server's alive NICs differ in speed.

Usage::

    python benchmarks/bench_uneven_trees.py [--seeds 0:1600] [--large] [--sizes 16MiB,64MiB] [-v]

OptCC's layered schedules see a server's NICs alike: where its alive NICs differ in
speed (one NIC slowed, say) they keep the fastest NICs that carry the most together
and leave the rest unused (``optcc.uneven_loss``: the largest share of a server's
bandwidth so dropped; one NIC at half speed of two drops a third). The tree packing
prices every link as it is. This measures the two on the random clusters of
``scripts/random_audit.py`` (``--large``: its large draw) where some server loses
bandwidth so, on two servers or more, up to ``TREES_MAX_GPUS`` GPUs: for every size,
OptCC's variant without the trees (``trees=False``) and the trees are generated and
simulated side by side. It prints one line per case with ``-v``, then a table per size,
number of servers (two, or three and more) and share dropped: cases, how many the trees
won, the geometric mean, the worst and the best of the trees' time over the other's, in
how many OptCC's rules give the trees (``uneven_trees_rule``, or another of its tree
rules), and OptCC's choice over the faster of the two: the geometric mean, and how
many cases it leaves more than 5 % behind.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from resilientcc.schedules.optcc import TREES_MAX_GPUS, uneven_loss
from resilientcc.topology.model import Topology
from resilientcc.units import format_size

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from random_audit import case_options, parse_seeds, parse_sizes, ratio_cells, trees_cases

#: the shares of a server's bandwidth dropped that the table groups the clusters by
#: (lower ends, inclusive)
LOSS_BINS = (Fraction(0), Fraction(1, 8), Fraction(1, 5))

#: OptCC's choice counts as behind where it takes more than this × the faster's time
BEHIND = 1.05

#: ``(bytes, two servers or more, loss bin) -> [(trees / other, rules give trees)]``
Results = dict[tuple[int, str, Fraction], list[tuple[float, bool]]]


def measure(seeds: range, large: bool, sizes: Sequence[Fraction], verbose: bool = False) -> Results:
    """:data:`Results` for the clusters of ``seeds`` where a server's alive NICs differ in
    speed (``uneven_loss`` above 0), on two servers or more and up to ``TREES_MAX_GPUS``
    GPUs."""

    def bin_of(topo: Topology) -> tuple[tuple[object, ...], str] | None:
        if topo.num_ranks > TREES_MAX_GPUS or len(topo.servers) < 2:
            return None
        loss = uneven_loss(topo)
        if not loss:
            return None
        servers = "2" if len(topo.servers) == 2 else "3+"
        return (servers, max(b for b in LOSS_BINS if b <= loss)), f" drops {float(loss):.3f},"

    return trees_cases(seeds, large, sizes, bin_of, verbose)  # type: ignore[return-value]


def table(results: Results) -> str:
    """The markdown table of :func:`measure`'s results."""
    lines = [
        "| size | servers | share dropped | cases | trees faster | geometric mean | worst"
        " | best | OptCC: trees | choice / faster | behind |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (size, servers, low), rows in sorted(results.items()):
        ratios = [r for r, _ in rows]
        high = min((b for b in LOSS_BINS if b > low), default=None)
        span = f"{low}–{high}" if high is not None else f"{low} or more"
        # OptCC's choice over the faster of the two
        choice = [(r if chosen else 1.0) / min(r, 1.0) for r, chosen in rows]
        lines.append(
            f"| {format_size(size)} | {servers} | {span} | {len(rows)} | {ratio_cells(ratios)} |"
            f" {sum(c for _, c in rows)} |"
            f" {statistics.geometric_mean(choice):.3f} | {sum(c > BEHIND for c in choice)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = case_options(__doc__.split("\n\n")[0], "0:400", "16MiB,64MiB")
    args = ap.parse_args(argv)
    results = measure(parse_seeds(args.seeds), args.large, parse_sizes(args.sizes), args.verbose)
    print(table(results) if results else "no cluster where a server's alive NICs differ in speed")


if __name__ == "__main__":
    main()
