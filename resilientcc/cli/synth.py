"""``rcc synth``: generate a schedule for a cluster and write it (JSON or MSCCL XML)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from inspect import signature
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from resilientcc.cli.app import app
from resilientcc.cli.common import (
    FabricOpt,
    FailOpt,
    GeneratorOpt,
    GpusOpt,
    NicBwOpt,
    NicsOpt,
    NvlinkBwOpt,
    ServersOpt,
    SizeOpt,
    TopologyFileOpt,
    build_topology,
    die,
    generator_options,
    handle_errors,
    load_schedule_for,
    parse_size_option,
)
from resilientcc.cli.sim_report import announce_generation, variant_line
from resilientcc.cli.tuning import TuneOpt, tuned_schedule
from resilientcc.errors import InputError
from resilientcc.schedules.ir import Schedule
from resilientcc.topology.io import atomic_write_text, check_writable
from resilientcc.topology.model import Topology

if TYPE_CHECKING:
    from resilientcc.schedules.msccl import ChunkRounding
    from resilientcc.sim.tune import Trial

__all__ = ["EXIT_UNKNOWN", "EXIT_VIOLATED", "synth"]

EXIT_VIOLATED = 1
EXIT_UNKNOWN = 3
FORMATS = ("json", "msccl-xml")


def _check_schedule(sched: Schedule) -> Schedule:
    from resilientcc.schedules.executor import check

    return check(sched)


@app.command("synth")
@handle_errors
def synth(
    ctx: typer.Context,
    algorithm: Annotated[
        str,
        typer.Argument(
            help="ring, balance, hierarchical, r2cc_allreduce, optcc or trees; or an existing "
            "schedule file (.json or .xml) to check against the cluster and convert."
        ),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write.")],
    size: SizeOpt = "1GiB",
    servers: ServersOpt = 4,
    gpus_per_server: GpusOpt = 8,
    nics_per_server: NicsOpt = None,
    nic_bw: NicBwOpt = "400Gbps",
    nvlink_bw: NvlinkBwOpt = "450GB/s",
    fabric: FabricOpt = "rail",
    fail: FailOpt = None,
    topology_file: TopologyFileOpt = None,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="json (resilientcc schedule) or msccl-xml.")
    ] = "json",
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Prove the schedule with Z3 (exit 1 if violated, 3 if unknown)."
        ),
    ] = False,
    option: GeneratorOpt = None,
    tune: TuneOpt = False,
) -> None:
    """Generate ALGORITHM's AllReduce schedule for the cluster and write it to --output.

    Example: rcc synth optcc -n 4 --fail 0:4 --size 1GiB -o optcc.json

    With --tune (optcc), every variant is simulated and the fastest is written.
    """
    from resilientcc.schedules.generators import get_generator

    if fmt not in FORMATS:
        raise InputError(f"--format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    check_writable(output, "--output")
    source = Path(algorithm)
    from_file = source.suffix in (".json", ".xml")
    gen = None if from_file else get_generator(algorithm)
    if from_file and option:
        raise InputError("-O: options shape a generated schedule, not a schedule file")
    if from_file and tune:
        raise InputError("--tune: chooses among a generator's variants, not a schedule file")
    opts = {} if from_file else generator_options(algorithm, option)
    m = parse_size_option(size)
    topo = build_topology(ctx)
    xml = None  # the MSCCL XML, where fitting the executor's limits already wrote it
    if gen is None:
        sched = _check_schedule(load_schedule_for(source, topo))
    elif tune:
        res = tuned_schedule(algorithm, topo, m, opts)
        sched = res.schedule
        if fmt == "msccl-xml" and "pieces" in signature(gen).parameters:
            # the kept variant at the most pieces that fit, as for an untuned schedule
            kept = dict(res.trial(res.label).options)
            sched, xml = _fit_msccl(
                lambda k: res.schedule if k is None else gen(topo, m, **{**kept, "pieces": k}),
                _without_trees(gen, topo, m, _fastest_without_trees(res.trials, kept), opts),
            )
    elif fmt == "msccl-xml" and "pieces" not in opts and "pieces" in signature(gen).parameters:
        announce_generation(algorithm, topo, m, opts)
        sched, xml = _fit_msccl(
            lambda k: gen(topo, m, **opts, **({"pieces": k} if k else {})),
            _without_trees(gen, topo, m, opts, opts),
        )
    else:
        announce_generation(algorithm, topo, m, opts)
        sched = gen(topo, m, **opts)
    if fmt == "msccl-xml" and xml is None:
        from resilientcc.schedules.msccl import round_for_msccl

        sched, rounding = round_for_msccl(sched)
        _say_rounding(rounding)
    if fmt == "json":
        from resilientcc.schedules.serialize import save_schedule

        save_schedule(sched, output)
    else:
        from resilientcc.schedules.msccl import to_msccl_xml

        atomic_write_text(output, xml if xml is not None else to_msccl_xml(sched))
    typer.echo(
        f"{sched.name}: {sched.ranks} ranks, {len(sched.chunks)} chunks, "
        f"{len(sched.transfers)} transfers -> {output}"
    )
    variant = sched.meta_get("variant")
    if variant:
        typer.echo(variant_line(variant, sched.meta_get("variant_rule")))
    if verify:
        from resilientcc.cli.verify import progress_for
        from resilientcc.verify import verify as run_verify  # type: ignore[attr-defined]

        rep = run_verify(sched, progress=progress_for(len(sched.transfers)))
        verdict = getattr(rep, "verdict", "unknown")
        typer.echo(f"verify: {verdict}")
        if verdict == "violated":
            die(f"schedule violates {getattr(rep, 'property', 'a property')}", EXIT_VIOLATED)
        if verdict != "proved":
            die("the verifier could not decide (unknown)", EXIT_UNKNOWN)


def _without_trees(
    gen: Callable[..., Schedule],
    topo: Topology,
    m: Fraction,
    options: Mapping[str, object],
    given: Mapping[str, object],
) -> Callable[[int | None], Schedule] | None:
    """The generator with ``options`` but without its tree packing (``trees=False``),
    at ``k`` pieces, for an MSCCL export the packing's lanes do not fit; ``None`` where
    the generator has no such option or ``-O trees=...`` was ``given``."""
    if "trees" not in signature(gen).parameters or "trees" in given:
        return None
    base = {**options, "trees": False}
    return lambda k: gen(topo, m, **base, **({"pieces": k} if k else {}))


def _fastest_without_trees(trials: Sequence[Trial], kept: dict[str, object]) -> dict[str, object]:
    """The options of the fastest tuned variant that is not the tree packing (``kept``'s
    where none ran): what an MSCCL export writes when the trees do not fit."""
    ran = [t for t in trials if t.time_s is not None and t.variant != "tree packing"]
    return dict(min(ran, key=lambda t: t.time_s or 0.0).options) if ran else kept


def _fit_msccl(
    make: Callable[[int | None], Schedule],
    fallback: Callable[[int | None], Schedule] | None = None,
) -> tuple[Schedule, str]:
    """The schedule ``make(None)``, or ``make(k)`` for the most pieces that fit the MSCCL
    executor, and its XML (:func:`~resilientcc.schedules.msccl.fit_msccl`; ``fallback``'s
    where ``make``'s cannot be written), said on stderr."""
    from resilientcc.schedules.msccl import fit_msccl

    fit = fit_msccl(
        make,
        progress=lambda msg: typer.echo(f"MSCCL export: {msg}", err=True),
        fallback=fallback,
    )
    if fit.replaced is not None:
        why = fit.replaced.removeprefix("MSCCL export: ")
        variant = fit.schedule.meta_get("variant") or fit.schedule.name
        typer.echo(
            f"MSCCL export: the tree packing does not fit ({why}); wrote the {variant}"
            " variant instead",
            err=True,
        )
    _say_rounding(fit.rounding)
    if fit.pieces is not None:
        typer.echo(
            f"{fit.schedule.name}: {fit.pieces} piece{'s' if fit.pieces > 1 else ''}, not the "
            f"default {fit.default_pieces}: the most that fit the MSCCL executor",
            err=True,
        )
    return fit.schedule, fit.xml


def _say_rounding(rounding: ChunkRounding | None) -> None:
    if rounding is not None:
        typer.echo(
            f"MSCCL export: chunk splits rounded to 1/{rounding.units} of the buffer (exact "
            f"splits need {rounding.exact_units} equal chunks, the executor runs at most "
            f"{rounding.limit}); the largest change is "
            f"{float(rounding.max_change):.1%} of a chunk",
            err=True,
        )
