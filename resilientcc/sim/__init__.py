"""Flow-level simulator of schedules on topologies with failures.

:func:`simulate` runs a :class:`~resilientcc.schedules.ir.Schedule` on a
:class:`~resilientcc.topology.model.Topology`: transfers become flows that share links
max-min fairly, connections are FIFO, and each transfer completes one route latency
after its last byte leaves. It returns a :class:`SimResult` (time, latency part,
per-link bytes and utilisation, per-transfer timeline). :func:`plot` draws it.
:func:`write_trace` writes its timeline as CSV or a Chrome trace.
:func:`byte_floor` (and :func:`link_loads`) give a schedule's busiest-link time without
running it; :meth:`SimResult.floor_window` splits a run's time around that link.
See ``docs/simulator.md``.
"""

from resilientcc.sim.flow import (
    DEFAULT_BASE_LATENCY,
    LATENCY_MODES,
    byte_floor,
    link_loads,
    maxmin_rates,
    simulate,
)
from resilientcc.sim.plot import plot, plot_gantt
from resilientcc.sim.result import FloorWindow, SimResult
from resilientcc.sim.routing import Router
from resilientcc.sim.trace import write_trace

__all__ = [
    "DEFAULT_BASE_LATENCY",
    "LATENCY_MODES",
    "FloorWindow",
    "Router",
    "SimResult",
    "byte_floor",
    "link_loads",
    "maxmin_rates",
    "plot",
    "plot_gantt",
    "simulate",
    "write_trace",
]
