"""Lower bounds on AllReduce time: closed forms (sympy) and LP with cut generation.

Public API::

    lower_bound(topology, size, method="auto") -> BoundResult
    fault_free_ring_time(topology, size) -> Fraction
    fault_free_lower_bound(topology, size) -> BoundResult
    latency_lower_bound(topology, size, base_latency=8.4e-6) -> LatencyBound

``resilientcc.bounds.closed_form`` (sympy derivations) and ``resilientcc.bounds.lp``
(cvxpy/HiGHS cut generation) are imported lazily by these functions where heavy.
"""

from resilientcc.bounds.api import (
    METHODS,
    fault_free_lower_bound,
    fault_free_ring_time,
    fault_free_topology,
    lower_bound,
    reference_bandwidth,
    server_level_bandwidths,
    switch_model_bandwidths,
)
from resilientcc.bounds.latency import LatencyBound, latency_lower_bound
from resilientcc.bounds.result import BoundConstraint, BoundResult

__all__ = [
    "METHODS",
    "BoundConstraint",
    "BoundResult",
    "LatencyBound",
    "fault_free_lower_bound",
    "fault_free_ring_time",
    "fault_free_topology",
    "latency_lower_bound",
    "lower_bound",
    "reference_bandwidth",
    "server_level_bandwidths",
    "switch_model_bandwidths",
]
