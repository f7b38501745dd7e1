"""The direct schedule's shares and rails from a linear program over every NIC.

The direct schedule (:mod:`~resilientcc.schedules.direct`) sends each partial sum one
network hop to its owner and the result one hop back, on a rail alive at both ends.
Its default plan (:class:`~resilientcc.schedules.direct.DirectPlan`) takes the owners'
shares from the servers' total bandwidths (:func:`~resilientcc.schedules.optcc.balanced_shares`)
and spreads a degraded server's traffic evenly over the rails it shares with each peer.
Where several degraded servers lost different NICs that is far from what the NICs can
carry: a rail that two of them kept carries the traffic of every pair that has few
rails in common, and a server whose one NIC runs at half speed but is otherwise the
fastest is counted as healthy, its slow NIC loaded like the others (4 servers, all four
degraded, 256 MiB: the busiest NIC at 2.25 × the bound).

:func:`rail_split` chooses the shares and each pair's rails together, as the linear
program over the NICs' loads that the direct schedule's structure allows:

* variables: each server's share ``w_s`` (``Σ w_s = 1``), and for each ordered pair
  ``(s, t)`` and rail ``c`` alive on both the bytes ``y_stc`` of ``t``'s shard that
  ``s`` sends on ``c`` (``Σ_c y_stc = w_t``); the result goes back on the same rail
  (for the decoupled straggler, which owns nothing, on the next rail the pair shares,
  as the schedule sends it);
* every NIC's egress and ingress, in bytes per byte of the buffer, at most ``T`` times
  its bandwidth; minimise ``T``;
* among the fastest, the shares closest to the water-filling's (least
  ``Σ |w_s − w⁰_s|``; the water-filling's exactly where they are among the fastest);
* keeping both, each pair's parts nearest an even spread over the rails it shares: a
  corner of the program puts a pair on one or two rails, which then carry it alone
  while the others idle.

Servers with the same NICs (alive, and at the same bandwidths) are interchangeable, so
averaging an optimum over them is an optimum: the program has one share per kind of
server and one rail split per ordered pair of kinds, and stays small on any cluster.
The parts are rounded to multiples of ``1 /`` :data:`SPLIT_GRID` (each pair's summing
to exactly 1), the shares too unless they are the water-filling's (summing to exactly
1), and the busiest NIC is recounted with the rounded values.

:func:`plan_nic_time` evaluates any plan the same way, so OptCC runs the program's plan
only where it lowers the busiest NIC (:func:`~resilientcc.schedules.optcc.optcc`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from resilientcc.errors import ScheduleError
from resilientcc.schedules._build import ServerInfo
from resilientcc.schedules.direct import DirectPlan

__all__ = ["SPLIT_GRID", "RailSplit", "plan_nic_time", "rail_split", "server_kinds"]

#: the shares and rails' parts are multiples of ``1/SPLIT_GRID``
SPLIT_GRID = 4096


@dataclass(frozen=True)
class RailSplit:
    """The program's answer (:func:`rail_split`).

    Attributes:
        shares: each server's share of every piece (sums to 1).
        pair_weights: ``(sender, owner) → {rail: part}``, the parts of the owner's
            shard the sender exchanges on each rail (each pair's sum 1).
        decoupled: the server that owns nothing and gets its results on the next rail
            (:mod:`~resilientcc.schedules.direct`, "decoupled straggler"), or ``None``.
        nic_time: the busiest NIC's bytes per byte of the buffer over its bandwidth
            (seconds per byte), with the rounded values.
    """

    shares: Mapping[int, Fraction]
    pair_weights: Mapping[tuple[int, int], Mapping[int, Fraction]]
    decoupled: int | None
    nic_time: float

    def plan(self, servers: Sequence[ServerInfo]) -> DirectPlan:
        """The :class:`~resilientcc.schedules.direct.DirectPlan` that runs this split."""
        return DirectPlan(servers, self.shares, pair_weights=self.pair_weights)


def server_kinds(servers: Sequence[ServerInfo]) -> list[list[ServerInfo]]:
    """The servers grouped by kind: the same GPUs, NICs alive and NIC bandwidths.

    Examples:
        >>> from resilientcc.topology import apply_fail_specs, hierarchical
        >>> from resilientcc.schedules._build import server_view
        >>> t = apply_fail_specs(hierarchical(5, 8), ["0:nic1", "3:nic1"])
        >>> [[sv.index for sv in kind] for kind in server_kinds(server_view(t))]
        [[0, 3], [1, 2, 4]]
    """
    kinds: dict[tuple[object, ...], list[ServerInfo]] = {}
    for sv in servers:
        key = (len(sv.ranks), sv.nics, sv.alive, sv.nic_bw, sv.nic_gpu)
        kinds.setdefault(key, []).append(sv)
    return sorted(kinds.values(), key=lambda kind: kind[0].index)


def _common(s: ServerInfo, t: ServerInfo) -> list[int]:
    """The rails ``s`` exchanges with ``t`` on (as :meth:`DirectPlan.common`)."""
    return [c for c in s.alive if c in t.alive]


def _decoupled(servers: Sequence[ServerInfo], shares: Mapping[int, Fraction]) -> int | None:
    """The server the direct schedule decouples with these shares (the one non-owner)."""
    nonown = [sv for sv in servers if shares.get(sv.index, Fraction(0)) == 0]
    return nonown[0].index if len(nonown) == 1 and len(nonown[0].ranks) > 1 else None


def _result_rail(s: ServerInfo, t: ServerInfo, c: int, decoupled: int | None) -> int:
    """The rail ``t`` returns ``s``'s results on, for the partials ``s`` sent on ``c``."""
    if decoupled != s.index or len(t.ranks) <= 2:
        return c
    common = _common(s, t) or list(s.alive)
    return common[(common.index(c) + 1) % len(common)]


def plan_nic_time(servers: Sequence[ServerInfo], plan: DirectPlan, decouple: bool = True) -> float:
    """The busiest NIC's network bytes per byte of the buffer over its bandwidth
    (seconds per byte) when the direct schedule runs ``plan``: each partial on its
    arc's rail, each result back on it (the decoupled straggler's on the next rail).

    ``inf`` where a rail carries bytes at a server whose NIC on it is dead (the
    schedule would then reach the network through another NIC; this count does not
    follow it).
    """
    decoupled = _decoupled(servers, plan.shares) if decouple else None
    load: dict[tuple[str, int, int], float] = {}

    def add(kind: str, s: int, c: int, amount: float) -> None:
        load[(kind, s, c)] = load.get((kind, s, c), 0.0) + amount

    for t in servers:
        w = plan.shares.get(t.index, Fraction(0))
        if w <= 0:
            continue
        senders = [sv for sv in servers if sv.index != t.index]
        for pos, s in enumerate(senders):
            for length, c in plan.arcs(s, t, pos):
                amount = float(length * w)
                r = _result_rail(s, t, c, decoupled)
                add("out", s.index, c, amount)
                add("in", t.index, c, amount)
                add("out", t.index, r, amount)
                add("in", s.index, r, amount)
    by_index = {sv.index: sv for sv in servers}
    worst = 0.0
    for (_, index, c), amount in load.items():
        sv = by_index[index]
        bw = float(sv.nic_bw[c]) if c < len(sv.nic_bw) and c in sv.alive else 0.0
        if amount > 1e-15:
            worst = max(worst, amount / bw if bw > 0 else math.inf)
    return worst


def _grid(values: Sequence[float], total: int) -> list[int]:
    """Non-negative integers summing to ``total``, each within one of ``values[i]``
    (scaled to sum to ``total``; largest remainders)."""
    pos = [max(v, 0.0) for v in values]
    scale = total / sum(pos) if sum(pos) > 0 else 0.0
    exact = [v * scale for v in pos]
    units = [math.floor(x) for x in exact]
    for j in sorted(range(len(exact)), key=lambda j: units[j] - exact[j])[: total - sum(units)]:
        units[j] += 1
    return units


def rail_split(
    servers: Sequence[ServerInfo],
    target: Mapping[int, Fraction],
    *,
    decouple: bool = True,
) -> RailSplit | None:
    """The shares and each pair's rails that load the busiest NIC least (module docs).

    ``target``: the shares preferred among the fastest (the water-filling's). ``None``
    where the program does not apply: servers without per-NIC bandwidths (switch
    models), or two servers with no rail alive on both.

    Examples:
        >>> from resilientcc.topology import apply_fail_specs, hierarchical
        >>> from resilientcc.schedules._build import server_view, usable_view
        >>> from resilientcc.schedules.optcc import balanced_shares
        >>> t = apply_fail_specs(hierarchical(4, 8), ["0:nic1", "1:nic2", "2:1", "3:2"])
        >>> sv = usable_view(server_view(t))
        >>> w0 = balanced_shares({s.index: s.bandwidth for s in sv})
        >>> split = rail_split(sv, w0)
        >>> old = plan_nic_time(sv, DirectPlan(sv, w0))
        >>> round(old / split.nic_time, 3), split.shares == w0
        (1.233, True)
    """
    if any(not sv.nic_bw or not sv.alive for sv in servers) or len(servers) < 2:
        return None
    for s in servers:
        for t in servers:
            if s.index != t.index and not _common(s, t):
                return None
    first = _solve(servers, target, None)
    if first is None:
        return None
    shares, weights = first
    decoupled = _decoupled(servers, shares) if decouple else None
    if decoupled is not None:
        # the straggler that owns nothing gets its results on the next rail: solve again
        # with that counted (its share kept at zero)
        again = _solve(servers, target, decoupled)
        if again is None:
            return None
        shares, weights = again
    plan = DirectPlan(servers, shares, pair_weights=weights)
    return RailSplit(shares, weights, decoupled, plan_nic_time(servers, plan, decouple))


def _linprog(
    cost: list[float],
    a_ub: list[list[float]],
    b_ub: list[float],
    a_eq: list[list[float]],
    b_eq: list[float],
    bounds: list[tuple[float, None]],
) -> Any:
    """One solve of the program's stages (HiGHS); its result, or ScheduleError."""
    from scipy.optimize import linprog  # scipy only here: the schedules' linear programs

    res = linprog(c=cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status != 0:
        raise ScheduleError(f"optcc: no rail split for the direct schedule ({res.message})")
    return res


def _solve(
    servers: Sequence[ServerInfo],
    target: Mapping[int, Fraction],
    decoupled: int | None,
) -> tuple[dict[int, Fraction], dict[tuple[int, int], dict[int, Fraction]]] | None:
    """One solve of the program (module docs); the rounded shares and pair weights."""
    kinds = server_kinds(servers)
    nk = len(kinds)
    rep = [kind[0] for kind in kinds]
    size = [len(kind) for kind in kinds]
    top = max(max(sv.nic_bw) for sv in servers)
    dec_kind = next((a for a in range(nk) if rep[a].index == decoupled), None)
    # variables: w_a (one per kind), y_(a, b, c) (pairs of kinds, rails both alive), T,
    # then |w_a − target_a| for the second objective
    pairs = [
        (a, b, c)
        for a in range(nk)
        for b in range(nk)
        if a != b or size[a] > 1
        for c in _common(rep[a], rep[b])
    ]
    col = {key: nk + j for j, key in enumerate(pairs)}
    t_col = nk + len(pairs)
    dev = t_col + 1
    nv = dev + nk

    def row() -> list[float]:
        return [0.0] * nv

    a_eq: list[list[float]] = []
    b_eq: list[float] = []
    for a in range(nk):
        for b in range(nk):
            if a == b and size[a] == 1:
                continue
            r = row()
            for c in _common(rep[a], rep[b]):
                r[col[(a, b, c)]] = 1.0
            r[b] = -1.0
            a_eq.append(r)
            b_eq.append(0.0)
    r = row()
    for a in range(nk):
        r[a] = float(size[a])
    a_eq.append(r)
    b_eq.append(1.0)
    if dec_kind is not None:
        r = row()
        r[dec_kind] = 1.0
        a_eq.append(r)
        b_eq.append(0.0)
    # NIC loads: a server of kind a exchanges with (size[b] − [a == b]) servers of kind b
    loads: dict[tuple[str, int, int], list[float]] = {}

    def add(kind: str, a: int, c: int, j: int, coef: float) -> None:
        loads.setdefault((kind, a, c), row())[j] += coef

    for a, b, c in pairs:
        j = col[(a, b, c)]
        res = _result_rail(rep[a], rep[b], c, decoupled)
        peers_of_a = size[b] - (a == b)  # owners of kind b that one server a sends to
        peers_of_b = size[a] - (a == b)  # senders of kind a that one server b hears from
        add("out", a, c, j, peers_of_a)
        add("in", a, res, j, peers_of_a)
        add("in", b, c, j, peers_of_b)
        add("out", b, res, j, peers_of_b)
    a_ub: list[list[float]] = []
    for (_, a, c), r in loads.items():
        r = list(r)
        r[t_col] = -float(rep[a].nic_bw[c] / top)
        a_ub.append(r)
    b_ub = [0.0] * len(a_ub)
    bounds = [(0.0, None)] * nv
    time_only = row()
    time_only[t_col] = 1.0
    res = _linprog(time_only, a_ub, b_ub, a_eq, b_eq, bounds)
    least = float(res.x[t_col]) * (1 + 1e-9) + 1e-12
    # second: keep T, the shares nearest the target (|w − w⁰| ≤ dev)
    a_ub2 = [list(r) for r in a_ub]
    b_ub2 = list(b_ub)
    r = row()
    r[t_col] = 1.0
    a_ub2.append(r)
    b_ub2.append(least)
    for a in range(nk):
        aim = float(target.get(rep[a].index, Fraction(0)))
        for sign in (1.0, -1.0):
            r = row()
            r[a] = sign
            r[dev + a] = -1.0
            a_ub2.append(r)
            b_ub2.append(sign * aim)
    near = row()
    for a in range(nk):
        near[dev + a] = float(size[a])
    res = _linprog(near, a_ub2, b_ub2, a_eq, b_eq, bounds)
    # third: keep both, each pair's parts nearest an even spread over the rails it
    # shares (|y_abc − w_b / m_ab| ≤ e_abc): a corner of the program puts a pair on few
    # rails, which then carry it alone while the others wait
    near_dev = float(res.fun) * (1 + 1e-9) + 1e-12
    spread_col = {key: nv + j for j, key in enumerate(pairs)}
    nv3 = nv + len(pairs)

    def widen(r: list[float]) -> list[float]:
        return r + [0.0] * len(pairs)

    a_ub3 = [widen(r) for r in a_ub2]
    b_ub3 = list(b_ub2)
    a_ub3.append(widen(near))
    b_ub3.append(near_dev)
    for a, b, c in pairs:
        m = len(_common(rep[a], rep[b]))
        for sign in (1.0, -1.0):
            r = [0.0] * nv3
            r[col[(a, b, c)]] = sign
            r[b] = -sign / m
            r[spread_col[(a, b, c)]] = -1.0
            a_ub3.append(r)
            b_ub3.append(0.0)
    spread = [0.0] * nv3
    for a, b, c in pairs:
        spread[spread_col[(a, b, c)]] = float(size[a] * (size[b] - (a == b)))
    res = _linprog(spread, a_ub3, b_ub3, [widen(r) for r in a_eq], b_eq, [(0.0, None)] * nv3)
    x = [float(v) for v in res.x]
    # shares on the grid, Σ size_a · w_a = 1 exactly: every kind but the largest owner
    # is rounded and that one takes the rest
    w = [max(x[a], 0.0) for a in range(nk)]
    if dec_kind is not None:
        w[dec_kind] = 0.0
    goal = [Fraction(target.get(rep[a].index, Fraction(0))) for a in range(nk)]
    if sum((size[a] * goal[a] for a in range(nk)), Fraction(0)) == 1 and all(
        abs(w[a] - float(goal[a])) <= 1e-9 for a in range(nk)
    ):
        share = list(goal)  # the target itself is among the fastest: keep it exact
    else:
        big = max(range(nk), key=lambda a: size[a] * w[a])
        share = [Fraction(round(w[a] * SPLIT_GRID), SPLIT_GRID) for a in range(nk)]
        rest = 1 - sum((size[a] * share[a] for a in range(nk) if a != big), Fraction(0))
        if rest < 0:
            return None
        share[big] = rest / size[big]
    shares = {sv.index: share[a] for a in range(nk) for sv in kinds[a]}
    weights: dict[tuple[int, int], dict[int, Fraction]] = {}
    for a in range(nk):
        for b in range(nk):
            if a == b and size[a] == 1:
                continue
            rails = _common(rep[a], rep[b])
            units = _grid([x[col[(a, b, c)]] for c in rails], SPLIT_GRID)
            if sum(units) != SPLIT_GRID:  # the owner's share is zero: any split
                units = _grid([1.0] * len(rails), SPLIT_GRID)
            part = {c: Fraction(u, SPLIT_GRID) for c, u in zip(rails, units, strict=True)}
            for s in kinds[a]:
                for t in kinds[b]:
                    if s.index != t.index:
                        weights[(s.index, t.index)] = part
    return shares, weights
