"""``verify``: run the property checks on a schedule and combine their verdicts."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from resilientcc._gc import gc_paused
from resilientcc.errors import VerificationError
from resilientcc.schedules.ir import Schedule
from resilientcc.verify.deadlock import check_deadlock_free
from resilientcc.verify.encode import Deadline, ScheduleGraph
from resilientcc.verify.failover import check_failover_lossless
from resilientcc.verify.lossless import check_lossless
from resilientcc.verify.races import check_race_free
from resilientcc.verify.result import (
    PROPERTIES,
    PROVED,
    UNKNOWN,
    VIOLATED,
    PropertyResult,
    VerificationReport,
)

__all__ = ["DEFAULT_PROPERTIES", "verify"]

#: What :func:`verify` checks unless told otherwise (``failover=True`` adds failover_lossless).
DEFAULT_PROPERTIES = ("lossless", "race_free", "deadlock_free")


@gc_paused
def verify(
    schedule: Schedule,
    *,
    properties: Sequence[str] = DEFAULT_PROPERTIES,
    failover: bool = False,
    failures: int = 1,
    dedup: bool = True,
    gpus_per_server: int | None = None,
    timeout_s: float | None = None,
    progress: Callable[[str, PropertyResult | None], None] | None = None,
) -> VerificationReport:
    """Prove the properties of DESIGN.md §6 for ``schedule`` or return a counterexample.

    Properties are checked in the order deadlock_free, race_free, lossless,
    failover_lossless (each needs the previous ones to be meaningful); checking
    stops at the first violation. ``timeout_s`` is one budget for all of them.

    Args:
        schedule: the schedule (its structure is checked first).
        properties: any of ``lossless``, ``race_free``, ``deadlock_free``,
            ``failover_lossless``.
        failover: also check failover-lossless.
        failures: 1 or 2 failed channels (failover).
        dedup: the receiver commits a transfer at most once (failover).
        gpus_per_server: fail channels per server rather than everywhere (failover).
        timeout_s: solver budget in seconds; when spent the verdict is ``unknown``.
        progress: called with ``(property, None)`` before each check and with
            ``(property, result)`` after it (for progress on large schedules).

    Returns:
        A :class:`~resilientcc.verify.result.VerificationReport`.

    Raises:
        VerificationError: an unknown property or a bad ``failures`` value.
        ScheduleError: a malformed schedule.

    Examples:
        >>> from resilientcc.verify.examples import ring_allreduce
        >>> verify(ring_allreduce(4), failover=True).verdict
        'proved'
    """
    t0 = time.perf_counter()
    props = set(properties)
    if failover:
        props.add("failover_lossless")
    unknown = props - set(PROPERTIES)
    if unknown:
        raise VerificationError(
            f"unknown propert{'ies' if len(unknown) > 1 else 'y'} {', '.join(sorted(unknown))} "
            f"(known: {', '.join(PROPERTIES)})"
        )
    if failures not in (1, 2):
        raise VerificationError(f"failures must be 1 or 2, got {failures}")
    schedule.check_structure()
    graph = ScheduleGraph(schedule)
    deadline = Deadline(timeout_s)
    results: list[PropertyResult] = []
    for prop in PROPERTIES:
        if prop not in props:
            continue
        # what is left of the one budget (≤ 0 once spent: the check then reports unknown)
        left = None if timeout_s is None else timeout_s - deadline.elapsed()
        if progress is not None:
            progress(prop, None)
        if prop == "deadlock_free":
            r = check_deadlock_free(schedule, timeout_s=left, graph=graph)
        elif prop == "race_free":
            r = check_race_free(schedule, timeout_s=left, graph=graph)
        elif prop == "lossless":
            r = check_lossless(schedule, timeout_s=left, graph=graph)
        else:
            r = check_failover_lossless(
                schedule,
                failures=failures,
                dedup=dedup,
                gpus_per_server=gpus_per_server,
                timeout_s=left,
                graph=graph,
            )
        results.append(r)
        if progress is not None:
            progress(prop, r)
        if r.verdict == VIOLATED:
            break
    secs = time.perf_counter() - t0
    bad = next((r for r in results if r.verdict == VIOLATED), None)
    if bad is not None:
        return VerificationReport(
            VIOLATED, bad.property, bad.counterexample, secs, tuple(results), schedule.name
        )
    undecided = next((r for r in results if r.verdict == UNKNOWN), None)
    if undecided is not None:
        return VerificationReport(
            UNKNOWN, undecided.property, None, secs, tuple(results), schedule.name
        )
    return VerificationReport(PROVED, "all", None, secs, tuple(results), schedule.name)
