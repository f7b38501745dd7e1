"""Reproduce the flagship table of docs/reproducing.md.

Simulates ring, balance, r2cc_allreduce and optcc on N x 8-GPU clusters where server 0
lost k of its 8 NICs, at the given sizes, and writes the Markdown table (and JSON) into
an output directory. Results are cached in ``<out>/cache.json`` so an interrupted run
resumes; ``--redo ALGO`` recomputes one algorithm.

Usage::

    python scripts/reproduce_table.py --servers 4,8,16 --lost 1,2,4 --sizes 1GiB,256MiB \
        --out docs_src/reproduce
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from resilientcc.report import FileCache, flagship, rows_to_markdown, write_report
    from resilientcc.units import parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="4,8,16")
    ap.add_argument("--lost", default="1,2,4")
    ap.add_argument("--sizes", default="1GiB,256MiB")
    ap.add_argument("--algorithms", default="ring,balance,r2cc_allreduce,optcc")
    ap.add_argument("--out", default="docs_src/reproduce")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--redo", action="append", default=[], help="recompute this algorithm")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = FileCache(out / "cache.json")
    for algo in args.redo:
        cache.drop(algo)
    servers = [int(x) for x in args.servers.split(",")]
    lost = [int(x) for x in args.lost.split(",")]
    sizes = [int(parse_size(x)) for x in args.sizes.split(",")]
    algos = args.algorithms.split(",")
    rows = flagship(
        servers,
        lost,
        sizes,
        algos,
        workers=args.workers or None,
        progress=lambda m: print(m, file=sys.stderr, flush=True),
        cache=cache,
    )
    write_report(rows, out)
    print(rows_to_markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
