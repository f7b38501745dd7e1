"""Simulation wall time vs cluster size (prints a table; no assertions).

Usage: python benchmarks/bench_sim.py [--sizes 32,128,512,1024] [--optcc-sizes 32,64,128]
                                      [--repeat 3] [--channels 1] [--algos ring,optcc]
                                      [--engines compiled,python]
       python benchmarks/bench_sim.py --validate   # ring/balance vs closed forms (slow)

The ring at p GPUs has 2(p-1)·C·p transfers; with the default C = 1 channel the
1024-GPU ring is 2.1 M transfers. OptCC runs with server 0 at X = 1/2 (4 of 8 NICs
down); its schedules grow faster than the ring's, hence its own, smaller sizes.
Generation time is reported separately from the simulation time (the median of
--repeat runs), with the simulation time per transfer and per event. OptCC is included
when ``resilientcc.schedules.optcc`` exists.

Each schedule is simulated by every engine of --engines in turn (``compiled``: the
numba event loop, ``python``: the reference loop; with ``-noskip``, recomputing the
max-min updates in which every class's joins and leaves cancel, which they skip by
default, ``flow.SKIP_CANCELLED``; with ``-noprune``, reaching every class at least as
fast as the update's threshold, where by default they leave out those that the links
they meet cannot bind, ``flow.LEAVE_OUT``; with ``-nodom``, keeping in every class
the links that another of its links always fills first, ``flow.DROP_DOMINATED``;
``-noskip-noprune-nodom`` is the loops before all three), and the
last column is the first engine's speed-up over each (measured side by side, same
schedule, same run). The
compiled loop is compiled (or loaded from numba's cache) once before the table; that
time is printed first and not counted in any row.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import time
from collections.abc import Callable
from fractions import Fraction

import resilientcc.sim.flow as flow
from resilientcc.bounds import lower_bound
from resilientcc.schedules.ir import Schedule
from resilientcc.schedules.ring import ring
from resilientcc.sim import SimResult, simulate
from resilientcc.topology import fail_nics, hierarchical
from resilientcc.topology.model import Topology

M = Fraction(2**30)


def _time(fn: Callable[[], SimResult], repeat: int) -> tuple[float, SimResult]:
    out: SimResult | None = None
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - t0)
    assert out is not None
    return statistics.median(walls), out


def bench(
    sizes: list[int],
    optcc_sizes: list[int],
    repeat: int,
    channels: int,
    which: set[str],
    engines: list[str],
) -> None:
    runs: list[tuple[str, int, Callable[[Topology], Schedule], bool]] = []
    if "ring" in which:
        for p in sizes:
            runs.append(("ring", p, lambda t: ring(t, M, check=False, channels=channels), False))
    if "optcc" in which and importlib.util.find_spec("resilientcc.schedules.optcc") is not None:
        from resilientcc.schedules.optcc import optcc

        for p in optcc_sizes:
            runs.append(("optcc", p, lambda t: optcc(t, M, check=False), True))
    if any(e.startswith("compiled") for e in engines):
        tiny = hierarchical(2, 8)
        t0 = time.perf_counter()
        simulate(ring(tiny, M, check=False), tiny, engine="compiled")
        print(f"compiled loop ready in {time.perf_counter() - t0:.1f} s (compiled or cached)")
    print(
        f"{'algo':6} {'GPUs':>5} {'engine':>15} {'transfers':>10} {'events':>9} {'gen s':>7}"
        f" {'sim s':>8} {'us/xfer':>8} {'us/event':>8} {'sim time':>11} {'x bound':>8}"
        f" {'speed-up':>8}"
    )
    for name, p, gen, degraded in runs:
        base = hierarchical(p // 8, 8)
        topo = fail_nics(base, 0, 4) if degraded else base
        t0 = time.perf_counter()
        try:
            sched = gen(topo)
        except Exception as e:  # a generator may not scale to this size
            print(f"{name:6} {p:5} generation failed: {e}")
            continue
        g = time.perf_counter() - t0
        gc.collect()  # else the first engine's run pays for collecting the generator's objects
        bound = float(lower_bound(topo, M).seconds) if degraded else float("nan")
        first: float | None = None  # the first engine's wall time
        for eng in engines:
            loop, *offs = eng.split("-")
            flow.SKIP_CANCELLED = "noskip" not in offs
            flow.LEAVE_OUT = "noprune" not in offs
            flow.DROP_DOMINATED = "nodom" not in offs
            try:
                wall, res = _time(
                    lambda s=sched, tp=topo, e=loop: simulate(s, tp, engine=e), repeat
                )
            finally:
                flow.SKIP_CANCELLED = flow.LEAVE_OUT = flow.DROP_DOMINATED = True
            if first is None:
                first = wall
            print(
                f"{name:6} {p:5} {eng:>15} {res.num_transfers:10} {res.num_events:9} {g:7.2f}"
                f" {wall:8.2f} {wall / max(res.num_transfers, 1) * 1e6:8.2f}"
                f" {wall / max(res.num_events, 1) * 1e6:8.2f} {res.time_s * 1e3:8.3f} ms"
                f" {res.time_s / bound:8.3f} {wall / first:8.1f}",
                flush=True,
            )


def validate() -> None:
    from resilientcc.schedules.balance import balance

    print(f"{'servers':>7} {'X':>6} {'balance/ff':>10} {'1/(1-X)':>8} {'naive/ff':>9}")
    for servers in (4, 8, 16):
        p = 8 * servers
        ff = 2 * (p - 1) / p * float(M) / (8 * 50e9)
        for k in (1, 2, 4):
            topo = fail_nics(hierarchical(servers, 8), 0, k)
            tb = simulate(balance(topo, M, check=False), topo, zero_latency=True).time_s
            tn = simulate(ring(topo, M, check=False), topo, zero_latency=True).time_s
            x = k / 8
            print(
                f"{servers:7} {x:6.3f} {tb / ff:10.5f} {1 / (1 - x):8.5f} {tn / ff:9.5f}",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="32,128,512,1024", help="GPUs, for the ring")
    ap.add_argument("--optcc-sizes", default="32,64,128", help="GPUs, for OptCC")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--algos", default="ring,optcc", help="comma-separated: ring, optcc")
    ap.add_argument(
        "--engines",
        default="compiled,python",
        help="comma-separated simulator loops to time side by side: compiled or python,"
        " each optionally with any of -noskip, -noprune, -nodom (e.g. compiled-noprune-nodom)",
    )
    ap.add_argument("--validate", action="store_true")
    a = ap.parse_args()
    engines = [e for e in a.engines.split(",") if e]
    for e in engines:
        loop, *offs = e.split("-")
        if loop not in ("compiled", "python") or not set(offs) <= {"noskip", "noprune", "nodom"}:
            ap.error(
                f"--engines: unknown engine {e!r} (compiled or python, then optionally"
                " any of -noskip, -noprune, -nodom)"
            )
    if a.validate:
        validate()
    else:
        bench(
            [int(x) for x in a.sizes.split(",") if x],
            [int(x) for x in a.optcc_sizes.split(",") if x],
            a.repeat,
            a.channels,
            set(a.algos.split(",")),
            engines,
        )


if __name__ == "__main__":
    main()
