"""Reproduce the flagship table of docs/reproducing.md.

Simulates ring, balance, r2cc_allreduce and optcc on N x 8-GPU clusters where server 0
lost k of its 8 NICs, at the given sizes, and writes the Markdown table (and JSON) into
an output directory. Results are cached in ``<out>/cache.json`` so an interrupted run
resumes; ``--redo ALGO`` recomputes one algorithm.

Usage::

    python scripts/reproduce_table.py --servers 4,8,16 --lost 1,2,4 --sizes 1GiB,256MiB \
        --out docs_src/reproduce

``--docs`` regenerates what the docs include: ``table-n4.md`` (1 GiB and 256 MiB),
``table-n8.md`` and ``table-n16.md`` (1 GiB), with their JSON, and ``headline.md`` in
``--out`` (by default ``docs_src/reproduce``), and the plots ``docs/img/overhead-nN.png``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

#: what ``--docs`` regenerates: server counts and their sizes
DOCS_GRID = ((4, "1GiB,256MiB"), (8, "1GiB"), (16, "1GiB"))
ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    from resilientcc.report import (
        FileCache,
        flagship,
        rows_to_headline,
        rows_to_markdown,
        write_report,
    )
    from resilientcc.topology.io import atomic_write_text
    from resilientcc.units import parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="4,8,16")
    ap.add_argument("--lost", default="1,2,4")
    ap.add_argument("--sizes", default="1GiB,256MiB")
    ap.add_argument("--algorithms", default="ring,balance,r2cc_allreduce,optcc")
    ap.add_argument("--out", default=str(ROOT / "docs_src" / "reproduce"))
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--redo", action="append", default=[], help="recompute this algorithm")
    ap.add_argument(
        "--docs",
        action="store_true",
        help="regenerate the docs' tables, headline and plots (ignores --servers and --sizes)",
    )
    ap.add_argument("--img", default=str(ROOT / "docs" / "img"), help="plots' folder for --docs")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = FileCache(out / "cache.json")
    for algo in args.redo:
        cache.drop(algo)
    lost = [int(x) for x in args.lost.split(",")]
    algos = args.algorithms.split(",")
    grid = DOCS_GRID if args.docs else ((None, args.sizes),)
    everything = []
    for n, size_list in grid:
        servers = [n] if n is not None else [int(x) for x in args.servers.split(",")]
        sizes = [int(parse_size(x)) for x in size_list.split(",")]
        rows = flagship(
            servers,
            lost,
            sizes,
            algos,
            workers=args.workers or None,
            progress=lambda m: print(m, file=sys.stderr, flush=True),
            cache=cache,
        )
        everything += rows
        if n is None:
            write_report(rows, out)
        else:
            paths = write_report(rows, out, suffix=f"-n{n}", headline=False)
            img = Path(args.img)
            img.mkdir(parents=True, exist_ok=True)
            os.replace(paths["plot"], img / f"overhead-n{n}.png")
        print(rows_to_markdown(rows))
    if args.docs:
        atomic_write_text(out / "headline.md", rows_to_headline(everything))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
