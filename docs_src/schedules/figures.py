"""Draw the figures of docs/schedules.md into docs/img/ (run: python docs_src/schedules/figures.py)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from resilientcc.bounds import lower_bound
from resilientcc.schedules.generators import get_generator
from resilientcc.schedules.optcc import balanced_shares
from resilientcc.sim import simulate
from resilientcc.sim.plot import KINDS, kind_series, transfer_kinds
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
    NICs. Per algorithm one row of the network's throughput and one of NVLink's, on a
    common time axis, with the lower bound dashed. Returns each algorithm's bytes per
    kind (:data:`~resilientcc.sim.plot.KINDS`), in units of ``size``.
    """
    topo = fail_nics(hierarchical(servers, gpus), 0, lost)
    bound = float(lower_bound(topo, size).seconds)
    runs = {}
    for name in algorithms:
        sched = get_generator(name)(topo, size)
        res = simulate(sched, topo)
        runs[name] = (res, transfer_kinds(res, sched, topo))
    span = max(res.time_s for res, _ in runs.values()) * 1e3
    fig, axes = plt.subplots(
        2 * len(runs), 1, figsize=(10, 2.0 * len(runs) + 1.0), sharex=True, squeeze=False
    )
    totals = {}
    for row, (name, (res, kinds)) in enumerate(runs.items()):
        x, rates = kind_series(res, kinds)
        totals[name] = [float(res.nbytes[kinds == k].sum() / size) for k in range(len(KINDS))]
        for ax, part, where in (
            (axes[2 * row, 0], (1, 2), "network"),
            (axes[2 * row + 1, 0], (0, 3), "NVLink"),
        ):
            ax.stackplot(
                x * 1e3,
                rates[list(part)] / 1e9,
                labels=[KINDS[k] for k in part],
                colors=[f"C{k}" for k in part],
            )
            ax.axvline(bound * 1e3, color="k", ls="--", lw=0.8)
            ax.set_ylabel(f"{where}\nGB/s", fontsize=8)
            ax.tick_params(labelsize=7)
            if row == 0:
                ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        axes[2 * row, 0].set_title(
            f"{name}: {res.time_s * 1e3:.3f} ms ({res.time_s / bound:.3f} × the bound)",
            fontsize=9,
            loc="left",
        )
    axes[-1, 0].set_xlim(0, span * 1.02)
    axes[-1, 0].set_xlabel(
        f"time (ms); {servers} × {gpus} GPUs, server 0 lost {lost} of {gpus} NICs, "
        f"{float(size) / 2**20:g} MiB; dashed: the lower bound"
    )
    fig.tight_layout()
    fig.savefig(out / "schedule-stages.png", dpi=100)
    plt.close(fig)
    return totals


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    shares_figure()
    stages_figure()
    print("wrote", *sorted(p.name for p in OUT.glob("*.png")))
