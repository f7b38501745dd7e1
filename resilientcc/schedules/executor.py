"""The exact symbolic executor: runs a Schedule on multiplicity vectors.

Every (rank, chunk) buffer is a vector ``m`` of integers, ``m[c]`` being how many
times contribution ``c`` is summed into it. Initially ``m = e_r`` on rank ``r``.
A reduce adds the source vector into the destination, a copy overwrites it. The
run follows one topological order of ``deps`` (smallest ready id first); for a
race-free schedule every order allowed by ``deps`` gives the same result
(DESIGN.md §6), which :mod:`resilientcc.verify` proves separately.

Counting multiplicities, not sets, catches double-counted reductions.

A buffer's vector is shared, not copied, by a copy (vectors are never changed in place:
a reduce makes a new one), and a buffer no transfer has written is kept as its rank
number until it is read, so copies cost nothing and only reduces touch ``p`` entries.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from resilientcc.errors import ScheduleError
from resilientcc.schedules import executor_compiled
from resilientcc.schedules.ir import COPY, Schedule, Transfer

__all__ = [
    "COMPILED_MIN_PAIRS",
    "ExecutionResult",
    "Violation",
    "check",
    "execute",
    "topological_order",
]

#: ``execute(engine="auto")`` runs the compiled loop from this many (transfer, chunk) pairs
COMPILED_MIN_PAIRS = 20_000


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
    ts = schedule.transfers
    if all(t.id > max(t.deps, default=-1) for t in ts):
        # every transfer depends only on smaller ids (as the generators number them): the
        # smallest ready id is then always the smallest id not yet taken
        return tuple(sorted(t.id for t in ts))
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


def execute(
    schedule: Schedule, max_violations: int = 20, *, engine: str = "auto"
) -> ExecutionResult:
    """Run ``schedule`` exactly and compare with the AllReduce postcondition.

    ``engine``: ``"python"``, ``"compiled"`` (the same loop compiled with numba,
    :mod:`resilientcc.schedules.executor_compiled`) or ``"auto"`` (compiled from
    :data:`COMPILED_MIN_PAIRS` chunk deliveries when numba can be imported). All give
    the same result.

    Examples:
        >>> from fractions import Fraction
        >>> from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
        >>> ts = (Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "copy", deps=(0,)))
        >>> execute(Schedule("pair", 2, Fraction(8), uniform_chunks(1), ts)).ok
        True
    """
    schedule.check_structure()
    if engine not in ("auto", "python", "compiled"):
        raise ValueError(f"engine: auto, python or compiled, got {engine!r}")
    order = topological_order(schedule)
    p = schedule.ranks
    by_id = schedule.by_id
    ts = [by_id[i] for i in order]
    pairs = sum(t.count for t in ts)
    if engine == "compiled" or (
        engine == "auto" and pairs >= COMPILED_MIN_PAIRS and executor_compiled.available()
    ):
        return _execute_compiled(schedule, order, ts, max_violations)
    by_chunk: dict[int, list[tuple[int, int, bool]]] = {}
    for t in ts:
        for c in t.chunk_ids:
            by_chunk.setdefault(c, []).append((t.src, t.dst, t.op == COPY))
    violations: list[Violation] = []
    count = 0
    for c in range(len(schedule.chunks)):
        # rank r's vector: an int u for the unit vector e_u (untouched), else an array;
        # arrays are never changed in place, so a copy shares its source's
        rows: list[int | np.ndarray] = list(range(p))
        for src, dst, is_copy in by_chunk.get(c, ()):
            if is_copy:
                rows[dst] = rows[src]
            else:
                rows[dst] = _vector(rows[dst], p) + _vector(rows[src], p)
        bad_of: dict[int, np.ndarray] = {}  # id of a shared array -> its wrong entries
        for r, row in enumerate(rows):
            bad: np.ndarray
            values: np.ndarray | None = None
            if isinstance(row, int):
                if p == 1:
                    continue
                bad = np.delete(np.arange(p), row)  # every other contribution is missing
            else:
                known = bad_of.get(id(row))
                if known is None:
                    known = bad_of[id(row)] = np.flatnonzero(row != 1)
                bad = known
                values = row
            count += len(bad)
            for k in bad[: max(0, max_violations - len(violations))].tolist():
                mult = 0 if values is None else int(values[k])
                violations.append(Violation(r, c, k, mult))
    return ExecutionResult(count == 0, order, tuple(violations), count)


def _execute_compiled(
    schedule: Schedule, order: tuple[int, ...], ts: list[Transfer], max_violations: int
) -> ExecutionResult:
    n = len(ts)
    count, bad = executor_compiled.run_chunks(
        schedule.ranks,
        len(schedule.chunks),
        np.fromiter((t.chunk for t in ts), np.int64, n),
        np.fromiter((t.count for t in ts), np.int64, n),
        np.fromiter((t.src for t in ts), np.int64, n),
        np.fromiter((t.dst for t in ts), np.int64, n),
        np.fromiter((t.op == COPY for t in ts), np.bool_, n),
        max_violations,
    )
    violations = tuple(Violation(*row) for row in bad.tolist())
    return ExecutionResult(count == 0, order, violations, count)


def _vector(row: int | np.ndarray, p: int) -> np.ndarray:
    """The multiplicity vector of ``row`` (an int ``u`` stands for ``e_u``)."""
    if isinstance(row, int):
        v = np.zeros(p, dtype=np.int64)
        v[row] = 1
        return v
    return row


def check(schedule: Schedule) -> Schedule:
    """Return ``schedule`` if the executor finds it exact, else raise ScheduleError."""
    res = execute(schedule)
    if not res.ok:
        raise ScheduleError(f"schedule {schedule.name!r} is not a correct AllReduce: {res}")
    return schedule
