"""One rank of a torch.distributed job started by a launcher (``rcc run --distributed``).

Where :func:`~resilientcc.runtime.launch.run_schedule` starts every rank itself, here a
launcher has started them: ``torchrun`` on one machine or several, one process per rank,
each with ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` in its
environment. Every process runs the same command; :func:`run_distributed` joins the
default group (gloo, ``init_method="env://"``), runs its rank over a
:class:`~resilientcc.runtime.transport.GlooTransport` on it, checks its own buffer
against the exact sum (every rank can compute every input from the seed), and gathers
every rank's counts and error, so each process returns the same
:class:`~resilientcc.runtime.launch.RunResult`.

Example (four processes on this machine; on two machines, ``--nnodes 2`` and a
rendezvous endpoint that both reach)::

    torchrun --standalone --nproc-per-node 4 -m resilientcc run ring -n 2 -g 2 \\
        --distributed --fail-nic 1:0:1:silent --ack-timeout 2
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict

import numpy as np

from resilientcc.errors import InputError
from resilientcc.runtime.engine import ChannelFailure, RankStats
from resilientcc.runtime.launch import RunResult, check_run, summarize
from resilientcc.runtime.processes import make_inputs, run_in_default_group
from resilientcc.runtime.transport import gloo_available
from resilientcc.schedules.ir import Schedule

__all__ = ["launched_rank", "run_distributed"]

#: what a launcher sets for every process it starts
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def launched_rank(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(RANK, WORLD_SIZE)`` of this process, as its launcher set them in ``env``
    (``os.environ`` by default).

    Raises:
        InputError: a variable is missing or not a rank of the world.

    >>> launched_rank({"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1"})
    (1, 4)
    """
    env = os.environ if env is None else env
    missing = [v for v in LAUNCH_VARIABLES if v not in env]
    if missing:
        raise InputError(
            f"--distributed: {', '.join(missing)} not set: start every rank with a launcher, "
            "e.g. torchrun --nproc-per-node N -m resilientcc run ... --distributed"
        )
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    except ValueError:
        raise InputError("--distributed: RANK and WORLD_SIZE must be whole numbers") from None
    if not 0 <= rank < world:
        raise InputError(f"--distributed: RANK {rank} is not a rank of WORLD_SIZE {world}")
    return rank, world


def run_distributed(
    schedule: Schedule,
    *,
    elements: int = 4096,
    failures: Sequence[ChannelFailure] = (),
    dedup: bool = True,
    seed: int = 0,
    idle_timeout_s: float = 60.0,
    ack_timeout_s: float = 10.0,
    trace: bool = False,
) -> tuple[int, RunResult]:
    """Run this process's rank of ``schedule``; ``(its rank, the whole run's result)``.

    Every rank must call it with the same arguments. ``wall_s`` is the longest rank's
    time from a barrier after joining the group to the end of its run.

    Raises:
        InputError: bad arguments (:func:`~resilientcc.runtime.launch.check_run`), no
            launcher variables, a world size other than the schedule's ranks, or no
            torch with gloo.
        RunError: this rank made no progress for ``idle_timeout_s`` or lost every
            channel.
    """
    plans = check_run(schedule, elements, failures, ack_timeout_s)
    rank, world = launched_rank()
    if world != schedule.ranks:
        raise InputError(
            f"--distributed: the launcher started {world} processes, the schedule has "
            f"{schedule.ranks} ranks"
        )
    if not gloo_available():
        raise InputError("--distributed needs torch with gloo: pip install 'resilientcc[runtime]'")
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method="env://",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=max(idle_timeout_s, 30.0)),
    )
    try:
        inputs = make_inputs(world, elements, seed)
        buffer = inputs[rank].copy()
        dist.barrier()
        t0 = time.perf_counter()
        stats = run_in_default_group(
            schedule,
            plans[rank],
            buffer,
            failures=failures,
            dedup=dedup,
            idle_timeout_s=idle_timeout_s,
            ack_timeout_s=ack_timeout_s,
            trace=trace,
        )
        wall = time.perf_counter() - t0
        error = float(np.abs(buffer - inputs.sum(axis=0)).max())
        gathered: list[tuple[dict[str, object], float, float] | None] = [None] * world
        dist.all_gather_object(gathered, (asdict(stats), error, wall))
    finally:
        dist.destroy_process_group()
    parts = [g for g in gathered if g is not None]
    return rank, summarize(
        schedule,
        [RankStats.from_dict(d) for d, _, _ in parts],
        errors=[e for _, e, _ in parts],
        backend="gloo",
        elements=elements,
        wall_s=max(w for _, _, w in parts),
        dedup=dedup,
        processes=True,
        ack_timeout_s=ack_timeout_s,
        distributed=True,
    )
