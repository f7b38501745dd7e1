"""Draw the figures of docs/schedules.md into docs/img/ (run: python docs_src/schedules/figures.py)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from resilientcc.bounds import lower_bound
from resilientcc.schedules.generators import get_generator
from resilientcc.schedules.optcc import balanced_shares, ring_options
from resilientcc.sim import simulate
from resilientcc.sim.plot import KINDS, plot_compare, transfer_kinds
from resilientcc.topology import fail_nics, hierarchical

OUT = Path(__file__).resolve().parents[2] / "docs" / "img"
ALGORITHMS = ("ring", "balance", "hierarchical", "r2cc_allreduce", "optcc")


def shares_figure() -> None:
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    betas = [Fraction(i, 64) for i in range(4, 65)]
    for n in (4, 8, 16):
        w = [balanced_shares({0: b, **{i: Fraction(1) for i in range(1, n)}}) for b in betas]
        ax.plot([float(b) for b in betas], [float(x[0] * n) for x in w], label=f"N = {n}")
        ax.axvline(float(Fraction(n - 1, 2 * n - 3)), color="grey", lw=0.5, ls=":")
    ax.set_xlabel("straggler bandwidth β")
    ax.set_ylabel("straggler share × N")
    ax.set_title("OptCC: the straggler owns nothing below β* = (N−1)/(2N−3)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(OUT / "optcc-shares.png", dpi=100)
    plt.close(fig)


def stages_figure(
    out: Path = OUT,
    servers: int = 4,
    gpus: int = 8,
    lost: int = 2,
    size: Fraction = Fraction(256 * 2**20),
    algorithms: tuple[str, ...] = ALGORITHMS,
) -> dict[str, list[float]]:
    """Each algorithm simulated on one cluster, its throughput stacked by kind of transfer.

    Measured, not drawn: every algorithm's generator, checked by the exact executor,
    then the simulator, on ``servers`` × ``gpus`` GPUs with server 0 losing ``lost``
    NICs; the figure is what ``rcc sim ring,balance,... --plot`` draws. Returns each
    algorithm's bytes per kind (:data:`~resilientcc.sim.plot.KINDS`), in units of
    ``size``.
    """
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    bound = float(lower_bound(topo, size).seconds)
    runs = []
    totals = {}
    for name in algorithms:
        sched = get_generator(name)(topo, size)
        res = simulate(sched, topo)
        kinds = transfer_kinds(res, sched, topo)
        runs.append((name, res, kinds))
        totals[name] = [float(res.nbytes[kinds == k].sum() / size) for k in range(len(KINDS))]
    caption = (
        f"{servers} × {gpus} GPUs, server 0 lost {lost} of {gpus} NICs, {float(size) / 2**20:g} MiB"
    )
    plot_compare(runs, out / "schedule-stages.png", bound_s=bound, caption=caption)
    return totals


def small_figure(
    out: Path = OUT,
    servers: int = 8,
    gpus: int = 8,
    lost: int = 1,
    size: Fraction = Fraction(4 * 2**20),
) -> dict[str, float]:
    """OptCC on a small buffer, simulated twice: with the rings it ran before (at their
    depth) and with its small-buffer defaults (the direct network pass, halving inside
    the servers, 8 pieces). Returns each run's simulated time (s)."""
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    optcc = get_generator("optcc")
    rings = ring_options(size, servers)
    runs = []
    times = {}
    for name, opts in (("optcc, rings", rings), ("optcc, small-buffer defaults", {})):
        sched = optcc(topo, size, **opts)
        res = simulate(sched, topo)
        runs.append((name, res, transfer_kinds(res, sched, topo)))
        times[name] = res.time_s
    caption = (
        f"{servers} × {gpus} GPUs, server 0 lost {lost} of {gpus} NICs, {float(size) / 2**20:g} MiB"
    )
    bound = float(lower_bound(topo, size).seconds)
    plot_compare(runs, out / "small-buffers.png", bound_s=bound, caption=caption)
    return times


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    shares_figure()
    stages_figure()
    small_figure()
    print("wrote", *sorted(p.name for p in OUT.glob("*.png")))
