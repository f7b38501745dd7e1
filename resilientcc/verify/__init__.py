"""Z3 verification of schedules: lossless, race-free, deadlock-free, failover-lossless.

>>> from resilientcc.verify import verify
>>> from resilientcc.verify.examples import ring_allreduce
>>> verify(ring_allreduce(3)).verdict
'proved'

See ``docs/verification.md`` for the formulas and their encodings.
"""

from __future__ import annotations

from resilientcc.verify.api import DEFAULT_PROPERTIES, verify
from resilientcc.verify.bandwidth import check_bandwidth
from resilientcc.verify.deadlock import check_deadlock_free
from resilientcc.verify.failover import check_failover_lossless
from resilientcc.verify.lossless import check_lossless
from resilientcc.verify.races import check_race_free, race_pairs_graph
from resilientcc.verify.result import (
    PROPERTIES,
    PROVED,
    UNKNOWN,
    VERDICTS,
    VIOLATED,
    Counterexample,
    FailurePoint,
    PropertyResult,
    VerificationReport,
)

__all__ = [
    "DEFAULT_PROPERTIES",
    "PROPERTIES",
    "PROVED",
    "UNKNOWN",
    "VERDICTS",
    "VIOLATED",
    "Counterexample",
    "FailurePoint",
    "PropertyResult",
    "VerificationReport",
    "check_bandwidth",
    "check_deadlock_free",
    "check_failover_lossless",
    "check_lossless",
    "check_race_free",
    "race_pairs_graph",
    "verify",
]
