"""Draw docs/img/trees-torus.png: the tree packing's largest pairs on the 4 × 4 torus.

Run: python docs_src/custom_topology/figure.py (about 2 s). Each column is one pair of
the packing: its reduce tree above (towards the root, gold), its broadcast tree below
(out of it), with its share of the buffer; the slow cable is drawn thin, and a
wrap-around cable as a stub leaving the grid.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from resilientcc.schedules.tree_packing import pack_trees
from resilientcc.topology.io import topology_from_dict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graphs import torus  # the module next to this file

OUT = Path(__file__).resolve().parents[2] / "docs" / "img" / "trees-torus.png"


def _stub(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """Where to end an arrow from ``a`` to ``b``: ``b``, or, for a wrap-around cable of
    the torus, a stub leaving ``a`` away from the grid."""
    (x0, y0), (x1, y1) = a, b
    if abs(x1 - x0) <= 1 and abs(y1 - y0) <= 1:
        return b
    sx = 0 if x1 == x0 else (1 if x1 < x0 else -1)
    sy = 0 if y1 == y0 else (1 if y1 < y0 else -1)
    return x0 + 0.45 * sx, y0 + 0.45 * sy


def draw(out: Path = OUT, rows: int = 4, cols: int = 4, panels: int = 4) -> Path:
    topo = topology_from_dict(torus(rows, cols))
    packing = pack_trees(topo)
    pos = {r: (r % cols, -(r // cols)) for r in range(rows * cols)}
    top = max(lk.capacity for lk in topo.links)
    pairs = sorted(packing.pairs, key=lambda p: -p.share)[:panels]
    fig, axes = plt.subplots(2, len(pairs), figsize=(2.9 * len(pairs), 6.0), squeeze=False)
    for col, pair in enumerate(pairs):
        for row, (edges, colour, what) in enumerate(
            ((pair.up, "tab:red", "reduce into"), (pair.down, "tab:blue", "broadcast from"))
        ):
            ax = axes[row][col]
            for lk in topo.links:  # each cable once, thin where it is slow
                a, b = int(lk.src[1:]), int(lk.dst[1:])
                if a < b:
                    end = _stub(pos[a], pos[b])
                    lw = 0.8 if lk.capacity < top else 3
                    ax.plot(*zip(pos[a], end, strict=True), color="0.85", lw=lw, zorder=0)
            for src, dst in edges:
                ax.annotate(
                    "",
                    xy=_stub(pos[src], pos[dst]),
                    xytext=pos[src],
                    arrowprops={
                        "arrowstyle": "-|>",
                        "color": colour,
                        "lw": 1.5,
                        "shrinkA": 7,
                        "shrinkB": 7,
                        "mutation_scale": 11,
                    },
                )
            for r, (x, y) in pos.items():
                face = "gold" if r == pair.root else "white"
                ax.scatter([x], [y], s=170, color=face, edgecolor="k", zorder=3)
                ax.text(x, y, str(r), ha="center", va="center", fontsize=7, zorder=4)
            ax.set_title(f"{what} {pair.root} (share {float(pair.share):.3f})", fontsize=9)
            ax.set_xlim(-0.6, cols - 0.4)
            ax.set_ylim(-rows + 0.4, 0.6)
            ax.set_aspect("equal")
            ax.set_axis_off()
    fig.suptitle(
        f"{topo.name} (cable 0-1 at 1/4, thin): the {len(pairs)} largest of"
        f" {len(packing.pairs)} tree pairs",
        fontsize=10,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(draw())
