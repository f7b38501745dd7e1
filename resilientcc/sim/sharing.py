"""Max-min fair rates kept up to date as flows join and leave (incrementally).

The simulator's flows fall into *classes*: flows whose routes cross the same links that
can bind and have the same private cap (narrowest link) always get the same max-min
rate. :class:`Sharing` keeps the rate of every class while flows join and leave,
recomputing as little as it can. It rests on four facts about max-min fairness
(progressive filling):

* **Links that cannot bind.** A link whose active flows' private caps sum to at most
  its capacity (a relative ``bind_rtol`` more) never limits anyone: it is left out. The
  others are *candidates*; the allocation splits over the connected components of the
  graph of active classes and candidate links, and only components that a joining or
  leaving flow touches are recomputed.
* **Fixing some rates.** Fix any set of classes at their max-min rates: the max-min
  rates of the others, in the capacity the fixed ones leave them, are their max-min
  rates.
* **Rates depend on the flows per class.** When every class that gained flows since the
  last update lost as many (a connection's next transfer starting as its last one ends,
  the commonest event of a pipelined schedule), no rate can change: the update is
  skipped, and a class that emptied and filled again gets its rate back.
* **Slower flows keep their rates.** Progressive filling runs the same below the level
  at which a leaving flow froze, and below the level at which a joining flow will
  freeze, which is at least its fair share ``capacity / flows`` on its candidate links
  (it is the fastest on its bottleneck). So when flows leave or join, every class slower
  than ``xstar`` (the smallest of the leaving flows' rates and of the joining flows'
  fair shares) keeps its rate.

So :meth:`Sharing.update` recomputes, with :func:`~resilientcc.sim.maxmin.waterfill`, the
classes on the links that changed and every class at least as fast as ``xstar`` that is
reachable from them over candidate links; the slower classes it meets keep their rates
and only take their share off the links they cross.
"""

from __future__ import annotations

import math

from resilientcc.sim.maxmin import waterfill

__all__ = ["Sharing"]

_KEEP_RTOL = 1e-9  # classes this much below ``xstar`` keep their rates (rounding margin)


class Sharing:
    """Max-min rates of classes of flows, updated as flows join and leave.

    Args:
        class_links: the links each class's flows cross that can ever bind.
        class_cap: each class's private cap.
        capacity: every link's capacity.
        bind_rtol: a link whose flows' private caps exceed its capacity by no more than
            this (relative) is treated as unable to bind.
        skip_cancelled: skip an update in which every class's joins and leaves cancel
            (exact; False recomputes it, for comparison).

    Attributes:
        rate: current rate of one flow of each class (its private cap while idle).
        mult: number of active flows of each class.

    Examples:
        >>> sh = Sharing([(0,), (0,)], [5.0, 5.0], [6.0], 1e-9)
        >>> sh.join(0); sh.update()
        []
        >>> sh.join(1); sorted(sh.update())  # (class, old rate)
        [(0, 5.0), (1, 5.0)]
        >>> sh.rate
        [3.0, 3.0]
    """

    def __init__(
        self,
        class_links: list[tuple[int, ...]],
        class_cap: list[float],
        capacity: list[float],
        bind_rtol: float,
        skip_cancelled: bool = True,
    ) -> None:
        n_links, n_cls = len(capacity), len(class_links)
        self.clinks = class_links
        self.ccap = class_cap
        self.cap = capacity
        self.captol = [c * (1 + bind_rtol) for c in capacity]
        # links: sum of the active flows' private caps and their number, candidate or not,
        # the classes active on it
        self.demand = [0.0] * n_links
        self.lcnt = [0] * n_links
        self.hot = bytearray(n_links)
        self.lcls: list[set[int]] = [set() for _ in range(n_links)]
        self.mult = [0] * n_cls
        self.rate = list(class_cap)
        # since the last update: candidate links (before or after) where flows joined or
        # left, classes that gained a flow, the lowest rate of a leaving flow
        self.seeds: set[int] = set()
        self.joined: list[int] = []
        self.xstar = math.inf
        self.epoch = 0  # marks the classes seen by the current update
        self.cseen = [0] * n_cls
        # since the last update: flows gained (net) per class touched, and the rate each
        # class had when it last emptied
        self.skip_cancelled = skip_cancelled
        self.delta: dict[int, int] = {}
        self.saved: dict[int, float] = {}
        self.skipped = 0  # updates skipped so far

    def join(self, k: int) -> None:
        """A flow of class ``k`` starts."""
        demand, lcnt, captol = self.demand, self.lcnt, self.captol
        clinks = self.clinks[k]
        if not self.mult[k]:
            for li in clinks:
                self.lcls[li].add(k)
        self.mult[k] += 1
        fc = self.ccap[k]
        for li in clinks:
            d = demand[li] + fc
            demand[li] = d
            lcnt[li] += 1
            if d > captol[li]:
                self.hot[li] = 1
                self.seeds.add(li)
        self.joined.append(k)
        self.delta[k] = self.delta.get(k, 0) + 1

    def leave(self, k: int) -> None:
        """A flow of class ``k`` ends."""
        demand, lcnt, captol, hot, seeds = self.demand, self.lcnt, self.captol, self.hot, self.seeds
        if self.rate[k] < self.xstar:
            self.xstar = self.rate[k]
        m = self.mult[k] - 1
        self.mult[k] = m
        self.delta[k] = self.delta.get(k, 0) - 1
        fc = self.ccap[k]
        for li in self.clinks[k]:
            if hot[li]:
                seeds.add(li)
            c = lcnt[li] - 1
            lcnt[li] = c
            d = demand[li] - fc if c else 0.0
            demand[li] = d
            hot[li] = d > captol[li]
            if not m:
                self.lcls[li].discard(k)
        if not m:
            self.saved.setdefault(k, self.rate[k])
            self.rate[k] = fc

    def update(self) -> list[tuple[int, float]]:
        """Recompute after the joins and leaves since the last call.

        Returns:
            ``(class, old rate)`` of every active class whose rate changed.
        """
        delta, saved = self.delta, self.saved
        if self.skip_cancelled and delta and not any(delta.values()):
            # the same flows per class as at the last update: the same rates (a class
            # that emptied and filled again gets its rate back)
            self.skipped += 1
            changed = [(k, self.rate[k]) for k, r in saved.items() if r != self.rate[k]]
            for k, r in saved.items():
                self.rate[k] = r
            delta.clear()
            saved.clear()
            self.seeds.clear()
            self.joined.clear()
            self.xstar = math.inf
            return changed
        delta.clear()
        saved.clear()
        xstar = self.xstar
        cap, hot, lcnt, clinks = self.cap, self.hot, self.lcnt, self.clinks
        for k in self.joined:  # a lower bound on its max-min rate: its fair share
            lb = self.ccap[k]
            for li in clinks[k]:
                if hot[li] and cap[li] < lb * lcnt[li]:
                    lb = cap[li] / lcnt[li]
            if lb < xstar:
                xstar = lb
        self.joined.clear()
        self.xstar = math.inf
        if not self.seeds:
            return []
        lo = xstar * (1 - _KEEP_RTOL) if xstar < math.inf else -1.0
        lcls, crate, mult, cseen = self.lcls, self.rate, self.mult, self.cseen
        self.epoch += 1
        ep = self.epoch
        comp: list[int] = []  # the classes recomputed
        residual: dict[int, float] = {}  # their candidate links: capacity the others leave
        for li in self.seeds:  # every class on a seed link is recomputed
            for k in lcls[li]:
                if cseen[k] != ep:
                    cseen[k] = ep
                    comp.append(k)
        self.seeds.clear()
        hls: list[list[int]] = []  # the candidate links of each class in comp
        for k in comp:  # grows while iterating: over candidate links, to the fast classes
            hl = []
            for li in clinks[k]:
                if not hot[li]:
                    continue
                hl.append(li)
                if li in residual:
                    continue
                used = 0.0
                for k2 in lcls[li]:
                    if cseen[k2] == ep:
                        continue
                    rk = crate[k2]
                    if rk >= lo:
                        cseen[k2] = ep
                        comp.append(k2)
                    else:
                        used += rk * mult[k2]
                residual[li] = cap[li] - used if cap[li] > used else 0.0
            hls.append(hl)
        rates = waterfill([mult[k] for k in comp], [self.ccap[k] for k in comp], hls, residual)
        changed = []
        for k, r in zip(comp, rates, strict=True):
            old = crate[k]
            if r != old:
                crate[k] = r
                changed.append((k, old))
        return changed
