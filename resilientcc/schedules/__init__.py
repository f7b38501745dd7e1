"""Schedule IR, exact executor, generators and exporters (DESIGN.md §5)."""

from resilientcc.schedules.executor import (
    ExecutionResult,
    Violation,
    check,
    execute,
    topological_order,
)
from resilientcc.schedules.ir import (
    COPY,
    REDUCE,
    Chunk,
    Schedule,
    Transfer,
    chunks_from_sizes,
    renumber,
    uniform_chunks,
)
from resilientcc.schedules.serialize import (
    load_schedule,
    save_schedule,
    schedule_from_dict,
    schedule_to_dict,
)

__all__ = [
    "COPY",
    "REDUCE",
    "Chunk",
    "ExecutionResult",
    "Schedule",
    "Transfer",
    "Violation",
    "check",
    "chunks_from_sizes",
    "execute",
    "load_schedule",
    "renumber",
    "save_schedule",
    "schedule_from_dict",
    "schedule_to_dict",
    "topological_order",
    "uniform_chunks",
]
