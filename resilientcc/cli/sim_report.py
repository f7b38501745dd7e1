"""What ``rcc sim`` prints for one run: the simulation next to the bounds and references.

:func:`references` computes what every run on a cluster is compared with (the lower
bound, NCCL's fault-free ring in closed form and simulated, the fault-free bound);
:func:`sim_report` simulates a schedule and puts its result next to them (the object
``rcc sim --json`` prints). The generation and simulation helpers say on stderr what
takes long.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import typer

from resilientcc.errors import ResilientCCError
from resilientcc.schedules.ir import Schedule
from resilientcc.topology.model import Topology
from resilientcc.units import format_size, format_time

if TYPE_CHECKING:  # the simulator is imported when a command runs, not with the CLI
    from resilientcc.sim.result import SimResult

__all__ = [
    "FF_RING_SIM_MAX_GPUS",
    "LONG_GEN_GPUS",
    "LONG_SIM_TRANSFERS",
    "PROGRESS_INTERVAL_S",
    "announce_generation",
    "generate_schedule",
    "latency_overlaps",
    "overlap_note",
    "print_report",
    "references",
    "report_run",
    "show_pct",
    "show_ratio",
    "show_time",
    "sim_report",
    "variant_line",
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
#: and from this many when the schedule is a tree packing (its column generation: about
#: a second on 2 × 8 GPUs, up to 20 s on 10 × 4 with two NICs per server)
LONG_PACKING_GPUS = 24


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
    """NCCL's ring simulated on ``topo`` without its failures, with the same options.

    A cluster with failures is rebuilt by :func:`~resilientcc.bounds.fault_free_topology`
    (from its builder's parameters, so with the builder's link latencies).
    """
    from resilientcc.bounds import fault_free_topology
    from resilientcc.schedules.ring import ring
    from resilientcc.sim import simulate

    # a cluster with no failure is its own fault-free cluster (rebuilding a switch model
    # from its bandwidths would drop the latencies of its links)
    healthy = topo if not topo.failures else fault_free_topology(topo)
    options = {k: v for k, v in sim_options.items() if k != "progress"}
    return float(simulate(ring(healthy, size), healthy, **options).time_s)


def _latency_bound(
    topo: Topology, size: Fraction, sim_options: dict[str, Any], bound_s: float
) -> float:
    """The latency-aware bound for the simulator's options (the LP bound when the run
    ignores latencies)."""
    from resilientcc.bounds import latency_lower_bound
    from resilientcc.sim import DEFAULT_BASE_LATENCY

    if sim_options.get("zero_latency"):
        return bound_s
    # a float base latency is read as the decimal it prints as (8.4e-06 -> 84/10^7)
    base = sim_options.get("base_latency", DEFAULT_BASE_LATENCY)
    return float(latency_lower_bound(topo, size, base_latency=base).seconds)


def references(topo: Topology, size: Fraction, **sim_options: Any) -> dict[str, Any]:
    """What a run is compared with: the lower bound, NCCL's fault-free ring (closed form
    and, up to :data:`FF_RING_SIM_MAX_GPUS` GPUs, simulated with the same options) and
    the fault-free bound. A value is ``None`` where it cannot be had for this cluster,
    and ``bound_error`` then says why the bounds could not."""
    out: dict[str, Any] = {
        "lower_bound_s": None,
        "latency_bound_s": None,
        "fault_free_ring_s": None,
        "fault_free_ring_sim_s": None,
        "fault_free_lower_bound_s": None,
    }
    try:
        from resilientcc.bounds import fault_free_lower_bound, fault_free_ring_time, lower_bound

        out["lower_bound_s"] = float(lower_bound(topo, size).seconds)
        out["latency_bound_s"] = _latency_bound(topo, size, sim_options, out["lower_bound_s"])
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
    result: SimResult | None = None,
    **sim_options: Any,
) -> tuple[dict[str, Any], SimResult]:
    """Simulate and put the result next to the bounds: ``(the dictionary rcc sim --json
    prints, the simulation's result)``.

    ``refs``: :func:`references` for this cluster and size, when already computed (the
    same for every schedule of a comparison). ``result``: the schedule's simulation with
    ``sim_options``, when already run (``--tune`` ran it); else it is simulated here.
    """
    from resilientcc.sim import simulate

    res = result if result is not None else simulate(sched, topo, **sim_options)
    size = sched.size
    if refs is None:
        refs = references(topo, size, **sim_options)
    lb, ff_ring = refs["lower_bound_s"], refs["fault_free_ring_s"]
    ff_ring_sim, ff_lb = refs["fault_free_ring_sim_s"], refs["fault_free_lower_bound_s"]
    bound_error = refs.get("bound_error")
    window = res.floor_window()  # around the byte floor's link
    floor_s, floor_link = window.floor_s, window.link
    over_ring = _ratio(res.time_s, ff_ring)
    over_ring_sim = _ratio(res.time_s, ff_ring_sim)
    over_lb = _ratio(res.time_s, ff_lb)
    out: dict[str, Any] = {
        "algorithm": algorithm,
        "schedule": sched.name,
        "variant": sched.meta_get("variant"),
        "variant_rule": sched.meta_get("variant_rule"),
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
        "latency_bound_s": refs.get("latency_bound_s"),
        "ratio_to_latency_bound": _ratio(res.time_s, refs.get("latency_bound_s")),
        "bandwidth_ratio_to_bound": _ratio(res.bandwidth_s, lb),
        "byte_floor_s": floor_s,
        "byte_floor_link": floor_link,
        "byte_floor_ratio_to_bound": _ratio(floor_s, lb),
        "byte_floor_head_s": window.head_s,
        "byte_floor_idle_s": window.idle_s,
        "byte_floor_tail_s": window.tail_s,
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
    return out, res


def show_time(x: float | None) -> str:
    """A time for a table (``n/a`` where there is none)."""
    return "n/a" if x is None else format_time(x)


def show_pct(x: float | None, digits: int) -> str:
    """An overhead (a fraction) as a signed percentage for a table."""
    return "n/a" if x is None else f"{x * 100:+.{digits}f} %"


def show_ratio(x: float | None, digits: int) -> str:
    """A ratio for a table."""
    return "n/a" if x is None else f"{x:.{digits}f}"


def print_report(rep: dict[str, Any]) -> None:
    """Print :func:`sim_report`'s dictionary as ``rcc sim``'s table, with its notes."""
    from rich.console import Console
    from rich.table import Table

    t = show_time

    def pct(x: float | None) -> str:
        return show_pct(x, 2)

    def ratio(x: float | None) -> str:
        return show_ratio(x, 4)

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
        ("lower bound with latency", t(rep["latency_bound_s"])),
        ("time / lower bound with latency", ratio(rep["ratio_to_latency_bound"])),
        ("byte floor (busiest link's bytes / capacity)", t(rep["byte_floor_s"])),
        ("  byte floor / lower bound", ratio(rep["byte_floor_ratio_to_bound"])),
        ("  + before its link's first byte", t(rep["byte_floor_head_s"])),
        ("  + idle in its link's busy window", t(rep["byte_floor_idle_s"])),
        ("  + after its link's last byte", t(rep["byte_floor_tail_s"])),
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
    if rep.get("variant"):
        console.print(
            variant_line(rep["variant"], rep.get("variant_rule")), highlight=False, soft_wrap=True
        )
    if "bound_error" in rep:
        console.print(f"note: bounds unavailable: {rep['bound_error']}")
    if latency_overlaps(rep):
        console.print(overlap_note("the bandwidth part"), highlight=False)


def variant_line(variant: str, rule: str | None) -> str:
    """The line naming a schedule's variant and the rule that chose it (``rcc synth``,
    ``rcc sim``).

    >>> variant_line("direct", "asked for")
    'variant: direct — asked for'
    """
    return f"variant: {variant}" + (f" — {rule}" if rule else "")


def overlap_note(subject: str) -> str:
    """Said under a table where ``subject`` (time − critical-path latency) is below the bound."""
    return (
        f"note: {subject} is below the lower bound:\n"
        "the critical path's latencies overlap transmissions elsewhere;\n"
        "--latency-mode rerun measures the latency part by a run with zero latencies"
    )


def latency_overlaps(rep: dict[str, Any]) -> bool:
    """Whether ``time − latency part`` (critical path) is below the lower bound."""
    lb = rep["lower_bound_s"]
    return (
        rep["latency_mode"] == "critical_path"
        and lb is not None
        and rep["bandwidth_s"] < lb * (1 - 1e-9)
    )


def _packs_trees(name: str, topo: Topology, size: Fraction, options: dict[str, Any]) -> bool:
    """Whether generating ``name`` packs trees (OptCC: where its rules choose them)."""
    if name != "optcc":
        return name == "trees"
    from resilientcc.schedules.optcc import choose_variant

    try:
        return choose_variant(topo, size, **options).variant == "trees"
    except ResilientCCError:  # the generator says what is wrong
        return False


def announce_generation(name: str, topo: Topology, size: Fraction, options: dict[str, Any]) -> bool:
    """Say on stderr that ``name``'s schedule is being generated where that takes a
    while (:data:`LONG_GEN_GPUS` GPUs, or :data:`LONG_PACKING_GPUS` where trees are
    packed); whether it said so."""
    n = topo.num_ranks
    if n >= LONG_GEN_GPUS:
        what = "and checking it exactly"
    elif n >= LONG_PACKING_GPUS and _packs_trees(name, topo, size, options):
        what = "packing reduce and broadcast trees by a linear program"
    else:
        return False
    typer.echo(f"generating {name} on {topo.num_ranks} GPUs ({what})...", err=True)
    return True


def generate_schedule(
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
    long_gen = announce_generation(name, topo, size, opts)
    t0 = time.monotonic()
    sched = gen(topo, size, **opts)
    if long_gen:
        typer.echo(
            f"  {len(sched.transfers):,} transfers in {time.monotonic() - t0:.0f} s", err=True
        )
    return sched


def report_run(
    sched: Schedule,
    topo: Topology,
    algorithm: str,
    refs: dict[str, Any] | None,
    result: SimResult | None = None,
    **sim_options: Any,
) -> tuple[dict[str, Any], SimResult]:
    """:func:`sim_report`, with progress on stderr for long simulations."""
    if result is not None:
        return sim_report(sched, topo, algorithm, refs, result=result, **sim_options)
    long_sim = len(sched.transfers) >= LONG_SIM_TRANSFERS
    if long_sim:
        typer.echo(
            f"simulating {algorithm}: {len(sched.transfers):,} transfers, this can take a while",
            err=True,
        )
    progress = _progress_printer() if long_sim else None
    return sim_report(sched, topo, algorithm, refs, progress=progress, **sim_options)
