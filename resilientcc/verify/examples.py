"""Small reference schedules for the verifier's tests, docs and benchmarks.

They do not depend on the production generators (which live in
:mod:`resilientcc.schedules`): a textbook ring AllReduce and a reduce-then-broadcast
chain, both built directly in the IR.
"""

from __future__ import annotations

from fractions import Fraction

from resilientcc.schedules.ir import COPY, REDUCE, Schedule, Transfer, uniform_chunks

__all__ = ["chain_allreduce", "ring_allreduce"]


def ring_allreduce(p: int, channels: int = 1, size: Fraction = Fraction(1 << 20)) -> Schedule:
    """Ring AllReduce on ``p`` ranks: ``p-1`` reduce-scatter steps then ``p-1`` all-gather steps.

    Chunk ``c`` travels on channel ``c % channels``.

    >>> from resilientcc.schedules.executor import execute
    >>> execute(ring_allreduce(4)).ok
    True
    """
    ts: list[Transfer] = []
    last: dict[tuple[int, int], int] = {}  # (rank, chunk) -> id of the transfer that wrote it
    for phase, op in ((0, REDUCE), (1, COPY)):
        for s in range(p - 1):
            for r in range(p):
                c = (r - s + phase) % p
                dst = (r + 1) % p
                deps = (last[(r, c)],) if (r, c) in last else ()
                tid = len(ts)
                ts.append(Transfer(tid, r, dst, c, op, deps, c % channels))
                last[(dst, c)] = tid
    return Schedule(f"ring{p}", p, Fraction(size), uniform_chunks(p), tuple(ts))


def chain_allreduce(p: int, size: Fraction = Fraction(1 << 20)) -> Schedule:
    """One chunk reduced along ``0 → 1 → … → p-1`` then copied back ``p-1 → … → 0``.

    >>> from resilientcc.schedules.executor import execute
    >>> execute(chain_allreduce(3)).ok
    True
    """
    ts: list[Transfer] = []
    for r in range(p - 1):
        ts.append(Transfer(len(ts), r, r + 1, 0, REDUCE, (len(ts) - 1,) if ts else ()))
    for r in range(p - 1, 0, -1):
        ts.append(Transfer(len(ts), r, r - 1, 0, COPY, (len(ts) - 1,) if ts else ()))
    return Schedule(f"chain{p}", p, Fraction(size), uniform_chunks(1), tuple(ts))
