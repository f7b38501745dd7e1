"""The flagship comparison: bound, ring, Balance, R2CC-AllReduce and OptCC under NIC loss.

:func:`flagship` simulates every algorithm on ``servers`` × 8-GPU H100-class clusters
(8 × 400 Gb/s NICs per server, rail fabric) where server 0 lost ``k`` of its 8 NICs,
and compares each time with the LP lower bound and with the fault-free ring (simulated
NCCL ring on the same cluster without failures) and the fault-free bound. Every time
comes with its latency part (the difference to the same simulation with zero latencies),
so the table shows how much of a gap to the bound is latency.
:func:`write_report` writes the table as JSON and Markdown, a compact headline
(:func:`rows_to_headline`) and a plot of overhead against bandwidth loss. Work runs in a
process pool (simulations are independent).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from resilientcc.topology.io import atomic_write_text
from resilientcc.units import format_size

__all__ = [
    "ALGORITHMS",
    "FileCache",
    "Row",
    "flagship",
    "rows_to_headline",
    "rows_to_markdown",
    "write_report",
]

ALGORITHMS = ("ring", "balance", "r2cc_allreduce", "optcc")
GPUS = 8
NICS = 8


@dataclass
class Row:
    """One configuration of the flagship table (times in seconds)."""

    servers: int
    nics_lost: int
    size_bytes: int
    beta: float
    bound_s: float
    fault_free_ring_s: float
    fault_free_ring_formula_s: float
    fault_free_bound_s: float
    times_s: dict[str, float] = field(default_factory=dict)
    #: the latency part of each time: minus the time of the same run with zero latencies
    latency_s: dict[str, float] = field(default_factory=dict)
    #: the latency-aware bound (:func:`resilientcc.bounds.latency_lower_bound`, NCCL's
    #: base latency), when computed
    latency_bound_s: float | None = None
    #: each schedule's byte floor: its busiest link's bytes over its capacity (no run of
    #: it ends sooner, latencies aside; never below the bound), when computed
    floor_s: dict[str, float] = field(default_factory=dict)

    def over_ring(self, algo: str) -> float:
        return self.times_s[algo] / self.fault_free_ring_s

    def over_bound(self, algo: str) -> float:
        return self.times_s[algo] / self.bound_s

    def over_ff_bound(self, algo: str) -> float:
        return self.times_s[algo] / self.fault_free_bound_s

    def floor_over_bound(self, algo: str) -> float:
        """The schedule's byte floor over the bound: what its placement of bytes costs."""
        return self.floor_s[algo] / self.bound_s

    def zero_latency_over_bound(self, algo: str) -> float:
        """The bandwidth part of the time (the zero-latency run) over the bound."""
        return (self.times_s[algo] - self.latency_s[algo]) / self.bound_s


class FileCache(dict[str, float]):
    """Simulated times saved to a JSON file after every new entry (runs can resume).

    A file that is not a JSON object, or entries that are not finite non-negative
    numbers, are left out (``skipped`` counts the entries): those times are simulated
    again.
    """

    def __init__(self, path: str | os.PathLike[str], *, fresh: bool = False) -> None:
        super().__init__()
        self.path = Path(path)
        self.skipped = 0
        if self.path.exists() and not fresh:
            try:
                data = json.loads(self.path.read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                data = {}
            if isinstance(data, dict):
                for k, v in data.items():
                    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
                    if ok and math.isfinite(v) and v >= 0:
                        super().__setitem__(str(k), float(v))
                    else:
                        self.skipped += 1

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps(dict(self), indent=1, sort_keys=True) + "\n")

    def __setitem__(self, key: str, value: float) -> None:
        super().__setitem__(key, value)
        self._save()

    def update(self, *args: Any, **kwargs: float) -> None:
        """Add several entries, saved in one write."""
        super().update(*args, **kwargs)
        self._save()

    def drop(self, algorithm: str) -> None:
        """Forget every entry of ``algorithm`` (saved at once)."""
        for k in [k for k in self if k.startswith(algorithm + "/")]:
            super().__delitem__(k)
        self._save()


def _topology(servers: int, lost: int) -> Any:
    from resilientcc.topology import fail_nics, hierarchical

    topo = hierarchical(servers, GPUS)
    return fail_nics(topo, 0, lost) if lost else topo


Job = tuple[str, int, int, int]


def _simulate(job: Job) -> tuple[Job, float, float, float]:
    """Run one simulation: ``(algorithm, servers, nics lost, size)`` -> (time, latency
    part, byte floor)."""
    from resilientcc.schedules.generators import generate
    from resilientcc.sim import simulate

    algo, servers, lost, size = job
    topo = _topology(servers, lost)
    # checked exactly before it is simulated (the generators' default; a few seconds)
    sched = generate(algo, topo, Fraction(size))
    # "rerun": the latency part is the difference to the same run with zero latencies
    # (the critical path's latencies would be one chain's, and move with small changes)
    res = simulate(sched, topo, latency_mode="rerun")
    return job, float(res.time_s), float(res.latency_s), res.byte_floor()[0]


def _bounds(servers: int, lost: int, size: int) -> tuple[float, float, float, float]:
    """The LP bound, the fault-free ring's closed form, the fault-free bound and the
    latency-aware bound, in seconds."""
    from resilientcc.bounds import (
        fault_free_lower_bound,
        fault_free_ring_time,
        latency_lower_bound,
        lower_bound,
    )

    topo = _topology(servers, lost)
    return (
        float(lower_bound(topo, size).seconds),
        float(fault_free_ring_time(topo, size)),
        float(fault_free_lower_bound(topo, size).seconds),
        float(latency_lower_bound(topo, size).seconds),
    )


def flagship(
    servers: Sequence[int] = (4, 8, 16),
    lost: Sequence[int] = (1, 2, 4),
    sizes: Sequence[int] = (2**30,),
    algorithms: Sequence[str] = ALGORITHMS,
    *,
    workers: int | None = None,
    progress: Callable[[str], None] | None = None,
    cache: dict[str, float] | None = None,
) -> list[Row]:
    """Simulate the flagship grid; returns one :class:`Row` per (servers, lost, size).

    Args:
        servers: server counts (8 GPUs and 8 NICs each).
        lost: numbers of NICs server 0 loses.
        sizes: message sizes in bytes.
        algorithms: generator names to simulate.
        workers: processes (default: CPU count, at most 4).
        progress: called with a one-line message as results come in.
        cache: simulated times by ``"algo/servers/lost/size"``, their latency parts by
            ``"algo/servers/lost/size/latency"`` and the schedules' byte floors by
            ``"algo/servers/lost/size/floor"``; a job with any of the three missing is
            simulated again and its entries added (so a long run can be resumed).
    """
    say = progress or (lambda _msg: None)
    jobs: list[Job] = []
    for size in sizes:
        for n in servers:
            jobs.append(("ring", n, 0, size))
            for k in lost:
                jobs += [(a, n, k, size) for a in algorithms]
    # biggest first, so the pool stays busy
    jobs.sort(key=lambda j: (-j[1], j[0] != "ring"))
    results: dict[Job, float] = {}
    latency: dict[Job, float] = {}
    floor: dict[Job, float] = {}
    memo = cache if cache is not None else {}

    def key_of(job: Job) -> str:
        return "/".join(map(str, job))

    for job in list(jobs):
        name = key_of(job)
        if all(name + part in memo for part in ("", "/latency", "/floor")):
            results[job] = memo[name]
            latency[job] = memo[name + "/latency"]
            floor[job] = memo[name + "/floor"]
            jobs.remove(job)
    nworkers = workers or min(4, os.cpu_count() or 1)
    say(f"{len(jobs)} simulations on {nworkers} process(es)")

    def record(i: int, key: Job, t: float, lat: float, low: float) -> None:
        results[key], latency[key], floor[key] = t, lat, low
        name = key_of(key)
        memo.update({name: t, name + "/latency": lat, name + "/floor": low})  # one write
        say(
            f"[{i + 1}/{len(jobs)}] {key[0]} n={key[1]} lost={key[2]}: {t * 1e3:.3f} ms "
            f"(latency part {lat * 1e3:.3f} ms)"
        )

    if nworkers <= 1:
        for i, job in enumerate(jobs):
            record(i, *_simulate(job))
    else:
        with ProcessPoolExecutor(max_workers=nworkers) as pool:
            # as each finishes (in order, a slow first job hid every later result)
            futures = [pool.submit(_simulate, job) for job in jobs]
            for i, fut in enumerate(as_completed(futures)):
                record(i, *fut.result())
    rows = []
    for size in sizes:
        for n in servers:
            for k in lost:
                lb, ring_formula, ffb, lat_lb = _bounds(n, k, size)
                rows.append(
                    Row(
                        servers=n,
                        nics_lost=k,
                        size_bytes=int(size),
                        beta=(NICS - k) / NICS,
                        bound_s=lb,
                        fault_free_ring_s=results[("ring", n, 0, size)],
                        fault_free_ring_formula_s=ring_formula,
                        fault_free_bound_s=ffb,
                        times_s={a: results[(a, n, k, size)] for a in algorithms},
                        latency_s={a: latency[(a, n, k, size)] for a in algorithms},
                        latency_bound_s=lat_lb,
                        floor_s={a: floor[(a, n, k, size)] for a in algorithms},
                    )
                )
    return rows


def _short(algo: str) -> str:
    return {"r2cc_allreduce": "r2cc"}.get(algo, algo)


def rows_to_markdown(rows: Sequence[Row]) -> str:
    """The table as Markdown: times in ms, then ratios to the ring, bound and ff bound."""
    if not rows:
        return ""
    algos = list(rows[0].times_s)
    head = ["servers", "NICs lost", "size", "bound ms", "ff ring ms"]
    head += [f"{_short(a)} ms" for a in algos]
    head += [f"{_short(a)}/ff ring" for a in algos]
    head += [f"{_short(a)}/bound" for a in algos]
    head += ["bound/ff bound", "optcc/ff bound"] if "optcc" in algos else ["bound/ff bound"]
    with_lat = "optcc" in algos and all(r.latency_bound_s for r in rows)
    if "optcc" in algos:
        head += ["optcc floor/bound", "optcc latency part ms", "optcc zero-latency/bound"]
    if with_lat:
        head += ["latency bound ms", "optcc/latency bound"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        size = f"{r.size_bytes / 2**20:g} MiB"
        cells = [
            str(r.servers),
            f"{r.nics_lost}/8",
            size,
            f"{r.bound_s * 1e3:.3f}",
            f"{r.fault_free_ring_s * 1e3:.3f}",
        ]
        cells += [f"{r.times_s[a] * 1e3:.3f}" for a in algos]
        cells += [f"{r.over_ring(a):.3f}" for a in algos]
        cells += [f"{r.over_bound(a):.3f}" for a in algos]
        cells.append(f"{r.bound_s / r.fault_free_bound_s:.3f}")
        if "optcc" in algos:
            cells.append(f"{r.over_ff_bound('optcc'):.3f}")
            cells.append(f"{r.floor_over_bound('optcc'):.3f}" if r.floor_s else "n/a")
            cells.append(f"{r.latency_s['optcc'] * 1e3:.3f}")
            cells.append(f"{r.zero_latency_over_bound('optcc'):.3f}")
        if with_lat and r.latency_bound_s:
            cells.append(f"{r.latency_bound_s * 1e3:.3f}")
            cells.append(f"{r.times_s['optcc'] / r.latency_bound_s:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_NAMES = {"balance": "Balance", "r2cc_allreduce": "R2CC-AllReduce", "optcc": "OptCC"}


def rows_to_headline(rows: Sequence[Row]) -> str:
    """A compact Markdown table: the bound, the fault-free ring, and OptCC against both.

    One line per row: the LP bound and the fault-free ring in ms, then Balance,
    R2CC-AllReduce and OptCC (those of them in the rows) as multiples of the fault-free
    ring, the best of them in bold, and OptCC over the bound.
    """
    algos = [a for a in _NAMES if rows and a in rows[0].times_s]
    if not algos:
        return ""
    head = ["cluster", "NICs lost", "size", "LP bound", "fault-free ring"]
    head += [f"{_NAMES[a]} / ff ring" for a in algos]
    head += ["OptCC / bound"] if "optcc" in algos else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        best = min(algos, key=r.over_ring)
        cells = [
            f"{r.servers} × {GPUS} GPUs",
            f"{r.nics_lost} of {NICS}",
            format_size(r.size_bytes),
            f"{r.bound_s * 1e3:.3f} ms",
            f"{r.fault_free_ring_s * 1e3:.3f} ms",
        ]
        for a in algos:
            cell = f"{r.over_ring(a):.3f}"
            cells.append(f"**{cell}**" if a == best else cell)
        if "optcc" in algos:
            cells.append(f"{r.over_bound('optcc'):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _plot(rows: Sequence[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algos = list(rows[0].times_s)
    sizes = sorted({r.size_bytes for r in rows})
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4.2), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=False):
        for n in sorted({r.servers for r in rows}):
            sel = sorted(
                (r for r in rows if r.servers == n and r.size_bytes == size),
                key=lambda r: r.nics_lost,
            )
            x = [100 * r.nics_lost / NICS for r in sel]
            for i, a in enumerate(algos):
                ax.plot(
                    x,
                    [100 * (r.over_ring(a) - 1) for r in sel],
                    marker="os^D"[i % 4],
                    label=f"{_short(a)} n={n}",
                    color=f"C{i}",
                    linestyle=["-", "--", ":"][sorted({r.servers for r in rows}).index(n) % 3],
                )
            ax.plot(
                x,
                [100 * (r.bound_s / r.fault_free_ring_s - 1) for r in sel],
                color="k",
                linestyle=["-", "--", ":"][sorted({r.servers for r in rows}).index(n) % 3],
                label=f"bound n={n}",
            )
        ax.set_xlabel("bandwidth lost by one server (%)")
        ax.set_ylabel("overhead vs fault-free ring (%)")
        ax.set_title(f"AllReduce {size / 2**20:g} MiB, 8 GPUs/server")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def write_report(
    rows: Sequence[Row], out: str | os.PathLike[str], *, suffix: str = "", headline: bool = True
) -> dict[str, Path]:
    """Write ``table.json``, ``table.md``, ``headline.md`` and ``overhead.png`` into ``out``.

    Returns the paths. With ``suffix`` the names get it before the extension
    (``table-n4.md``); without ``headline`` there is no ``headline.md``.
    """
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": d / f"table{suffix}.json",
        "markdown": d / f"table{suffix}.md",
        "plot": d / f"overhead{suffix}.png",
    }
    atomic_write_text(paths["json"], json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    atomic_write_text(paths["markdown"], rows_to_markdown(rows))
    if headline:
        paths["headline"] = d / f"headline{suffix}.md"
        atomic_write_text(paths["headline"], rows_to_headline(rows))
    if rows:
        _plot(rows, paths["plot"])
    return paths
