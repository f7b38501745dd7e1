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
    GpusOpt,
    NicBwOpt,
    NicsOpt,
    NvlinkBwOpt,
    ServersOpt,
    SizeOpt,
    TopologyFileOpt,
    build_topology,
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
    "FF_RING_SIM_MAX_GPUS",
    "LONG_GEN_GPUS",
    "LONG_SIM_TRANSFERS",
    "PROGRESS_INTERVAL_S",
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


def sim_report(
    sched: Schedule, topo: Topology, algorithm: str, **sim_options: Any
) -> dict[str, Any]:
    """Simulate and put the result next to the bounds: the dictionary ``rcc sim --json`` prints."""
    from resilientcc.sim import simulate

    res = simulate(sched, topo, **sim_options)
    size = sched.size
    lb = ff_ring = ff_lb = None
    bound_error = None
    try:
        from resilientcc.bounds import fault_free_lower_bound, fault_free_ring_time, lower_bound

        lb = float(lower_bound(topo, size).seconds)
        ff_ring = float(fault_free_ring_time(topo, size))
        ff_lb = float(fault_free_lower_bound(topo, size).seconds)
    except (ImportError, ResilientCCError) as e:  # bounds unavailable for this topology
        bound_error = str(e) or type(e).__name__
    ff_ring_sim = None
    if ff_lb is not None and topo.num_ranks <= FF_RING_SIM_MAX_GPUS:
        # no ring for some clusters (e.g. a custom topology): then no such reference
        with contextlib.suppress(ResilientCCError):
            ff_ring_sim = _fault_free_ring_sim(topo, size, sim_options)
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


@app.command("sim")
@handle_errors
def sim(
    ctx: typer.Context,
    schedule: Annotated[
        str,
        typer.Argument(
            help="A schedule JSON file, or an algorithm name: ring, balance, hierarchical, "
            "r2cc_allreduce, optcc."
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
) -> None:
    """Simulate SCHEDULE (a file or an algorithm) on the cluster, next to the lower bound.

    Example: rcc sim balance -n 8 --fail 0:4 --size 1GiB
    """
    mode = latency_mode.replace("-", "_")
    from resilientcc.sim.flow import ENGINES

    if engine not in ENGINES:
        raise InputError(f"--engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    if plot_file is not None and plot_file.suffix.lower() != ".png":
        raise InputError(f"--plot: {plot_file} must end in .png")
    if plot_file is not None:
        check_writable(plot_file, "--plot")  # before the simulation, which can take minutes
    m = parse_size_option(size)
    base = float(parse_time(base_latency, "--base-latency"))
    topo = build_topology(ctx)
    path = Path(schedule)
    if path.is_file():
        sched = load_schedule_for(path, topo)
        algorithm = sched.name
    elif path.is_dir():
        raise InputError(f"{path} is a directory, not a schedule file or an algorithm")
    elif path.suffix.lower() in (".json", ".xml") or os.sep in schedule:
        raise InputError(f"{schedule}: no such schedule file")
    else:
        from resilientcc.schedules.generators import get_generator

        gen = get_generator(schedule)
        opts: dict[str, Any] = {}
        if channels is not None:
            if gen.__name__ != "ring":
                raise InputError("--channels: only the ring generator takes it")
            opts["channels"] = channels
        long_gen = topo.num_ranks >= LONG_GEN_GPUS
        if long_gen:
            typer.echo(
                f"generating {schedule} on {topo.num_ranks} GPUs (and checking it exactly)...",
                err=True,
            )
        t0 = time.monotonic()
        sched = gen(topo, m, **opts)
        if long_gen:
            typer.echo(
                f"  {len(sched.transfers):,} transfers in {time.monotonic() - t0:.0f} s", err=True
            )
        algorithm = schedule
    if len(sched.transfers) >= LONG_SIM_TRANSFERS:
        typer.echo(
            f"simulating {algorithm}: {len(sched.transfers):,} transfers, this can take a while",
            err=True,
        )
    rep = sim_report(
        sched,
        topo,
        algorithm,
        base_latency=base,
        zero_latency=zero_latency,
        latency_mode=mode,
        engine=engine,
        progress=_progress_printer() if len(sched.transfers) >= LONG_SIM_TRANSFERS else None,
    )
    res = rep.pop("_result")
    if plot_file is not None:
        from resilientcc.sim.plot import plot, transfer_kinds

        plot(res, plot_file, kinds=transfer_kinds(res, sched, topo))
    if as_json:
        typer.echo(json.dumps(rep))
    else:
        _print_table(rep)
        if plot_file is not None:
            typer.echo(f"plot -> {plot_file}")
