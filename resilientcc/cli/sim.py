"""``rcc sim``: simulate a schedule (a file or a generator) on a cluster, next to the bounds.

The command only parses; what it prints for one run is :mod:`resilientcc.cli.sim_report`,
for several :mod:`resilientcc.cli.compare`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

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
    generator_options,
    handle_errors,
    load_schedule_for,
    parse_size_option,
)
from resilientcc.cli.compare import algorithm_list, compare
from resilientcc.cli.sim_report import generate_schedule, print_report, report_run
from resilientcc.cli.tuning import TuneOpt, tune_report, tuned_schedule
from resilientcc.errors import InputError
from resilientcc.units import parse_time

__all__ = ["sim"]


@app.command("sim")
@handle_errors
def sim(
    ctx: typer.Context,
    schedule: Annotated[
        str,
        typer.Argument(
            help="A schedule JSON file, an algorithm (ring, balance, hierarchical, "
            "r2cc_allreduce, optcc, trees), several joined by commas, or all: one table "
            "comparing them."
        ),
    ],
    size: SizeOpt = "1GiB",
    servers: ServersOpt = 4,
    gpus_per_server: GpusOpt = 8,
    nics_per_server: NicsOpt = None,
    nic_bw: NicBwOpt = "400Gbps",
    nvlink_bw: NvlinkBwOpt = "450GB/s",
    fabric: FabricOpt = "rail",
    fail: FailOpt = None,
    topology_file: TopologyFileOpt = None,
    channels: Annotated[
        int | None, typer.Option("--channels", help="Ring channels (ring only) [default: NICs].")
    ] = None,
    base_latency: Annotated[
        str, typer.Option("--base-latency", help="Latency added once (NCCL base), e.g. 8.4us.")
    ] = "8.4us",
    zero_latency: Annotated[
        bool, typer.Option("--zero-latency", help="Ignore all latencies (bandwidth only).")
    ] = False,
    latency_mode: Annotated[
        str,
        typer.Option(
            "--latency-mode", help="critical-path (one run) or rerun (minus a zero-latency run)."
        ),
    ] = "critical-path",
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="Event loop: auto (compiled when numba is there and the schedule is large),"
            " compiled (numba) or python (the reference).",
        ),
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    plot_file: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="Write a PNG: a Gantt chart and the throughput by kind of transfer."
        ),
    ] = None,
    trace_file: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Write every transfer's timeline: FILE.csv, or FILE.json, a Chrome trace for "
            "ui.perfetto.dev.",
        ),
    ] = None,
    option: GeneratorOpt = None,
    tune: TuneOpt = False,
) -> None:
    """Simulate SCHEDULE (a file or an algorithm) on the cluster, next to the lower bound.

    Example: rcc sim balance -n 8 --fail 0:4 --size 1GiB

    Several algorithms (rcc sim ring,balance,optcc, or rcc sim all) give one table, a row
    each; with --plot, a figure of each run's throughput by kind of transfer.

    With --tune (optcc), every variant is simulated first and the fastest is reported.
    """
    mode = latency_mode.replace("-", "_")
    from resilientcc.sim.flow import ENGINES

    if engine not in ENGINES:
        raise InputError(f"--engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    # the output paths before the simulation, which can take minutes
    if plot_file is not None:
        from resilientcc.sim.plot import check_png_path

        check_png_path(plot_file)
    if trace_file is not None:
        from resilientcc.sim.trace import trace_format

        trace_format(trace_file)
    m = parse_size_option(size)
    base = float(parse_time(base_latency, "--base-latency"))
    topo = build_topology(ctx)
    names = algorithm_list(schedule, topo)
    if names is not None and option:
        raise InputError("-O: options shape one algorithm's schedule; simulate it on its own")
    if names is not None and tune:
        raise InputError("--tune: tunes one algorithm; simulate it on its own")
    if names is not None and trace_file is not None:
        raise InputError("--trace: one run's timeline; simulate one algorithm to trace it")
    if names is not None:
        compare(
            names,
            topo,
            m,
            channels,
            as_json,
            plot_file,
            base_latency=base,
            zero_latency=zero_latency,
            latency_mode=mode,
            engine=engine,
        )
        return
    path = Path(schedule)
    if path.is_file() and option:
        raise InputError("-O: options shape a generated schedule, not a schedule file")
    if path.is_file() and tune:
        raise InputError("--tune: chooses among a generator's variants, not a schedule file")
    tuned = None
    if path.is_file():
        sched = load_schedule_for(path, topo)
        algorithm = sched.name
    elif path.is_dir():
        raise InputError(f"{path} is a directory, not a schedule file or an algorithm")
    elif path.suffix.lower() in (".json", ".xml") or os.sep in schedule:
        raise InputError(f"{schedule}: no such schedule file")
    else:
        from resilientcc.schedules.generators import get_generator

        if channels is not None and get_generator(schedule).__name__ != "ring":
            raise InputError("--channels: only the ring generator takes it")
        opts = generator_options(schedule, option)
        if channels is not None and "channels" in opts:
            raise InputError("--channels and -O channels=: give one")
        if tune:
            # simulated as the report simulates it, so the kept variant's run is reused
            tuned = tuned_schedule(
                schedule,
                topo,
                m,
                opts,
                base_latency=base,
                zero_latency=zero_latency,
                latency_mode=mode,
                engine=engine,
            )
            sched = tuned.schedule
        else:
            sched = generate_schedule(schedule, topo, m, channels, opts)
        algorithm = schedule
    rep, res = report_run(
        sched,
        topo,
        algorithm,
        None,
        result=None if tuned is None else tuned.result,
        base_latency=base,
        zero_latency=zero_latency,
        latency_mode=mode,
        engine=engine,
    )
    if tuned is not None:
        rep["tune"] = tune_report(tuned)
    if plot_file is not None:
        from resilientcc.sim.plot import plot, transfer_kinds

        plot(res, plot_file, kinds=transfer_kinds(res, sched, topo))
    if trace_file is not None:
        from resilientcc.sim.trace import write_trace

        write_trace(res, sched, topo, trace_file)
    if as_json:
        typer.echo(json.dumps(rep))
    else:
        print_report(rep)
        if tuned is not None:
            ran = sum(1 for t in tuned.trials if t.time_s is not None and not t.note)
            typer.echo(f"tuned: {tuned.label}, the fastest of {ran} variants simulated")
        if plot_file is not None:
            typer.echo(f"plot -> {plot_file}")
        if trace_file is not None:
            typer.echo(f"trace -> {trace_file}")
