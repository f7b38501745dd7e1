"""``rcc sim A,B,...`` and ``rcc sim all``: several algorithms on one cluster, one table.

:func:`algorithm_list` reads the argument (and refuses a bad list before anything is
simulated); :func:`compare` generates and simulates each algorithm against the same
references (:func:`~resilientcc.cli.sim_report.references`) and prints a row each, one
JSON object, or a figure of each run's throughput by kind of transfer.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import typer

from resilientcc.cli.sim_report import (
    generate_schedule,
    latency_overlaps,
    overlap_note,
    references,
    report_run,
    show_pct,
    show_ratio,
    show_time,
    variant_line,
)
from resilientcc.errors import InputError
from resilientcc.topology.model import Topology
from resilientcc.units import format_size, format_time

__all__ = [
    "ALL",
    "algorithm_list",
    "all_algorithms",
    "compare",
]


#: ``rcc sim all``: every generator, in the order the comparison table lists them
ALL = ("ring", "balance", "hierarchical", "r2cc_allreduce", "optcc")


def all_algorithms(topo: Topology) -> list[str]:
    """What ``rcc sim all`` compares on ``topo``: :data:`ALL`, or only ``trees`` where
    GPUs are outside servers (the layered generators place their stages by server, and
    OptCC there packs the same trees)."""
    if any(g.server is None for g in topo.gpus):
        return ["trees"]
    return list(ALL)


def algorithm_list(argument: str, topo: Topology | None = None) -> list[str] | None:
    """The algorithms of a comparison (``"all"``, or names joined by commas), else None;
    ``"all"`` is :func:`all_algorithms` of ``topo`` where one is given.

    >>> algorithm_list("ring,optcc"), algorithm_list("all")[-1], algorithm_list("ring")
    (['ring', 'optcc'], 'optcc', None)
    """
    if argument.strip().lower() == "all":
        return all_algorithms(topo) if topo is not None else list(ALL)
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


def compare(
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
        sched = generate_schedule(name, topo, size, channels)
        rep, res = report_run(sched, topo, name, refs, **sim_options)
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
            show_time(r["time_s"]),
            show_time(r["latency_s"]),
            show_ratio(r["ratio_to_bound"], 3),
            show_ratio(r["byte_floor_ratio_to_bound"], 3),
            show_pct(vs, 1),
        )
    console = Console()
    console.print(table)

    t = show_time
    lines = [
        f"failures: {failures}",
        f"lower bound {t(cmp['lower_bound_s'])} ({t(cmp.get('latency_bound_s'))} counting"
        f" latency); fault-free bound {t(cmp['fault_free_lower_bound_s'])}",
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
    overlapping = [r["algorithm"] for r in cmp["results"] if latency_overlaps(r)]
    if overlapping:
        lines.append(overlap_note(f"time − latency of {', '.join(overlapping)}"))
    for line in lines:
        console.print(line, highlight=False)
    for r in cmp["results"]:
        if r.get("variant"):
            line = f"{r['algorithm']} {variant_line(r['variant'], r.get('variant_rule'))}"
            console.print(line, highlight=False, soft_wrap=True)
    if "bound_error" in cmp:
        console.print(f"note: bounds unavailable: {cmp['bound_error']}")
