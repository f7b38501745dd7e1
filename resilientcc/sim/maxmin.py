"""Max-min fair rates by progressive filling (water-filling), on plain Python lists.

The simulator recomputes rates for a small group of flows at a time (see
:mod:`resilientcc.sim.sharing`), usually a few dozen at most: at that size plain lists
beat numpy, whose per-call overhead dominates small arrays. Flows with the same links
and the same private cap get the same max-min rate, so the caller passes *classes* of
flows with a multiplicity.

:func:`waterfill` is the core; :func:`maxmin_rates` is the array interface (one class
per flow) kept for callers and tests.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["maxmin_rates", "waterfill"]

_BIND_RTOL = 1e-12  # links whose demand exceeds capacity by no more than this cannot bind


def waterfill(
    mult: Sequence[int],
    fcap: Sequence[float],
    links: Sequence[Sequence[int]],
    cap: Sequence[float] | Mapping[int, float],
) -> list[float]:
    """Max-min fair rate of every class of flows, by progressive filling.

    All unfrozen flows rise together. The next link to saturate is the one with the
    smallest fair share ``residual / unfrozen flows`` (a heap; a link's share never
    decreases while filling, so an entry is refreshed only when it is popped stale); its
    unfrozen flows freeze at that share and their rates are taken off the residual
    capacity of their other links. A class's private cap acts as a link of its own
    (unless one of its links is no wider, which then always binds first).

    Args:
        mult: number of flows in each class (at least 1).
        fcap: private cap of each class's flows (the narrowest link of their route);
            ``inf`` for none.
        links: the links (keys of ``cap``) each class's flows cross; a link may be left
            out when it can never bind.
        cap: capacity of every link (a sequence or a mapping).

    Returns:
        The rate of one flow of each class.

    Examples:
        >>> # 2 flows of class 0 share link 0 (cap 3) with class 1, capped at 0.5 by link 1
        >>> waterfill([2, 1], [9.0, 9.0], [[0], [0, 1]], [3.0, 0.5])
        [1.25, 0.5]
    """
    q = len(mult)
    local: dict[int, int] = {}  # link -> local index
    cnt: list[int] = []  # unfrozen flows on each local link
    res: list[float] = []  # its residual capacity
    users: list[list[int]] = []  # classes on it
    llinks: list[list[int]] = []  # local links of each class
    for k in range(q):
        m = mult[k]
        ll = []
        for li in links[k]:
            j = local.get(li)
            if j is None:
                j = local[li] = len(cnt)
                cnt.append(m)
                res.append(float(cap[li]))
                users.append([k])
            else:
                cnt[j] += m
                users[j].append(k)
            ll.append(j)
        llinks.append(ll)
    heap = [(res[j] / c, j) for j, c in enumerate(cnt)]
    for k in range(q):
        fc = fcap[k]
        for j in llinks[k]:
            if res[j] <= fc:
                break
        else:
            heap.append((fc, ~k))  # ~k < 0: the private cap of class k
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    rate = [0.0] * q
    frozen = [False] * q
    left = q
    while left:
        level, j = pop(heap)
        if j < 0:
            ks: Sequence[int] = (~j,)
            share = level
        else:
            c = cnt[j]
            if not c:
                continue
            share = res[j] / c
            if share > level:  # stale: flows left this link since the entry was pushed
                push(heap, (share, j))
                continue
            ks = users[j]
        for k in ks:
            if frozen[k]:
                continue
            frozen[k] = True
            left -= 1
            fc = fcap[k]
            r = share if share < fc else fc
            rate[k] = r
            m = mult[k]
            used = r * m
            for j2 in llinks[k]:
                x = res[j2] - used
                res[j2] = x if x > 0.0 else 0.0
                cnt[j2] -= m
    return rate


def maxmin_rates(
    flow_of_entry: np.ndarray, link_of_entry: np.ndarray, num_flows: int, capacity: np.ndarray
) -> np.ndarray:
    """Max-min fair rates by progressive filling.

    Every flow's private cap is the narrowest link of its route; links whose total
    demand at the private caps fits their capacity can never bind and are left out.

    Args:
        flow_of_entry: flow of each entry of the flow–link incidence list (one entry per
            link of each flow's route).
        link_of_entry: link of each entry of that list.
        num_flows: number of flows (a flow with no entry gets rate ``inf``).
        capacity: capacity of every link (indexed by ``link_of_entry``).

    Examples:
        >>> import numpy as np
        >>> # flows 0, 1 share link 0 (cap 2); flow 1 also crosses link 1 (cap 0.5)
        >>> maxmin_rates(np.array([0, 1, 1]), np.array([0, 0, 1]), 2, np.array([2.0, 0.5]))
        array([1.5, 0.5])
    """
    capacity = np.asarray(capacity, dtype=float)
    fe = np.asarray(flow_of_entry, dtype=np.int64)
    le = np.asarray(link_of_entry, dtype=np.int64)
    fcap = np.full(num_flows, np.inf)
    if fe.size:
        np.minimum.at(fcap, fe, capacity[le])
    demand = np.bincount(le, weights=fcap[fe], minlength=len(capacity))
    binds = demand > capacity * (1 + _BIND_RTOL)
    links: list[list[int]] = [[] for _ in range(num_flows)]
    for f, li in zip(fe.tolist(), le.tolist(), strict=True):
        if binds[li]:
            links[f].append(li)
    rate = waterfill([1] * num_flows, fcap.tolist(), links, capacity.tolist())
    return np.array(rate, dtype=float)
