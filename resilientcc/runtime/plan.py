"""What each rank of a schedule does at run time: its sends, its receives, whom it tells.

The runtime (:mod:`resilientcc.runtime.engine`) follows the IR's semantics
(DESIGN.md §5) and the matching rules the deadlock check assumes
(:mod:`resilientcc.verify.deadlock`): a transfer is *issued* by its sender once every
transfer in its ``deps`` has *completed* (been committed by its receiver) and the earlier
transfers of its connection ``(src, dst, channel)`` have been issued. A rank learns that
a transfer completed when it received it, from the receiver's acknowledgement when it
sent it, and otherwise from a notice the receiver sends it (:attr:`RankPlan.notify`):
only the senders of transfers that depend on it are told.

A buffer of ``elements`` numbers is cut at ``floor(offset · elements)`` for every chunk
boundary (exact fractions), so the chunks partition it whatever their sizes; a chunk may
be empty.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from resilientcc.errors import ScheduleError
from resilientcc.schedules.ir import Schedule, Transfer

__all__ = ["RankPlan", "chunk_slices", "issue_order", "rank_plans", "transfer_slices"]


@dataclass(frozen=True)
class RankPlan:
    """One rank's part of a schedule.

    Attributes:
        rank: the rank.
        connections: its outgoing connections ``(dst, channel)`` → the ids it sends on
            each, in FIFO (id) order.
        receives: how many transfers it receives.
        notify: for each transfer it receives, the other ranks to tell when it commits it
            (the senders of transfers that depend on it, its own sender excepted: that one
            gets the acknowledgement).
    """

    rank: int
    connections: Mapping[tuple[int, int], tuple[int, ...]]
    receives: int
    notify: Mapping[int, tuple[int, ...]]

    @property
    def sends(self) -> int:
        """How many transfers it sends."""
        return sum(len(ids) for ids in self.connections.values())

    def sends_on(self, channel: int, to: Collection[int] | None = None) -> int:
        """How many transfers it sends on ``channel``, to the ranks ``to`` (any rank:
        ``None`` or empty)."""
        return sum(
            len(ids)
            for (dst, c), ids in self.connections.items()
            if c == channel and (not to or dst in to)
        )


def rank_plans(schedule: Schedule) -> tuple[RankPlan, ...]:
    """Every rank's :class:`RankPlan`, after checking that the run cannot deadlock.

    Raises:
        ScheduleError: ``deps`` and the connections' FIFO order form a cycle (the
            runtime would wait forever), naming a transfer on it.

    >>> from fractions import Fraction
    >>> from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
    >>> ts = (Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "copy", deps=(0,)))
    >>> p = rank_plans(Schedule("pair", 2, Fraction(8), uniform_chunks(1), ts))
    >>> dict(p[0].connections), p[0].receives, dict(p[1].notify)
    ({(1, 0): (0,)}, 1, {0: ()})
    """
    issue_order(schedule)
    conns: list[dict[tuple[int, int], list[int]]] = [
        defaultdict(list) for _ in range(schedule.ranks)
    ]
    receives = [0] * schedule.ranks
    told: dict[int, set[int]] = defaultdict(set)
    for t in sorted(schedule.transfers, key=lambda t: t.id):
        conns[t.src][(t.dst, t.channel)].append(t.id)
        receives[t.dst] += 1
        for d in t.deps:
            told[d].add(t.src)
    notify: list[dict[int, tuple[int, ...]]] = [{} for _ in range(schedule.ranks)]
    for t in schedule.transfers:
        ranks = told.get(t.id, set()) - {t.dst, t.src}
        notify[t.dst][t.id] = tuple(sorted(ranks))
    return tuple(
        RankPlan(r, {k: tuple(v) for k, v in conns[r].items()}, receives[r], notify[r])
        for r in range(schedule.ranks)
    )


def issue_order(schedule: Schedule) -> tuple[int, ...]:
    """An order in which the transfers can be issued (``deps`` and FIFO edges respected).

    Raises:
        ScheduleError: there is none (a cycle), naming transfers on it.
    """
    last: dict[tuple[int, int, int], int] = {}
    succ: dict[int, list[int]] = defaultdict(list)
    indeg: dict[int, int] = {t.id: 0 for t in schedule.transfers}
    for t in sorted(schedule.transfers, key=lambda t: t.id):
        preds = list(t.deps)
        key = (t.src, t.dst, t.channel)
        if key in last:
            preds.append(last[key])
        last[key] = t.id
        for d in preds:
            if d not in indeg:
                raise ScheduleError(f"transfer {t.id}: depends on unknown transfer {d}")
            succ[d].append(t.id)
            indeg[t.id] += 1
    ready = deque(sorted(i for i, k in indeg.items() if k == 0))
    order: list[int] = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    if len(order) < len(indeg):
        stuck = sorted(i for i, k in indeg.items() if k > 0)[:5]
        raise ScheduleError(
            f"schedule {schedule.name!r} would deadlock: deps and the connections' FIFO order "
            f"form a cycle (transfers {', '.join(map(str, stuck))} never become ready)"
        )
    return tuple(order)


def chunk_slices(schedule: Schedule, elements: int) -> tuple[tuple[int, int], ...]:
    """``(start, stop)`` element range of every chunk of a buffer of ``elements`` numbers.

    >>> from fractions import Fraction
    >>> from resilientcc.schedules.ir import Schedule, chunks_from_sizes
    >>> s = Schedule("x", 1, Fraction(8), chunks_from_sizes([Fraction(1, 3), Fraction(2, 3)]), ())
    >>> chunk_slices(s, 10)
    ((0, 3), (3, 10))
    """
    if elements < 1:
        raise ScheduleError(f"a buffer needs at least one element, got {elements}")
    return tuple(
        (math.floor(c.offset * elements), math.floor((c.offset + c.size) * elements))
        for c in schedule.chunks
    )


def transfer_slices(
    t: Transfer, slices: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    """The element ranges a transfer carries (one per chunk, empty ones left out)."""
    return tuple(slices[c] for c in t.chunk_ids if slices[c][1] > slices[c][0])
