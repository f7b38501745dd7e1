"""The exception hierarchy of resilientcc.

Every error the library raises on purpose derives from :class:`ResilientCCError`.
The CLI turns any of them into a one-line message and exit code 2 (bad input),
so subclasses should carry messages that say *what* is wrong and *where*.
"""

from __future__ import annotations

__all__ = [
    "BoundError",
    "ExportError",
    "InputError",
    "ResilientCCError",
    "ScheduleError",
    "SimulationError",
    "TooFineError",
    "TopologyError",
    "VerificationError",
]


class ResilientCCError(Exception):
    """Root of every error raised by resilientcc."""


class InputError(ResilientCCError, ValueError):
    """Malformed user input: a size, a bandwidth, an option value, a file."""


class TopologyError(InputError):
    """A topology that is malformed or unusable (dangling link, cut-off GPU, bad capacity)."""


class ScheduleError(InputError):
    """A schedule that is malformed or does not fit its topology."""


class BoundError(ResilientCCError):
    """A lower-bound computation failed (e.g. the LP solver did not converge)."""


class SimulationError(ResilientCCError):
    """The simulator could not run a schedule (e.g. no route for a transfer)."""


class VerificationError(ResilientCCError):
    """The verifier could not be run on its input."""


class ExportError(ResilientCCError):
    """A schedule cannot be exported in the requested format (e.g. MSCCL limits)."""


class TooFineError(ExportError):
    """A schedule cut too fine for the MSCCL executor: a threadblock with more steps, or
    more equal chunks per loop, than it runs (fewer pieces may fit:
    :func:`~resilientcc.schedules.msccl.fit_msccl`).

    Attributes:
        excess: how many times the limit the schedule needs (its busiest threadblock's
            steps over the executor's), where known; ``None`` otherwise.
    """

    def __init__(self, message: str, excess: float | None = None) -> None:
        super().__init__(message)
        self.excess = excess
