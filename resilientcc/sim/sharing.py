"""Max-min fair rates kept up to date as flows join and leave (incrementally).

The simulator's flows fall into *classes*: flows whose routes cross the same links that
can bind and have the same private cap (narrowest link) always get the same max-min
rate. :class:`Sharing` keeps the rate of every class while flows join and leave,
recomputing as little as it can. It rests on five facts about max-min fairness
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

* **A link binds only its fastest classes.** A class's rate is set by a link that is
  full and on which no class is faster (its bottleneck), or by its private cap. So a
  link that had slack was no class's bottleneck, and on a full link only the classes at
  its top rate can have it as theirs. Every other class on it can keep its rate, unless
  the new rates fill the link at a level below it: then the link would bind it.

So :meth:`Sharing.update` recomputes, with :func:`~resilientcc.sim.maxmin.waterfill`, the
classes on the links that changed that are at least as fast as ``xstar`` (and those that
gained flows), and the classes it reaches from them over candidate links: those at the
top of a full link. The classes it meets but leaves out keep their rates and only take
their share off the links they cross. If the new rates fill a link below a class it
left out there, the update *widens*: that link's classes are added and the water-filling
runs again (after ``_MAX_WIDEN`` times, the update is redone reaching every class at
least as fast as ``xstar`` over candidate links). ``leave_out=False`` always does
that.
"""

from __future__ import annotations

import math

from resilientcc.sim.maxmin import waterfill

__all__ = ["Sharing"]

_KEEP_RTOL = 1e-9  # classes this much below ``xstar`` keep their rates (rounding margin)
_SLACK_RTOL = 1e-6  # a link has slack if its flows' rates sum to this much below capacity
_FULL_RTOL = 1e-7  # a link is full if less than this much of its capacity is left
_MAX_WIDEN = 8  # an update widened more often than this is redone without leaving out


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
        leave_out: leave out of an update the classes that a link cannot bind (all,
            where it had slack; those slower than its fastest, where it was full),
            adding them back where that proves wrong (exact; False recomputes them).

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
        leave_out: bool = True,
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
        # leave out of updates the classes that links with slack, or full links they are
        # slower than, cannot bind
        self.leave_out = leave_out
        self.kept = 0  # links on which an update left out classes at least xstar
        self.widened = 0  # times an update added classes it had left out
        self.redone = 0  # updates redone in full, having widened too often

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
        joined = set(self.joined)
        self.joined.clear()
        self.xstar = math.inf
        if not self.seeds:
            return []
        lo = xstar * (1 - _KEEP_RTOL) if xstar < math.inf else -1.0
        seeds = list(self.seeds)
        self.seeds.clear()
        if self.leave_out:
            pruned = self._recompute(seeds, joined, lo, True)
            if pruned is not None:
                return pruned
            self.redone += 1
        full = self._recompute(seeds, joined, lo, False)
        assert full is not None  # only a try that leaves classes out can fail
        return full

    def _recompute(
        self, seeds: list[int], joined: set[int], lo: float, omitting: bool
    ) -> list[tuple[int, float]] | None:
        """One try of :meth:`update`: the changed rates, or None (nothing changed) if it
        widened more than ``_MAX_WIDEN`` times, leaving out classes (``omitting``)."""
        cap, hot, clinks = self.cap, self.hot, self.clinks
        lcls, crate, mult, cseen = self.lcls, self.rate, self.mult, self.cseen
        self.epoch += 1
        ep = self.epoch
        comp: list[int] = []  # the classes recomputed
        for li in seeds:  # on the links that changed: the joined classes and the fast ones
            for k in lcls[li]:
                if cseen[k] != ep and (crate[k] >= lo or k in joined):
                    cseen[k] = ep
                    comp.append(k)
        residual: dict[int, float] = {}  # their candidate links: capacity the others leave
        short: list[int] = []  # candidate links whose residual waits for comp to be complete
        keeping: list[int] = []  # the links that kept classes at least lo: checked
        hls: list[list[int]] = []  # the candidate links of each class in comp
        widened = 0
        while True:
            while len(hls) < len(comp):  # comp grows: over candidate links, to the classes
                k = comp[len(hls)]
                hl = []
                for li in clinks[k]:
                    if not hot[li]:
                        continue
                    hl.append(li)
                    if li in residual:
                        continue
                    if omitting:
                        residual[li] = 0.0  # set below
                        short.append(li)
                        if self._reach(li, lo, joined, ep, comp):
                            keeping.append(li)
                            self.kept += 1
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
            for li in short:  # the classes on it not in comp keep their rates
                used = sum(crate[k2] * mult[k2] for k2 in lcls[li] if cseen[k2] != ep)
                residual[li] = cap[li] - used if cap[li] > used else 0.0
            rates = waterfill([mult[k] for k in comp], [self.ccap[k] for k in comp], hls, residual)
            if not keeping:
                break
            new = dict(zip(comp, rates, strict=True))
            keeping = [li for li in keeping if not self._widen(li, new, residual[li], lo, comp)]
            if len(comp) == len(new):  # no link bound a kept class
                break
            widened += 1
            self.widened += 1
            if widened > _MAX_WIDEN:
                return None
        changed = []
        for k, r in zip(comp, rates, strict=True):
            old = crate[k]
            if r != old:
                crate[k] = r
                changed.append((k, old))
        return changed

    def _reach(self, li: int, lo: float, joined: set[int], ep: int, comp: list[int]) -> bool:
        """Add to ``comp`` the classes on candidate link ``li`` that it can bind.

        None are added if the link had slack (its flows' rates summed to less than its
        capacity): it was no class's bottleneck. Otherwise the classes at its top rate,
        leaving out those in ``joined``, whose rates are not old max-min rates. The others
        keep their rates; returns whether any of them is at least ``lo`` (a slower class
        keeps its rate anyway), for :meth:`_widen` to check.
        """
        rate, mult, cseen = self.rate, self.mult, self.cseen
        load = top = 0.0
        fast = []  # the classes not in comp at least lo: the ones it may add
        for k in self.lcls[li]:
            r = rate[k]
            load += r * mult[k]
            if r > top and k not in joined:
                top = r
            if r >= lo and cseen[k] != ep:
                fast.append(k)
        if load < self.cap[li] * (1 - _SLACK_RTOL):
            return bool(fast)
        top = max(top * (1 - _SLACK_RTOL), lo)
        kept = False
        for k in fast:
            if rate[k] >= top:
                cseen[k] = ep
                comp.append(k)
            else:
                kept = True
        return kept

    def _widen(
        self, li: int, new: dict[int, float], residual: float, lo: float, comp: list[int]
    ) -> bool:
        """Whether link ``li``, which kept classes, binds one of them; then add them.

        ``new`` holds the recomputed classes' rates, ``residual`` what the kept classes
        left of the link. They stand unless the new rates fill it while one of them is
        faster than every recomputed class there (the fastest, if the link froze any, is
        at the level where it did): the link would bind it. Then the kept classes at
        least ``lo`` join ``comp`` (marked seen through ``new``'s epoch).
        """
        on = [k for k in self.lcls[li] if k in new]
        left = residual - sum(new[k] * self.mult[k] for k in on)
        if left > self.cap[li] * _FULL_RTOL:
            return False
        kept = max((self.rate[k] for k in self.lcls[li] if k not in new), default=0.0)
        if kept <= max(new[k] for k in on) * (1 + _KEEP_RTOL):
            return False
        ep = self.epoch
        for k in self.lcls[li]:
            if self.cseen[k] != ep and self.rate[k] >= lo:
                self.cseen[k] = ep
                comp.append(k)
        return True
