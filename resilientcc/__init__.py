"""resilientcc: collective communication under network failures.

Lower bounds (:mod:`resilientcc.bounds`), schedule synthesis
(:mod:`resilientcc.schedules`), verification (:mod:`resilientcc.verify`) and
flow-level simulation (:mod:`resilientcc.sim`) for AllReduce on topologies with
failed or degraded NICs.
"""

from resilientcc.errors import (
    BoundError,
    ExportError,
    InputError,
    ResilientCCError,
    ScheduleError,
    SimulationError,
    TopologyError,
    VerificationError,
)

__version__ = "0.1.0"

__all__ = [
    "BoundError",
    "ExportError",
    "InputError",
    "ResilientCCError",
    "ScheduleError",
    "SimulationError",
    "TopologyError",
    "VerificationError",
    "__version__",
]
