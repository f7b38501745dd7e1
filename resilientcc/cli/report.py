"""``rcc report``: the flagship table (bound, ring, Balance, R2CC, OptCC) and its plot."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from resilientcc.cli.app import app
from resilientcc.cli.common import handle_errors, parse_size_option
from resilientcc.errors import InputError

__all__ = ["report"]


def _entries(text: str, what: str) -> list[str]:
    """The comma-separated entries of an option; an empty one is an error."""
    parts = [x.strip() for x in text.split(",")]
    if not any(parts):
        raise InputError(f"{what}: empty list")
    if not all(parts):
        raise InputError(f"{what}: an empty entry in {text!r}")
    return parts


def _ints(text: str, what: str) -> list[int]:
    parts = _entries(text, what)
    try:
        return [int(x) for x in parts]
    except ValueError:
        raise InputError(f"{what}: expected comma-separated integers, got {text!r}") from None


def _sizes(text: str) -> list[int]:
    return [int(parse_size_option(x, "--sizes")) for x in _entries(text, "--sizes")]


@app.command("report")
@handle_errors
def report(
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Directory for table.json, table.md, headline.md, overhead.png."
        ),
    ] = Path("rcc-report"),
    servers: Annotated[
        str, typer.Option("--servers", help="Server counts, comma-separated.")
    ] = "4,8,16",
    lost: Annotated[
        str, typer.Option("--lost", help="NICs (of 8) server 0 loses, comma-separated.")
    ] = "1,2,4",
    sizes: Annotated[str, typer.Option("--sizes", help="Message sizes, comma-separated.")] = "1GiB",
    quick: Annotated[
        bool, typer.Option("--quick", help="4 servers only (about 15 s on 2 cores).")
    ] = False,
    workers: Annotated[
        int, typer.Option("--workers", help="Processes (default: CPUs, at most 4).")
    ] = 0,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Ignore times cached in OUT/cache.json by earlier runs.")
    ] = False,
) -> None:
    """Simulate the flagship comparison and write the table and the overhead plot.

    For each server count (8 × H100, 8 × 400 Gb/s NICs each) and NIC loss of server 0:
    the LP lower bound and the simulated times of ring, balance, r2cc_allreduce and
    optcc, with their overheads against the fault-free ring and the fault-free bound.
    Each time comes with its latency part (a second simulation with zero latencies). The
    full grid (4, 8, 16 servers) took about 3 minutes on 2 cores with the compiled
    simulator, every schedule checked exactly before it is simulated (OptCC's 8- and
    16-server schedules have up to 6.6M transfers; with the Python loop the grid takes an
    hour or more); --quick does 4 servers in about 15 s. Simulated times are cached in
    OUT/cache.json, so an interrupted run resumes.

    For any other cluster or failure, rcc sim all (with the topology options and
    --fail) compares the algorithms in one table.
    """
    from resilientcc.report import (
        FileCache,
        flagship,
        rows_to_headline,
        rows_to_markdown,
        write_report,
    )

    srv = [4] if quick else _ints(servers, "--servers")
    ks = _ints(lost, "--lost")
    if any(n < 2 for n in srv):
        raise InputError("--servers: every server count must be at least 2")
    if any(not 0 < k < 8 for k in ks):
        raise InputError("--lost: NIC losses must be between 1 and 7")
    szs = _sizes(sizes)
    if workers < 0:
        raise InputError("--workers: must not be negative")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out: {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"--out: cannot create {out} ({e.strerror or e})") from None

    def say(msg: str) -> None:
        typer.echo(msg, err=True)

    cache = FileCache(out / "cache.json", fresh=fresh)
    if cache.skipped:
        say(f"{out / 'cache.json'}: not times, simulated again: {cache.skipped} entries")
    rows = flagship(srv, ks, szs, workers=workers or None, progress=say, cache=cache)
    paths = write_report(rows, out)
    typer.echo(rows_to_markdown(rows))
    typer.echo("In short (Balance, R2CC and OptCC × the fault-free ring, the fastest in bold):")
    typer.echo(rows_to_headline(rows))
    typer.echo(f"wrote {', '.join(str(p) for p in paths.values())}")
