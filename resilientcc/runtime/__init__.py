"""Run schedules on real buffers: every rank a thread, messages over queues or gloo.

:func:`run_schedule` executes a :class:`~resilientcc.schedules.ir.Schedule` with the
IR's semantics (deps, FIFO connections; :mod:`resilientcc.runtime.plan`), injects NIC
channel failures (announced by a send error, or silent and found by an acknowledgement
timeout), migrates their transfers losslessly (:mod:`resilientcc.runtime.engine`), and
checks every rank's result against the exact sum. Ranks are threads, processes it
starts (:mod:`resilientcc.runtime.processes`), or processes a launcher such as torchrun
started (:mod:`resilientcc.runtime.distributed`). Transports (:mod:`resilientcc.runtime.transport`): ``local`` (in-process queues, no
dependency) and ``gloo`` (torch.distributed on the CPU, ``pip install
'resilientcc[runtime]'``; torch is imported only then).
"""

from resilientcc.runtime.distributed import launched_rank, run_distributed
from resilientcc.runtime.engine import (
    EVENT_KINDS,
    OUTCOMES,
    ChannelFailure,
    RankStats,
    RunAborted,
    RunError,
    RunEvent,
    run_rank,
)
from resilientcc.runtime.launch import RunResult, nic_failures, run_schedule
from resilientcc.runtime.plan import RankPlan, chunk_slices, issue_order, rank_plans
from resilientcc.runtime.trace import write_run_trace
from resilientcc.runtime.transport import BACKENDS, gloo_available, make_transports

__all__ = [
    "BACKENDS",
    "EVENT_KINDS",
    "OUTCOMES",
    "ChannelFailure",
    "RankPlan",
    "RankStats",
    "RunAborted",
    "RunError",
    "RunEvent",
    "RunResult",
    "chunk_slices",
    "gloo_available",
    "issue_order",
    "launched_rank",
    "make_transports",
    "nic_failures",
    "rank_plans",
    "run_distributed",
    "run_rank",
    "run_schedule",
    "write_run_trace",
]
