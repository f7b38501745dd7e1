"""``--tune`` of ``rcc synth`` and ``rcc sim``: a generator's variants simulated, the fastest kept.

The library call is :func:`resilientcc.sim.tune.tune`; this module says on stderr what
each variant took and turns the result into the ``tune`` object of ``rcc sim --json``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Annotated, Any

import typer

from resilientcc.errors import InputError
from resilientcc.topology.model import Topology
from resilientcc.units import format_time

if TYPE_CHECKING:  # the simulator is imported when a command runs, not with the CLI
    from resilientcc.sim.tune import Trial, TuneResult

__all__ = ["TuneOpt", "tune_report", "tuned_schedule"]

TuneOpt = Annotated[
    bool,
    typer.Option(
        "--tune",
        help="Generate each of the algorithm's variants (optcc: its rules' choice, ordered "
        "rings, hierarchical ring, pipelined, weighted ring, direct), simulate them on the "
        "cluster and keep the fastest (one simulation per variant).",
    ),
]


def _say(trial: Trial) -> None:
    if trial.time_s is None:
        typer.echo(f"  {trial.label}: does not run here ({trial.note})", err=True)
    elif trial.note:
        typer.echo(f"  {trial.label}: {format_time(trial.time_s)} ({trial.note})", err=True)
    else:
        kind = f" [{trial.variant}]" if trial.variant and trial.variant != trial.label else ""
        typer.echo(f"  {trial.label}{kind}: {format_time(trial.time_s)}", err=True)


def tuned_schedule(
    algorithm: str,
    topo: Topology,
    size: Fraction,
    options: dict[str, object] | None,
    **sim_options: Any,
) -> TuneResult:
    """:func:`~resilientcc.sim.tune.tune` with each variant's time on stderr."""
    if options:
        raise InputError("--tune: the variants are the generator's options; drop -O or --tune")
    from resilientcc.sim.tune import default_variants, tune

    variants = default_variants(algorithm)  # one variant only: an error before any work
    typer.echo(f"tuning {algorithm}: simulating each variant", err=True)
    res = tune(topo, size, algorithm, variants, progress=_say, **sim_options)
    typer.echo(f"  -> {res.label} ({format_time(res.time_s)})", err=True)
    return res


def tune_report(res: TuneResult) -> dict[str, Any]:
    """The ``tune`` object of ``rcc sim --json``: the variant kept and every one tried."""
    return {
        "chosen": res.label,
        "trials": [
            {"label": t.label, "variant": t.variant, "time_s": t.time_s, "note": t.note}
            for t in res.trials
        ],
    }
