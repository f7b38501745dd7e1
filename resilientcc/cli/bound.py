"""``rcc bound``: the lower bound on AllReduce time for a cluster with failures."""

from __future__ import annotations

import json
from fractions import Fraction
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
    parse_size_option,
)
from resilientcc.errors import BoundError, InputError
from resilientcc.units import format_bandwidth, format_size, format_time, parse_time

__all__ = ["bound", "bound_report"]

MethodOpt = Annotated[
    str, typer.Option("--method", "-m", help="auto, closed-form (switch model only) or lp.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")]
LatencyOpt = Annotated[
    bool,
    typer.Option(
        "--latency",
        help="Also the bound that counts the links' latencies and --base-latency "
        "(the simulator's model).",
    ),
]
BaseLatencyOpt = Annotated[
    str, typer.Option("--base-latency", help="With --latency: latency added once, e.g. 8.4us.")
]


def _num(x: Fraction | float | None) -> float | None:
    return None if x is None else float(x)


def _exact(x: Fraction | float | None) -> str | None:
    if x is None:
        return None
    return str(x) if isinstance(x, Fraction) else repr(x)


def latency_report(topo: Any, size: Fraction, base: Fraction) -> dict[str, Any]:
    """The latency-aware bound as ``rcc bound --latency --json`` prints it."""
    from resilientcc.bounds import latency_lower_bound

    lat = latency_lower_bound(topo, size, base_latency=base)
    return {
        "seconds": float(lat.seconds),
        "exact": str(lat.seconds),
        "base_latency_s": float(lat.base_latency),
        "latency_part_s": float(lat.latency_seconds),
        "route_latency_s": [float(x) for x in lat.link_latency],
        "binding": lat.binding,
        "iterations": lat.iterations,
        "contracted": lat.contracted,
    }


def bound_report(
    topo: Any, size: Fraction, method: str, base_latency: Fraction | None = None
) -> dict[str, Any]:
    """Everything ``rcc bound`` prints, as a JSON-ready dictionary (with
    ``latency_bound`` when ``base_latency`` is given)."""
    from resilientcc.bounds import fault_free_lower_bound, fault_free_ring_time, lower_bound

    res = lower_bound(topo, size, method)
    ring = fault_free_ring_time(topo, size)
    try:
        ff = fault_free_lower_bound(topo, size, method)
        ff_s: Fraction | float | None = ff.seconds
        ff_binding: str | None = ff.binding
    except BoundError as e:
        ff_s, ff_binding = None, f"n/a: {e}"
    overhead = (res.seconds / ring - 1) if ring else None
    rep = {
        "topology": topo.name,
        "failures": list(topo.failures),
        "ranks": topo.num_ranks,
        "servers": len(topo.servers),
        "size_bytes": _exact(size),
        "method": res.method,
        "lower_bound_s": float(res.seconds),
        "lower_bound_exact": _exact(res.seconds),
        "lower_bound_in_M_over_B": float(res.normalized),
        "lower_bound_in_M_over_B_exact": _exact(res.normalized),
        "reference_bandwidth_Bps": float(res.reference_bandwidth),
        "reference_bandwidth_exact": str(res.reference_bandwidth),
        "fault_free_ring_s": float(ring),
        "fault_free_ring_exact": str(ring),
        "overhead_vs_fault_free_ring": _num(overhead),
        "overhead_vs_fault_free_ring_exact": _exact(overhead),
        "fault_free_lower_bound_s": _num(ff_s),
        "fault_free_lower_bound_exact": _exact(ff_s),
        "fault_free_binding": ff_binding,
        "binding": res.binding,
        "exact": res.exact,
        "certificate": res.certificate(),
        "lp": None
        if res.method != "lp"
        else {
            "iterations": res.iterations,
            "num_cuts": res.num_cuts,
            "num_partitions": res.num_partitions,
            "contracted": res.contracted,
            "certified": res.certified,
            "partition_search": res.partition_search,
            "solve_time_s": res.solve_time_s,
            "constraints": [
                {
                    "kind": c.kind,
                    "description": c.description,
                    "rhs_in_M": c.rhs,
                    "capacity_Bps": str(c.capacity),
                    "bound_s": str(c.seconds),
                    "dual": c.dual,
                }
                for c in res.constraints
            ],
            "notes": list(res.notes),
        },
    }
    if base_latency is not None:
        rep["latency_bound"] = latency_report(topo, size, base_latency)
    return rep


def _print_table(rep: dict[str, Any], size: Fraction) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=True)
    title = (
        f"AllReduce lower bound: {rep['topology']}, {rep['ranks']} GPUs, M = {format_size(size)}"
    )
    table = Table(title=title, show_header=True)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_column("exact / note")
    b = rep["reference_bandwidth_Bps"]
    table.add_row(
        "lower bound (degraded)",
        format_time(rep["lower_bound_s"]),
        f"{rep['lower_bound_exact']} s = {rep['lower_bound_in_M_over_B_exact']} · M/B",
    )
    table.add_row(
        "NCCL flat ring, no failure",
        format_time(rep["fault_free_ring_s"]),
        f"2(p−1)/p · M/B, p = {rep['ranks']}",
    )
    ov = rep["overhead_vs_fault_free_ring"]
    table.add_row(
        "overhead vs fault-free ring",
        "n/a" if ov is None else f"{ov * 100:+.3f} %",
        "" if ov is None else str(rep["overhead_vs_fault_free_ring_exact"]),
    )
    ff = rep["fault_free_lower_bound_s"]
    table.add_row(
        "lower bound, no failure",
        "n/a" if ff is None else format_time(ff),
        "" if ff is None else f"{rep['fault_free_lower_bound_exact']} s",
    )
    lat = rep.get("latency_bound")
    if lat is not None:
        lo, hi = (format_time(x) for x in lat["route_latency_s"])
        table.add_row(
            "lower bound with latency",
            format_time(lat["seconds"]),
            f"base {format_time(lat['base_latency_s'])} + route latency "
            f"{lo if lo == hi else f'{lo}-{hi}'} at the binding links' end",
        )
    table.add_row("B (healthy server bandwidth)", format_bandwidth(b), "bytes/s")
    table.add_row("method", rep["method"], "")
    console.print(table)
    console.print(f"binding: {rep['binding']}")
    if lat is not None:
        console.print(f"binding with latency: {lat['binding']}")
    if rep["failures"]:
        console.print("failures: " + "; ".join(rep["failures"]))
    if ff is not None and ff < rep["fault_free_ring_s"] and rep["servers"] < rep["ranks"]:
        console.print(
            "note: the fault-free bound is below NCCL's flat ring (2(p−1)/p · M/B over p GPUs): "
            "with several GPUs per server a schedule that keeps most traffic on NVLink can beat "
            "NCCL's fault-free ring, even degraded."
        )
    console.print("units: seconds; B in bytes/s; M = message size in bytes.")


@app.command("bound")
@handle_errors
def bound(
    ctx: typer.Context,
    servers: ServersOpt = 4,
    gpus_per_server: GpusOpt = 8,
    nics_per_server: NicsOpt = None,
    nic_bw: NicBwOpt = "400Gbps",
    nvlink_bw: NvlinkBwOpt = "450GB/s",
    fabric: FabricOpt = "rail",
    fail: FailOpt = None,
    topology_file: TopologyFileOpt = None,
    size: SizeOpt = "1GiB",
    method: MethodOpt = "auto",
    latency: LatencyOpt = False,
    base_latency: BaseLatencyOpt = "8.4us",
    as_json: JsonOpt = False,
) -> None:
    """Lower bound on AllReduce time, next to NCCL's fault-free ring.

    Defaults: the flagship cluster, 4 servers x 8 GPUs, 8 x 400 Gb/s NICs per server,
    no failure unless --fail.
    """
    meth = method.replace("-", "_")
    if meth not in ("auto", "closed_form", "lp"):
        raise InputError(f"--method: must be auto, closed-form or lp, got {method!r}")
    m = parse_size_option(size)
    base = parse_time(base_latency, "--base-latency")
    topo = build_topology(ctx)
    rep = bound_report(topo, m, meth, base if latency else None)
    if as_json:
        typer.echo(json.dumps(rep))
    else:
        _print_table(rep, m)
