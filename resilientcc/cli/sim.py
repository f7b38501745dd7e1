"""``rcc sim``: simulate a schedule (a file or a generator) on a cluster, next to the bounds."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

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
from resilientcc.errors import InputError, ResilientCCError
from resilientcc.schedules.ir import Schedule
from resilientcc.topology.io import check_writable
from resilientcc.topology.model import Topology
from resilientcc.units import format_size, format_time, parse_time

__all__ = [
    "ALL",
    "FF_RING_SIM_MAX_GPUS",
    "LONG_GEN_GPUS",
    "LONG_SIM_TRANSFERS",
    "PROGRESS_INTERVAL_S",
    "algorithm_list",
    "references",
    "sim",
    "sim_report",
]

#: from this many transfers ``rcc sim`` says on stderr that the simulation takes a while
#: (OptCC on 8 × 8 GPUs at 1 GiB: 0.5 to 1.2 million transfers, a few seconds with the
#: compiled loop, up to three minutes with the Python one)
LONG_SIM_TRANSFERS = 200_000


#: seconds between two progress lines of a long simulation (stderr)
PROGRESS_INTERVAL_S = 10.0

#: from this many GPUs ``rcc sim ALGO`` says on stderr that it is generating the schedule
#: and how long that took (OptCC on 128 × 8 GPUs: about a minute, its exact check included)
LONG_GEN_GPUS = 256


#: up to this many GPUs ``rcc sim`` also simulates NCCL's ring on the cluster without its
#: failures, with the same latencies, and compares against that too (128 GPUs: 260,096
#: transfers with one channel per NIC, generated and simulated in 1.3–2.6 s; the ring's
#: transfers grow as p²)
FF_RING_SIM_MAX_GPUS = 128


def _progress_printer() -> Callable[[int, int, float], None]:
    """A ``simulate(progress=)`` callback that says on stderr, every
    :data:`PROGRESS_INTERVAL_S` seconds, how many transfers have completed."""
    start = last = time.monotonic()

    def say(done: int, total: int, t: float) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= PROGRESS_INTERVAL_S:
            last = now
            typer.echo(
                f"  {done:,} of {total:,} transfers done ({format_time(t)} simulated,"
                f" {now - start:.0f} s)",
                err=True,
            )

    return say


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def _fault_free_ring_sim(topo: Topology, size: Fraction, sim_options: dict[str, Any]) -> float:
    """NCCL's ring simulated on ``topo`` without its failures, with the same latencies."""
    from resilientcc.bounds import fault_free_topology
    from resilientcc.schedules.ring import ring
    from resilientcc.sim import simulate

    healthy = fault_free_topology(topo)
    options = {k: v for k, v in sim_options.items() if k != "progress"}
    return float(simulate(ring(healthy, size), healthy, **options).time_s)


def references(topo: Topology, size: Fraction, **sim_options: Any) -> dict[str, Any]:
    """What a run is compared with: the lower bound, NCCL's fault-free ring (closed form
    and, up to :data:`FF_RING_SIM_MAX_GPUS` GPUs, simulated with the same options) and
    the fault-free bound. A value is ``None`` where it cannot be had for this cluster,
    and ``bound_error`` then says why the bounds could not."""
    out: dict[str, Any] = {
        "lower_bound_s": None,
        "fault_free_ring_s": None,
        "fault_free_ring_sim_s": None,
        "fault_free_lower_bound_s": None,
    }
    try:
        from resilientcc.bounds import fault_free_lower_bound, fault_free_ring_time, lower_bound

        out["lower_bound_s"] = float(lower_bound(topo, size).seconds)
        out["fault_free_ring_s"] = float(fault_free_ring_time(topo, size))
        out["fault_free_lower_bound_s"] = float(fault_free_lower_bound(topo, size).seconds)
    except (ImportError, ResilientCCError) as e:  # bounds unavailable for this topology
        out["bound_error"] = str(e) or type(e).__name__
    if out["fault_free_lower_bound_s"] is not None and topo.num_ranks <= FF_RING_SIM_MAX_GPUS:
        # no ring for some clusters (e.g. a custom topology): then no such reference
        with contextlib.suppress(ResilientCCError):
            out["fault_free_ring_sim_s"] = _fault_free_ring_sim(topo, size, sim_options)
    return out


def sim_report(
    sched: Schedule,
    topo: Topology,
    algorithm: str,
    refs: dict[str, Any] | None = None,
    **sim_options: Any,
) -> dict[str, Any]:
    """Simulate and put the result next to the bounds: the dictionary ``rcc sim --json`` prints.

    ``refs``: :func:`references` for this cluster and size, when already computed (the
    same for every schedule of a comparison).
    """
    from resilientcc.sim import simulate

    res = simulate(sched, topo, **sim_options)
    size = sched.size
    if refs is None:
        refs = references(topo, size, **sim_options)
    lb, ff_ring = refs["lower_bound_s"], refs["fault_free_ring_s"]
    ff_ring_sim, ff_lb = refs["fault_free_ring_sim_s"], refs["fault_free_lower_bound_s"]
    bound_error = refs.get("bound_error")
    floor_s, floor_link = res.byte_floor()
    over_ring = _ratio(res.time_s, ff_ring)
    over_ring_sim = _ratio(res.time_s, ff_ring_sim)
    over_lb = _ratio(res.time_s, ff_lb)
    out: dict[str, Any] = {
        "algorithm": algorithm,
        "schedule": sched.name,
        "topology": topo.name,
        "failures": list(topo.failures),
        "ranks": sched.ranks,
        "size_bytes": str(size),
        "time_s": res.time_s,
        "latency_s": res.latency_s,
        "bandwidth_s": res.bandwidth_s,
        "latency_mode": res.latency_mode,
        "base_latency_s": res.base_latency_s,
        "lower_bound_s": lb,
        "ratio_to_bound": _ratio(res.time_s, lb),
        "bandwidth_ratio_to_bound": _ratio(res.bandwidth_s, lb),
        "byte_floor_s": floor_s,
        "byte_floor_link": floor_link,
        "byte_floor_ratio_to_bound": _ratio(floor_s, lb),
        "fault_free_ring_s": ff_ring,
        "overhead_vs_fault_free_ring": None if over_ring is None else over_ring - 1,
        "fault_free_ring_sim_s": ff_ring_sim,
        "overhead_vs_fault_free_ring_sim": None if over_ring_sim is None else over_ring_sim - 1,
        "fault_free_lower_bound_s": ff_lb,
        "overhead_vs_fault_free_bound": None if over_lb is None else over_lb - 1,
        "num_transfers": res.num_transfers,
        "num_events": res.num_events,
        "busiest_links": [
            {"link": n, "bytes": b, "utilisation": u} for n, b, u in res.busiest_links(3)
        ],
    }
    if bound_error is not None:
        out["bound_error"] = bound_error
    out["_result"] = res
    return out


def _print_table(rep: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    def t(x: float | None) -> str:
        return "n/a" if x is None else format_time(x)

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x * 100:+.2f} %"

    def ratio(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.4f}"

    table = Table(title=f"rcc sim: {rep['algorithm']} on {rep['topology']}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("message size", format_size(Fraction(rep["size_bytes"]))),
        ("failures", "; ".join(rep["failures"]) or "none"),
        ("simulated time", t(rep["time_s"])),
        (f"  latency part ({rep['latency_mode']})", t(rep["latency_s"])),
        ("  bandwidth part", t(rep["bandwidth_s"])),
        ("lower bound", t(rep["lower_bound_s"])),
        ("time / lower bound", ratio(rep["ratio_to_bound"])),
        ("byte floor (busiest link's bytes / capacity)", t(rep["byte_floor_s"])),
        ("  byte floor / lower bound", ratio(rep["byte_floor_ratio_to_bound"])),
        ("fault-free ring (2(p-1)/p · M/B)", t(rep["fault_free_ring_s"])),
        ("overhead vs fault-free ring", pct(rep["overhead_vs_fault_free_ring"])),
    ]
    if rep["fault_free_ring_sim_s"] is not None:
        rows += [
            ("fault-free ring, simulated", t(rep["fault_free_ring_sim_s"])),
            ("  overhead vs it", pct(rep["overhead_vs_fault_free_ring_sim"])),
        ]
    rows += [
        ("fault-free lower bound", t(rep["fault_free_lower_bound_s"])),
        ("overhead vs fault-free bound", pct(rep["overhead_vs_fault_free_bound"])),
        ("transfers / events", f"{rep['num_transfers']} / {rep['num_events']}"),
    ]
    for link in rep["busiest_links"][:1]:
        rows.append(("busiest link (utilisation)", f"{link['link']} ({link['utilisation']:.1%})"))
    for k, v in rows:
        table.add_row(k, v)
    console = Console()
    console.print(table)
    if "bound_error" in rep:
        console.print(f"note: bounds unavailable: {rep['bound_error']}")
    if _latency_overlaps(rep):
        console.print(_overlap_note("the bandwidth part"), highlight=False)


def _overlap_note(subject: str) -> str:
    """Said under a table where ``subject`` (time − critical-path latency) is below the bound."""
    return (
        f"note: {subject} is below the lower bound: latencies on the critical\n"
        "path overlap transmissions elsewhere; --latency-mode rerun measures the latency\n"
        "part as the difference to a run with every latency zero"
    )


def _latency_overlaps(rep: dict[str, Any]) -> bool:
    """Whether ``time − latency part`` (critical path) is below the lower bound."""
    lb = rep["lower_bound_s"]
    return (
        rep["latency_mode"] == "critical_path"
        and lb is not None
        and rep["bandwidth_s"] < lb * (1 - 1e-9)
    )


@app.command("sim")
@handle_errors
def sim(
    ctx: typer.Context,
    schedule: Annotated[
        str,
        typer.Argument(
            help="A schedule JSON file, an algorithm (ring, balance, hierarchical, "
            "r2cc_allreduce, optcc), several joined by commas, or all: one table comparing "
            "them."
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
) -> None:
    """Simulate SCHEDULE (a file or an algorithm) on the cluster, next to the lower bound.

    Example: rcc sim balance -n 8 --fail 0:4 --size 1GiB

    Several algorithms (rcc sim ring,balance,optcc, or rcc sim all) give one table, a row
    each; with --plot, a figure of each run's throughput by kind of transfer.
    """
    mode = latency_mode.replace("-", "_")
    from resilientcc.sim.flow import ENGINES

    if engine not in ENGINES:
        raise InputError(f"--engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    if plot_file is not None and plot_file.suffix.lower() != ".png":
        raise InputError(f"--plot: {plot_file} must end in .png")
    if plot_file is not None:
        check_writable(plot_file, "--plot")  # before the simulation, which can take minutes
    if trace_file is not None:
        from resilientcc.sim.trace import TRACE_FORMATS

        if trace_file.suffix.lower() not in TRACE_FORMATS:
            raise InputError(f"--trace: {trace_file} must end in .csv or .json (a Chrome trace)")
        check_writable(trace_file, "--trace")
    m = parse_size_option(size)
    base = float(parse_time(base_latency, "--base-latency"))
    topo = build_topology(ctx)
    names = algorithm_list(schedule)
    if names is not None and option:
        raise InputError("-O: options shape one algorithm's schedule; simulate it on its own")
    if names is not None and trace_file is not None:
        raise InputError("--trace: one run's timeline; simulate one algorithm to trace it")
    if names is not None:
        _compare(
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
        sched = _generate(schedule, topo, m, channels, opts)
        algorithm = schedule
    rep = _report(
        sched,
        topo,
        algorithm,
        None,
        base_latency=base,
        zero_latency=zero_latency,
        latency_mode=mode,
        engine=engine,
    )
    res = rep.pop("_result")
    if plot_file is not None:
        from resilientcc.sim.plot import plot, transfer_kinds

        plot(res, plot_file, kinds=transfer_kinds(res, sched, topo))
    if trace_file is not None:
        from resilientcc.sim.trace import write_trace

        write_trace(res, sched, topo, trace_file)
    if as_json:
        typer.echo(json.dumps(rep))
    else:
        _print_table(rep)
        if plot_file is not None:
            typer.echo(f"plot -> {plot_file}")
        if trace_file is not None:
            typer.echo(f"trace -> {trace_file}")


#: ``rcc sim all``: every generator, in the order the comparison table lists them
ALL = ("ring", "balance", "hierarchical", "r2cc_allreduce", "optcc")


def algorithm_list(argument: str) -> list[str] | None:
    """The algorithms of a comparison (``"all"``, or names joined by commas), else None.

    >>> algorithm_list("ring,optcc"), algorithm_list("all")[-1], algorithm_list("ring")
    (['ring', 'optcc'], 'optcc', None)
    """
    if argument.strip().lower() == "all":
        return list(ALL)
    if "," not in argument:
        return None
    names = [a.strip() for a in argument.split(",")]
    from resilientcc.schedules.generators import get_generator

    for name in names:
        if not name:
            raise InputError(f"{argument!r}: an empty name in the list of algorithms")
        if name.lower().endswith((".json", ".xml")) or os.sep in name:
            raise InputError(f"{name}: a list compares algorithms; simulate a file on its own")
        get_generator(name)  # an unknown name fails here, before any simulation
    keys = [n.replace("-", "_").lower() for n in names]
    if len(set(keys)) < len(keys):
        raise InputError(f"{argument!r}: an algorithm appears twice")
    return keys


def _generate(
    name: str,
    topo: Topology,
    size: Fraction,
    channels: int | None,
    options: dict[str, object] | None = None,
) -> Schedule:
    """Generate ``name``'s schedule (saying so on stderr on large clusters)."""
    from resilientcc.schedules.generators import get_generator

    gen = get_generator(name)
    opts: dict[str, Any] = dict(options or {})
    if channels is not None and gen.__name__ == "ring":
        opts["channels"] = channels
    long_gen = topo.num_ranks >= LONG_GEN_GPUS
    if long_gen:
        typer.echo(
            f"generating {name} on {topo.num_ranks} GPUs (and checking it exactly)...", err=True
        )
    t0 = time.monotonic()
    sched = gen(topo, size, **opts)
    if long_gen:
        typer.echo(
            f"  {len(sched.transfers):,} transfers in {time.monotonic() - t0:.0f} s", err=True
        )
    return sched


def _report(
    sched: Schedule,
    topo: Topology,
    algorithm: str,
    refs: dict[str, Any] | None,
    **sim_options: Any,
) -> dict[str, Any]:
    """:func:`sim_report`, with progress on stderr for long simulations."""
    long_sim = len(sched.transfers) >= LONG_SIM_TRANSFERS
    if long_sim:
        typer.echo(
            f"simulating {algorithm}: {len(sched.transfers):,} transfers, this can take a while",
            err=True,
        )
    progress = _progress_printer() if long_sim else None
    return sim_report(sched, topo, algorithm, refs, progress=progress, **sim_options)


def _compare(
    names: list[str],
    topo: Topology,
    size: Fraction,
    channels: int | None,
    as_json: bool,
    plot_file: Path | None,
    **sim_options: Any,
) -> None:
    """``rcc sim A,B,...``: each algorithm on the same cluster, one table (or object)."""
    if channels is not None and "ring" not in names:
        raise InputError("--channels: only the ring generator takes it, and ring is not listed")
    refs = references(topo, size, **sim_options)
    reps = []
    runs = []
    for name in names:
        sched = _generate(name, topo, size, channels)
        rep = _report(sched, topo, name, refs, **sim_options)
        res = rep.pop("_result")
        if plot_file is not None:
            from resilientcc.sim.plot import transfer_kinds

            runs.append((name, res, transfer_kinds(res, sched, topo)))
        reps.append(rep)
        if not as_json:
            typer.echo(f"simulated {name}: {format_time(rep['time_s'])}", err=True)
    if plot_file is not None:
        from resilientcc.sim.plot import plot_compare

        failures = "; ".join(topo.failures) or "no failure"
        caption = f"{topo.name}, {format_size(size)}, {failures}"
        plot_compare(runs, plot_file, bound_s=refs["lower_bound_s"], caption=caption)
    shared = {
        "topology": topo.name,
        "failures": list(topo.failures),
        "size_bytes": str(size),
        **refs,
        "algorithms": names,
        "results": reps,
    }
    if as_json:
        typer.echo(json.dumps(shared))
        return
    _print_comparison(shared)
    if plot_file is not None:
        typer.echo(f"plot -> {plot_file}")


def _print_comparison(cmp: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    def ratio(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x * 100:+.1f} %"

    size = format_size(Fraction(cmp["size_bytes"]))
    failures = "; ".join(cmp["failures"]) or "no failure"
    table = Table(title=f"rcc sim: {cmp['topology']}, {size}")
    table.add_column("algorithm", no_wrap=True)
    for col in ("time", "latency", "/ bound", "floor / bound", "vs ff ring"):
        table.add_column(col, justify="right", no_wrap=True)
    best = min(r["time_s"] for r in cmp["results"])
    for r in cmp["results"]:
        vs = (
            r["overhead_vs_fault_free_ring_sim"]
            if cmp["fault_free_ring_sim_s"] is not None
            else r["overhead_vs_fault_free_ring"]
        )
        name = f"[bold]{r['algorithm']}[/bold]" if r["time_s"] == best else r["algorithm"]
        table.add_row(
            name,
            format_time(r["time_s"]),
            format_time(r["latency_s"]),
            ratio(r["ratio_to_bound"]),
            ratio(r["byte_floor_ratio_to_bound"]),
            pct(vs),
        )
    console = Console()
    console.print(table)

    def t(x: float | None) -> str:
        return "n/a" if x is None else format_time(x)

    lines = [
        f"failures: {failures}",
        f"lower bound {t(cmp['lower_bound_s'])}; fault-free bound"
        f" {t(cmp['fault_free_lower_bound_s'])}",
    ]
    if cmp["fault_free_ring_sim_s"] is not None:
        lines += [
            f"ff ring: NCCL's ring without the failures, simulated: "
            f"{t(cmp['fault_free_ring_sim_s'])}",
            f"  (closed form 2(p-1)/p · M/B: {t(cmp['fault_free_ring_s'])})",
        ]
    else:
        lines.append(
            f"ff ring: NCCL's ring without the failures, 2(p-1)/p · M/B: "
            f"{t(cmp['fault_free_ring_s'])}"
        )
    lines.append("latency: the time's latency part; floor: the busiest link's bytes / capacity")
    overlapping = [r["algorithm"] for r in cmp["results"] if _latency_overlaps(r)]
    if overlapping:
        lines.append(_overlap_note(f"time − latency of {', '.join(overlapping)}"))
    for line in lines:
        console.print(line, highlight=False)
    if "bound_error" in cmp:
        console.print(f"note: bounds unavailable: {cmp['bound_error']}")
