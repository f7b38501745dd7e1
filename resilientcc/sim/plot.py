"""Pictures of a simulation: a per-rank Gantt chart and network utilisation over time.

matplotlib is imported lazily (Agg backend), so importing :mod:`resilientcc.sim` stays cheap.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from resilientcc.errors import InputError
from resilientcc.schedules.ir import Schedule
from resilientcc.sim.result import SimResult
from resilientcc.topology.io import atomic_file, check_writable
from resilientcc.topology.model import Topology

__all__ = [
    "KINDS",
    "check_png_path",
    "gantt_selection",
    "kind_series",
    "kinds_of",
    "plot",
    "plot_compare",
    "plot_gantt",
    "rank_servers",
    "schedule_rows",
    "transfer_kinds",
    "utilisation_series",
]

_MAX_RANKS = 64
_MAX_BARS = 200_000

#: what :func:`transfer_kinds` labels a transfer: inside a server (over NVLink) or
#: between servers (over the network), and whether the receiver adds or overwrites.
#: In a hierarchical AllReduce they are its four stages: the intra-server
#: reduce-scatter, the network reduce-scatter, the network all-gather and the
#: intra-server all-gather.
KINDS = ("NVLink reduce", "network reduce", "network copy", "NVLink copy")


def transfer_kinds(result: SimResult, schedule: Schedule, topology: Topology) -> np.ndarray:
    """Each simulated transfer's index into :data:`KINDS`.

    A transfer is *network* when its two ranks sit on different servers (or on none:
    switch-model endpoints), else *NVLink*; ``reduce`` or ``copy`` is its op.

    >>> from fractions import Fraction
    >>> from resilientcc.schedules.hierarchical import hierarchical as hier
    >>> from resilientcc.sim import simulate
    >>> from resilientcc.topology import hierarchical
    >>> topo = hierarchical(2, 2, 2)
    >>> sched = hier(topo, Fraction(2**20))
    >>> res = simulate(sched, topo)
    >>> kinds = transfer_kinds(res, sched, topo)
    >>> print(", ".join(KINDS[k] for k in sorted(set(kinds.tolist()))))
    NVLink reduce, network reduce, network copy, NVLink copy
    """
    rows = schedule_rows(result, schedule, "transfer_kinds")
    ts = schedule.transfers
    is_reduce = np.fromiter((t.op == "reduce" for t in ts), bool, len(ts))[rows]
    server = rank_servers(topology)
    return kinds_of(is_reduce, server[result.src], server[result.dst])


def schedule_rows(result: SimResult, schedule: Schedule, what: str = "plot") -> np.ndarray:
    """Each simulated transfer's index in ``schedule.transfers`` (matched by id).

    Raises:
        InputError: ``result`` has a transfer that ``schedule`` lacks (``what`` names the
            caller in the message).
    """
    ts = schedule.transfers
    ids = np.fromiter((t.id for t in ts), np.int64, len(ts))
    if len(ts) == result.num_transfers and np.array_equal(ids, result.transfer_ids):
        return np.arange(len(ts))  # the simulator keeps the schedule's order
    order = np.argsort(ids, kind="stable")
    at = np.searchsorted(ids[order], result.transfer_ids)
    if at.size and (at.max() >= len(ts) or np.any(ids[order][at] != result.transfer_ids)):
        raise InputError(f"{what}: the result is not a simulation of this schedule")
    return order[at]


def rank_servers(topology: Topology) -> np.ndarray:
    """Each rank's server, ``-1`` for a GPU in none."""
    server = np.full(max((g.rank or 0 for g in topology.gpus), default=-1) + 1, -1, np.int64)
    for g in topology.gpus:
        server[g.rank or 0] = -1 if g.server is None else g.server
    return server


def kinds_of(is_reduce: np.ndarray, src_server: np.ndarray, dst_server: np.ndarray) -> np.ndarray:
    """Indices into :data:`KINDS` from each transfer's op and its ranks' servers."""
    inside = (src_server == dst_server) & (src_server >= 0)
    out = np.where(inside, np.where(is_reduce, 0, 3), np.where(is_reduce, 1, 2))
    return out.astype(np.int8)


def utilisation_series(
    result: SimResult, bins: int = 200, select: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Aggregate throughput over time, in bytes/s, of the transfers (binned).

    Each transfer contributes its bytes spread evenly over ``[start_s, tx_end_s]`` (one
    that takes no time adds nothing). ``select``, a boolean mask
    over the transfers, keeps only some of them; the bins always span the whole run.
    Returns ``(bin centres in seconds, bytes/s)``.
    """
    span = float(np.nanmax(result.tx_end_s)) if result.num_transfers else 0.0
    if span <= 0:
        return np.zeros(0), np.zeros(0)
    edges = np.linspace(0.0, span, bins + 1)
    rate = np.zeros(bins)
    start, end, nb = result.start_s, result.tx_end_s, result.nbytes
    if select is not None:
        start, end, nb = start[select], end[select], nb[select]
    width = edges[1] - edges[0]
    # overlap of [start, end] with each bin, vectorised in blocks
    for lo in range(0, len(start), 50000):
        s = start[lo : lo + 50000, None]
        e = end[lo : lo + 50000, None]
        b = nb[lo : lo + 50000, None]
        ov = np.clip(np.minimum(e, edges[None, 1:]) - np.maximum(s, edges[None, :-1]), 0, None)
        dur = np.maximum(e - s, 1e-300)
        rate += (ov / dur * b).sum(axis=0)
    return (edges[:-1] + edges[1:]) / 2, rate / width


def kind_series(
    result: SimResult, kinds: np.ndarray, bins: int = 200
) -> tuple[np.ndarray, np.ndarray]:
    """Throughput over time of each of :data:`KINDS`: ``(bin centres, rates)``.

    ``kinds`` comes from :func:`transfer_kinds`; ``rates[k]`` is the bytes/s of kind
    ``k`` in each bin (:func:`utilisation_series` of its transfers), so the rows sum to
    the aggregate throughput.
    """
    series = [utilisation_series(result, bins, select=kinds == k) for k in range(len(KINDS))]
    x = series[0][0]  # the same bins for every kind
    return x, np.array([rate for _, rate in series]).reshape(len(KINDS), x.size)


def gantt_selection(
    result: SimResult, max_ranks: int = _MAX_RANKS, max_bars: int | None = None
) -> np.ndarray:
    """Indices of the transfers the Gantt chart draws: those sent by the first
    ``max_ranks`` ranks, and of more than ``max_bars`` (default 200 000) every ``k``-th,
    so that the chart spans the whole run."""
    cap = _MAX_BARS if max_bars is None else max_bars
    sel = np.flatnonzero(result.src < max_ranks)
    if sel.size > cap:
        sel = sel[:: -(-sel.size // cap)]
    return sel


def _bars(left: np.ndarray, width: np.ndarray, y: np.ndarray, height: float, color: object) -> Any:
    """Horizontal bars as one PolyCollection (what ``barh`` draws, in one artist)."""
    from matplotlib.collections import PolyCollection

    lo, hi = y - height / 2, y + height / 2
    right = left + width
    verts = np.stack(
        [
            np.stack([left, lo], axis=1),
            np.stack([right, lo], axis=1),
            np.stack([right, hi], axis=1),
            np.stack([left, hi], axis=1),
        ],
        axis=1,
    )
    return PolyCollection(list(verts), facecolors=color, edgecolors="none", linewidths=0)


def plot(
    result: SimResult,
    path: str | os.PathLike[str],
    max_ranks: int = _MAX_RANKS,
    kinds: np.ndarray | None = None,
) -> None:
    """Write a PNG: Gantt chart of sends per rank (top) and aggregate throughput (bottom).

    The transfers of the first ``max_ranks`` ranks are drawn, at most 200 000 bars:
    beyond that every ``k``-th transfer, so that the chart spans the whole run. The bars
    are two collections (``barh`` drew 40,000 bars in half a minute; 8 × 8 GPUs, OptCC,
    1.4 million transfers: 34 s → 5 s to plot). The throughput panel covers every
    transfer. With ``kinds`` (:func:`transfer_kinds`) the bars are coloured by kind and
    the throughput is stacked by kind, so a schedule's stages show; without, the bars
    are coloured by destination.

    Raises:
        InputError: the path does not end in ``.png`` or cannot be written.
    """
    out = Path(path)
    plt = _pyplot(out)

    if kinds is None:
        fig, (ax1, ax2) = plt.subplots(
            2, 1, figsize=(10, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
        )
    else:
        fig, (ax1, ax2, ax3) = plt.subplots(
            3, 1, figsize=(10, 8), sharex=True, gridspec_kw={"height_ratios": [3, 1, 1]}
        )
    sel = gantt_selection(result, max_ranks)
    if sel.size:
        scale = 1e3
        starts = result.start_s[sel] * scale
        widths = (result.tx_end_s[sel] - result.start_s[sel]) * scale
        cmap = plt.get_cmap("tab10")
        colors = cmap(result.dst[sel] % 10) if kinds is None else cmap(kinds[sel])
        rows = result.src[sel]
        lat_w = (result.end_s[sel] - result.tx_end_s[sel]) * scale
        # one collection per layer (40,000 separate bars took half a minute to draw)
        ax1.add_collection(_bars(starts, widths, rows, 0.8, colors))
        ax1.add_collection(_bars(starts + widths, lat_w, rows, 0.3, "0.7"))
        ax1.autoscale_view()
    ax1.set_ylabel("sending rank")
    ax1.invert_yaxis()
    ax1.set_title(
        f"{result.schedule} on {result.topology}: {result.time_s * 1e3:.4g} ms "
        f"(latency part {result.latency_s * 1e6:.4g} us)"
    )
    if kinds is None:
        x, r = utilisation_series(result)
        if x.size:
            ax2.plot(x * 1e3, r / 1e9)
        ax2.set_ylabel("throughput (GB/s)")
        ax2.set_xlabel("time (ms)")
    else:
        _stack_kinds(ax2, ax3, *kind_series(result, kinds), legend=True)
        ax3.set_xlabel("time (ms)")
    fig.tight_layout()
    _save(fig, out)


def plot_compare(
    runs: Sequence[tuple[str, SimResult, np.ndarray]],
    path: str | os.PathLike[str],
    bound_s: float | None = None,
    caption: str = "",
) -> None:
    """Write a PNG comparing runs: for each ``(name, result, kinds)``, the network's and
    NVLink's throughput stacked by kind (:func:`transfer_kinds`), on one time axis, with
    the lower bound ``bound_s`` dashed.

    Raises:
        InputError: the path does not end in ``.png`` or cannot be written.
    """
    out = Path(path)
    plt = _pyplot(out)

    fig, axes = plt.subplots(
        2 * len(runs), 1, figsize=(10, 2.0 * len(runs) + 1.0), sharex=True, squeeze=False
    )
    span = max((res.time_s for _, res, _ in runs), default=0.0) * 1e3
    for row, (name, res, kinds) in enumerate(runs):
        pair = (axes[2 * row, 0], axes[2 * row + 1, 0])
        _stack_kinds(*pair, *kind_series(res, kinds), legend=row == 0, outside=True)
        for ax in pair:
            if bound_s is not None:
                ax.axvline(bound_s * 1e3, color="k", ls="--", lw=0.8)
            ax.tick_params(labelsize=7)
        vs = f" ({res.time_s / bound_s:.3f} × the bound)" if bound_s else ""
        axes[2 * row, 0].set_title(f"{name}: {res.time_s * 1e3:.4g} ms{vs}", fontsize=9, loc="left")
    axes[-1, 0].set_xlim(0, span * 1.02 if span > 0 else 1)
    dashed = "; dashed: the lower bound" if bound_s is not None else ""
    axes[-1, 0].set_xlabel(f"time (ms){'; ' + caption if caption else ''}{dashed}")
    fig.tight_layout()
    _save(fig, out)


def check_png_path(path: str | os.PathLike[str]) -> None:
    """InputError unless ``path`` ends in ``.png`` and can be written. Cheap, so ``rcc
    sim`` calls it before simulating."""
    out = Path(path)
    if out.suffix.lower() != ".png":
        raise InputError(f"--plot: {out} must end in .png")
    check_writable(out, "--plot")


def _pyplot(out: Path) -> Any:
    """``matplotlib.pyplot`` on the Agg backend, once ``out`` is known to be a PNG path."""
    check_png_path(out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _stack_kinds(
    net: Any, nvl: Any, x: np.ndarray, rates: np.ndarray, legend: bool, outside: bool = False
) -> None:
    """The network's and NVLink's throughput stacked by kind, on two axes (apart, since
    NVLink's aggregate is an order of magnitude larger)."""
    for ax, part, where in ((net, (1, 2), "network"), (nvl, (0, 3), "NVLink")):
        if x.size:
            ax.stackplot(
                x * 1e3,
                rates[list(part)] / 1e9,
                labels=[KINDS[k] for k in part],
                colors=[f"C{k}" for k in part],
            )
        if outside:
            ax.set_ylabel(f"{where}\nGB/s", fontsize=8)
        else:
            ax.set_ylabel(f"{where} (GB/s)")
        if legend and x.size:
            if outside:
                ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
            else:
                ax.legend(fontsize=7, loc="upper right")


def _save(fig: Any, out: Path) -> None:
    """Write ``fig`` to ``out`` atomically (:func:`~resilientcc.topology.io.atomic_file`),
    and close it."""
    import matplotlib.pyplot as plt

    try:
        with atomic_file(out, "--plot", "wb") as f:
            fig.savefig(f, format="png", dpi=100)
    finally:
        plt.close(fig)


plot_gantt = plot
