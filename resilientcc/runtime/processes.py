"""Every rank a process of its own, joined by ``torch.distributed.init_process_group("gloo")``.

What a torch.distributed job does: :func:`run_processes` writes the schedule to a
temporary folder, starts one process per rank (``spawn``), and each process joins the
default process group through a rendezvous file, builds its input from the seed (the same
whole numbers as the threaded run), runs :func:`~resilientcc.runtime.engine.run_rank`
over a :class:`~resilientcc.runtime.transport.GlooTransport` on the default group, and
writes its final buffer and counts back to the folder, where the parent checks them
(:func:`~resilientcc.runtime.launch.run_schedule` with ``processes=True``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from resilientcc.errors import InputError
from resilientcc.runtime.engine import (
    ChannelFailure,
    RankStats,
    RunAborted,
    RunError,
    run_rank,
)
from resilientcc.runtime.plan import RankPlan, chunk_slices, rank_plans
from resilientcc.runtime.transport import gloo_available
from resilientcc.schedules.ir import Schedule
from resilientcc.schedules.serialize import load_schedule, save_schedule

__all__ = ["make_inputs", "run_in_default_group", "run_processes"]

#: inputs are whole numbers in [-VALUE_RANGE, VALUE_RANGE]
VALUE_RANGE = 1000


def make_inputs(ranks: int, elements: int, seed: int) -> np.ndarray:
    """Every rank's input (one row each): whole numbers from ``seed``, as float64."""
    rng = np.random.default_rng(seed)
    return rng.integers(-VALUE_RANGE, VALUE_RANGE + 1, size=(ranks, elements)).astype(np.float64)


def run_in_default_group(
    schedule: Schedule,
    plan: RankPlan,
    buffer: np.ndarray,
    *,
    failures: Sequence[ChannelFailure],
    dedup: bool,
    idle_timeout_s: float,
    ack_timeout_s: float,
    trace: bool = False,
) -> RankStats:
    """Run ``plan`` (its rank of ``schedule``) on ``buffer``, in place, over
    torch.distributed's default (gloo) group, which this process has joined."""
    import torch.distributed as dist

    from resilientcc.runtime.transport import GlooTransport

    group = dist.distributed_c10d._get_default_group()
    transport = GlooTransport(plan.rank, schedule.ranks, group)
    stats = run_rank(
        schedule,
        plan,
        transport,
        buffer,
        chunk_slices(schedule, buffer.size),
        failures=[f for f in failures if f.rank == plan.rank],
        dedup=dedup,
        idle_timeout_s=idle_timeout_s,
        ack_timeout_s=ack_timeout_s,
        trace=trace,
    )
    transport.close()
    return stats


def _rank_main(
    rank: int,
    folder: str,
    elements: int,
    seed: int,
    failures: Sequence[ChannelFailure],
    dedup: bool,
    idle_timeout_s: float,
    ack_timeout_s: float,
    trace: bool,
) -> None:
    """One process: join the group, run its rank, write ``rank{r}.npy`` and ``.json``."""
    out = Path(folder)
    try:
        import datetime

        import torch.distributed as dist

        schedule = load_schedule(out / "schedule.json")
        dist.init_process_group(
            "gloo",
            init_method=f"file://{out / 'rendezvous'}",
            rank=rank,
            world_size=schedule.ranks,
            timeout=datetime.timedelta(seconds=max(idle_timeout_s, 30.0)),
        )
        try:
            buffer = make_inputs(schedule.ranks, elements, seed)[rank].copy()
            stats = run_in_default_group(
                schedule,
                rank_plans(schedule)[rank],
                buffer,
                failures=failures,
                dedup=dedup,
                idle_timeout_s=idle_timeout_s,
                ack_timeout_s=ack_timeout_s,
                trace=trace,
            )
        finally:
            dist.destroy_process_group()
        np.save(out / f"rank{rank}.npy", buffer)
        (out / f"rank{rank}.json").write_text(json.dumps(asdict(stats)), encoding="utf-8")
    except BaseException as exc:
        if isinstance(exc, RunAborted):
            kind = "aborted"
        elif isinstance(exc, RunError):
            kind = "run"
        else:
            kind = "crash"
        detail = traceback.format_exc(limit=3) if kind == "crash" else str(exc)
        (out / f"rank{rank}.error").write_text(f"{kind}\n{detail}", encoding="utf-8")
        # gloo's receiving thread may still block in C++: leave without tearing it down
        # (an interpreter exit would abort the process with "terminate called ...")
        os._exit(1)


def run_processes(
    schedule: Schedule,
    *,
    elements: int,
    failures: Sequence[ChannelFailure],
    dedup: bool,
    seed: int,
    idle_timeout_s: float,
    ack_timeout_s: float = 10.0,
    trace: bool = False,
) -> tuple[np.ndarray, list[RankStats], float]:
    """Run every rank in a process of its own over gloo; ``(buffers, stats, wall_s)``.

    Raises:
        InputError: torch (with gloo) is not installed.
        RunError: a rank failed or did not finish (its message, the first one).
    """
    if not gloo_available():
        raise InputError("processes need torch with gloo: pip install 'resilientcc[runtime]'")
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="rcc-run-") as folder:
        out = Path(folder)
        save_schedule(schedule, out / "schedule.json")
        t0 = time.perf_counter()
        procs = [
            ctx.Process(
                target=_rank_main,
                args=(
                    r,
                    folder,
                    elements,
                    seed,
                    list(failures),
                    dedup,
                    idle_timeout_s,
                    ack_timeout_s,
                    trace,
                ),
                daemon=True,
            )
            for r in range(schedule.ranks)
        ]
        for p in procs:
            p.start()
        deadline = time.monotonic() + idle_timeout_s + 120.0
        for p in procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        wall = time.perf_counter() - t0
        for p in procs:
            if p.is_alive():
                p.terminate()
        errors = sorted(out.glob("rank*.error"), key=lambda p: int(p.stem[4:]))
        if errors:
            found = [
                (p.stem[4:], *p.read_text(encoding="utf-8").partition("\n")[::2]) for p in errors
            ]
            # the rank that could not go on, before those whose connections to it broke
            # when it left, and those it stopped
            order = ("run", "crash", "aborted")
            rank, kind, detail = min(found, key=lambda f: order.index(f[1]))
            raise RunError(
                detail.strip() if kind != "crash" else f"rank {rank} failed: {detail.strip()}"
            )
        missing = [r for r in range(schedule.ranks) if not (out / f"rank{r}.npy").exists()]
        if missing:
            raise RunError(
                f"ranks {missing[:8]} did not finish (exit codes {[procs[r].exitcode for r in missing[:8]]})"
            )
        buffers = np.stack([np.load(out / f"rank{r}.npy") for r in range(schedule.ranks)])
        stats = [
            RankStats.from_dict(json.loads((out / f"rank{r}.json").read_text(encoding="utf-8")))
            for r in range(schedule.ranks)
        ]
    return buffers, stats, wall
