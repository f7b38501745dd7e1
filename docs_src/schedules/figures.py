"""Draw the figures of docs/schedules.md into docs/img/ (run: python docs_src/schedules/figures.py)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from resilientcc.schedules.optcc import balanced_shares

OUT = Path(__file__).resolve().parents[2] / "docs" / "img"


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


def stages_figure() -> None:
    stages = [
        (
            "hierarchical",
            ["intra RS (NVLink)", "rail ring RS", "rail ring AG", "intra AG (NVLink)"],
        ),
        (
            "r2cc_allreduce",
            ["ring on (1−X)·M, all servers", "tail X·M among healthy", "helper ⇄ degraded"],
        ),
        (
            "optcc, piece k",
            [
                "1 intra reduce",
                "2 one hop to owner + owner tree",
                "3 owner → server",
                "4 one hop back + copy",
            ],
        ),
    ]
    fig, axes = plt.subplots(3, 1, figsize=(10, 4.8))
    for ax, (name, parts) in zip(axes, stages, strict=True):
        if name.startswith("optcc"):
            for k in range(4):
                for j, label in enumerate(parts):
                    ax.barh(
                        k,
                        1,
                        left=k * 1.0 + j,
                        color=f"C{j}",
                        edgecolor="k",
                        label=label if k == 0 else None,
                    )
            ax.set_yticks(range(4), [f"piece {k}" for k in range(4)])
            ax.set_xlim(0, 8)
        elif name == "r2cc_allreduce":
            ax.barh(1, 6, left=0, color="C0", edgecolor="k", label=parts[0])
            ax.barh(0, 4, left=0, color="C1", edgecolor="k", label=parts[1])
            for k in range(4):
                ax.barh(
                    2,
                    0.8,
                    left=0.2 + 1.6 * k,
                    color="C2",
                    edgecolor="k",
                    label=parts[2] if k == 0 else None,
                )
            ax.set_yticks(range(3), ["tail", "main", "helper"])
            ax.set_xlim(0, 8)
        else:
            for j, label in enumerate(parts):
                ax.barh(0, 2, left=2 * j, color=f"C{j}", edgecolor="k", label=label)
            ax.set_yticks([0], ["all"])
            ax.set_xlim(0, 8)
        ax.set_title(name, fontsize=9, loc="left")
        ax.set_xticks([])
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    axes[-1].set_xlabel("time →")
    fig.tight_layout()
    fig.savefig(OUT / "schedule-stages.png", dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    shares_figure()
    stages_figure()
    print("wrote", *sorted(p.name for p in OUT.glob("*.png")))
