"""``rcc verify FILE``: prove a schedule lossless, race-free, deadlock-free (and failover-lossless).

Exit codes: 0 proved, 1 violated (the counterexample is printed), 3 unknown (the
solver gave up or ran out of time), 2 bad input (missing or malformed file).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from resilientcc.cli.app import app
from resilientcc.cli.common import handle_errors, load_schedule_file
from resilientcc.errors import InputError

__all__ = ["EXIT_CODES", "verify_command"]

#: from this many transfers ``rcc verify`` says on stderr what it is checking
PROGRESS_TRANSFERS = 50_000

#: verdict -> exit code
EXIT_CODES = {"proved": 0, "violated": 1, "unknown": 3}


def progress_for(transfers: int) -> Callable[[str, Any], None] | None:
    """``verify(progress=)`` that says on stderr what it checks, for schedules of
    :data:`PROGRESS_TRANSFERS` transfers or more (``None`` below: quiet)."""
    if transfers < PROGRESS_TRANSFERS:
        return None
    started: dict[str, float] = {}

    def say(prop: str, result: Any) -> None:
        if result is None:
            started[prop] = time.monotonic()
            typer.echo(f"checking {prop} over {transfers:,} transfers...", err=True)
        else:
            secs = time.monotonic() - started[prop]
            typer.echo(f"  {result.verdict} in {secs:.0f} s", err=True)

    return say


@app.command("verify")
@handle_errors
def verify_command(
    file: Annotated[
        Path,
        typer.Argument(help="Schedule file: JSON (rcc synth -o FILE) or MSCCL XML (.xml)."),
    ],
    failover: Annotated[
        bool, typer.Option("--failover", help="Also prove failover-lossless.")
    ] = False,
    failures: Annotated[
        int, typer.Option("--failures", help="Failed channels for --failover: 1 or 2.")
    ] = 1,
    no_dedup: Annotated[
        bool,
        typer.Option("--no-dedup", help="Model a receiver that does not deduplicate re-sends."),
    ] = False,
    gpus_per_server: Annotated[
        int | None,
        typer.Option("--gpus-per-server", help="Fail a channel on one server at a time."),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Solver budget in seconds (then: unknown).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Prove a schedule correct with Z3, or print a counterexample."""
    from resilientcc.verify import verify

    if failures not in (1, 2):
        raise InputError(f"--failures: must be 1 or 2, got {failures}")
    if timeout is not None and timeout <= 0:
        raise InputError(f"--timeout: must be positive, got {timeout}")
    if gpus_per_server is not None and gpus_per_server < 1:
        raise InputError(f"--gpus-per-server: must be positive, got {gpus_per_server}")
    schedule = load_schedule_file(file)
    report = verify(
        schedule,
        failover=failover,
        failures=failures,
        dedup=not no_dedup,
        gpus_per_server=gpus_per_server,
        timeout_s=timeout,
        progress=progress_for(len(schedule.transfers)),
    )
    if as_json:
        typer.echo(json.dumps(report.to_dict()))
    else:
        typer.echo(str(report))
    raise typer.Exit(EXIT_CODES[report.verdict])
