"""The exact symbolic executor: runs a Schedule on multiplicity vectors.

Every (rank, chunk) buffer is a vector ``m`` of integers, ``m[c]`` being how many
times contribution ``c`` is summed into it. Initially ``m = e_r`` on rank ``r``.
A reduce adds the source vector into the destination, a copy overwrites it. The
run follows one topological order of ``deps`` (smallest ready id first); for a
race-free schedule every order allowed by ``deps`` gives the same result
(DESIGN.md §6), which :mod:`resilientcc.verify` proves separately.

Counting multiplicities, not sets, catches double-counted reductions.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from resilientcc.errors import ScheduleError
from resilientcc.schedules.ir import COPY, Schedule

__all__ = ["ExecutionResult", "Violation", "check", "execute", "topological_order"]


@dataclass(frozen=True)
class Violation:
    """A wrong final multiplicity: ``rank`` holds ``contribution`` ``multiplicity`` times."""

    rank: int
    chunk: int
    contribution: int
    multiplicity: int

    def __str__(self) -> str:
        return (
            f"rank {self.rank}, chunk {self.chunk}: contribution of rank {self.contribution} "
            f"counted {self.multiplicity} times (expected 1)"
        )


@dataclass(frozen=True)
class ExecutionResult:
    """Outcome of :func:`execute`."""

    ok: bool
    order: tuple[int, ...]
    violations: tuple[Violation, ...] = field(default_factory=tuple)
    num_violations: int = 0

    def __str__(self) -> str:
        if self.ok:
            return "exact: every rank holds every contribution exactly once"
        head = "; ".join(str(v) for v in self.violations[:3])
        return f"{self.num_violations} wrong multiplicities, e.g. {head}"


def topological_order(schedule: Schedule) -> tuple[int, ...]:
    """Ids in a topological order of ``deps`` (smallest ready id first).

    Raises:
        ScheduleError: the dependencies contain a cycle (naming transfers on it).
    """
    indeg: dict[int, int] = {}
    users: dict[int, list[int]] = {}
    for t in schedule.transfers:
        indeg[t.id] = len(set(t.deps))
        for d in set(t.deps):
            users.setdefault(d, []).append(t.id)
    ready = [i for i, k in indeg.items() if k == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users.get(i, ()):
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(indeg):
        stuck = sorted(i for i, k in indeg.items() if k > 0)[:5]
        raise ScheduleError(
            f"schedule {schedule.name!r}: dependency cycle among transfers {stuck}..."
        )
    return tuple(order)


def execute(schedule: Schedule, max_violations: int = 20) -> ExecutionResult:
    """Run ``schedule`` exactly and compare with the AllReduce postcondition.

    Examples:
        >>> from fractions import Fraction
        >>> from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
        >>> ts = (Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "copy", deps=(0,)))
        >>> execute(Schedule("pair", 2, Fraction(8), uniform_chunks(1), ts)).ok
        True
    """
    schedule.check_structure()
    order = topological_order(schedule)
    p = schedule.ranks
    by_chunk: dict[int, list[tuple[int, int, bool]]] = {}
    by_id = schedule.by_id
    for i in order:
        t = by_id[i]
        for c in t.chunk_ids:
            by_chunk.setdefault(c, []).append((t.src, t.dst, t.op == COPY))
    violations: list[Violation] = []
    count = 0
    ones = np.ones(p, dtype=np.int64)
    for c in range(len(schedule.chunks)):
        state = np.eye(p, dtype=np.int64)
        for src, dst, is_copy in by_chunk.get(c, ()):
            if is_copy:
                state[dst] = state[src]
            else:
                state[dst] += state[src]
        bad = np.argwhere(state != ones[None, :])
        count += len(bad)
        for r, k in bad[: max(0, max_violations - len(violations))]:
            violations.append(Violation(int(r), c, int(k), int(state[r, k])))
    return ExecutionResult(count == 0, order, tuple(violations), count)


def check(schedule: Schedule) -> Schedule:
    """Return ``schedule`` if the executor finds it exact, else raise ScheduleError."""
    res = execute(schedule)
    if not res.ok:
        raise ScheduleError(f"schedule {schedule.name!r} is not a correct AllReduce: {res}")
    return schedule
