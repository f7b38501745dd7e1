"""The event-driven flow-level simulator (max-min fair sharing, FIFO connections).

Semantics (they implement the IR of :mod:`resilientcc.schedules.ir`):

* A transfer is *ready* when every transfer in its ``deps`` has *completed*.
* Transfers with the same ``(src, dst, channel)`` form a FIFO connection in id order:
  a transfer *starts* transmitting when it is ready and the previous transfer of its
  connection has *finished transmitting*.
* While transmitting, a transfer is a flow over the links of its route; all flows share
  links max-min fairly (progressive filling), recomputed whenever a flow starts or ends.
* When its bytes are drained it has *finished transmitting* (the connection is free for
  the next transfer) and it *completes* one route latency later (sum of its links'
  latencies): its destination buffer is updated and its dependants may become ready.
  So latency is paid once per dependency hop and overlaps the next transfer on the same
  connection — that is what makes pipelining pay.
* The collective's time is the last completion plus ``base_latency`` (NCCL's 8.4 µs),
  added once.

Implementation: struct-of-arrays over the transfers (dependency and connection
pointers, route ids) and over the active flows; at every event time all flows that
drain together and all completions due together are handled as one numpy batch; the
max-min allocation is progressive filling vectorised over a flow–link incidence list.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from typing import Any

import numpy as np

from resilientcc.errors import SimulationError
from resilientcc.schedules.ir import Schedule
from resilientcc.sim.result import SimResult
from resilientcc.sim.routing import Router
from resilientcc.topology.model import Topology

__all__ = ["DEFAULT_BASE_LATENCY", "LATENCY_MODES", "maxmin_rates", "simulate"]

DEFAULT_BASE_LATENCY = 8.4e-6
LATENCY_MODES = ("critical_path", "rerun")

_RTOL = 1e-10  # flows draining within this relative tolerance of each other finish together


def maxmin_rates(
    flow_of_entry: np.ndarray, link_of_entry: np.ndarray, num_flows: int, capacity: np.ndarray
) -> np.ndarray:
    """Max-min fair rates by progressive filling.

    Args:
        flow_of_entry, link_of_entry: the flow–link incidence list (one entry per link of
            each flow's route).
        num_flows: number of flows (a flow with no entry gets rate ``inf``).
        capacity: capacity of every link (indexed by ``link_of_entry``).

    Example:
        >>> import numpy as np
        >>> # flows 0, 1 share link 0 (cap 2); flow 1 also crosses link 1 (cap 0.5)
        >>> maxmin_rates(np.array([0, 1, 1]), np.array([0, 0, 1]), 2, np.array([2.0, 0.5]))
        array([1.5, 0.5])
    """
    capacity = np.asarray(capacity, dtype=float)
    fcap = np.full(num_flows, np.inf)
    if flow_of_entry.size:
        np.minimum.at(fcap, flow_of_entry, capacity[link_of_entry])
    order = np.argsort(flow_of_entry, kind="stable")
    return _capped_maxmin(flow_of_entry[order], link_of_entry[order], fcap, capacity)


def _gather(ptr: np.ndarray, data: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate CSR rows; returns (values, row position of each value)."""
    starts = ptr[rows]
    lens = ptr[rows + 1] - starts
    total = int(lens.sum())
    if total == 0:
        return data[:0], np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(rows)), lens)
    offs = np.cumsum(lens) - lens
    idx = np.arange(total) - np.repeat(offs, lens) + np.repeat(starts, lens)
    return data[idx], owner


class _Prepared:
    """Arrays derived from a schedule and a topology (routes, deps, connections)."""

    def __init__(self, schedule: Schedule, topology: Topology) -> None:
        ts = schedule.transfers
        n = len(ts)
        self.n = n
        p = schedule.ranks
        cols = np.array(
            list(map(operator.attrgetter("id", "src", "dst", "chunk", "channel"), ts)),
            dtype=np.int64,
        ).reshape(n, 5)
        self.ids = np.ascontiguousarray(cols[:, 0])
        self.src = np.ascontiguousarray(cols[:, 1])
        self.dst = np.ascontiguousarray(cols[:, 2])
        chunk = cols[:, 3]
        channel = cols[:, 4]
        deps_lists = list(map(operator.attrgetter("deps"), ts))
        chunk_bytes = np.array([float(c.size * schedule.size) for c in schedule.chunks])
        self.nbytes = chunk_bytes[chunk] if n else np.zeros(0)

        # positions of ids
        if n and np.array_equal(self.ids, np.arange(n)):
            sorted_ids, id_pos = self.ids, None
        else:
            id_pos = np.argsort(self.ids, kind="stable")
            sorted_ids = self.ids[id_pos]

        def to_pos(x: np.ndarray) -> np.ndarray:
            if id_pos is None:
                return x
            return id_pos[np.searchsorted(sorted_ids, x)]

        # dependencies: edges dep -> user, deduplicated
        ndeps_raw = np.fromiter(map(len, deps_lists), np.int64, n)
        flat = np.fromiter(
            itertools.chain.from_iterable(deps_lists), np.int64, int(ndeps_raw.sum())
        )
        user = np.repeat(np.arange(n), ndeps_raw)
        dep = to_pos(flat)
        if dep.size:
            key = dep * n + user
            ukey = np.unique(key)
            if len(ukey) != len(key):
                dep, user = ukey // n, ukey % n
        self.ndeps = np.bincount(user, minlength=n).astype(np.int64)
        order = np.argsort(dep, kind="stable")
        self.users = user[order]
        self.users_ptr = np.concatenate([[0], np.cumsum(np.bincount(dep, minlength=n))]).astype(
            np.int64
        )
        udeps_order = np.argsort(user, kind="stable")
        self.deps_flat = dep[udeps_order]
        self.deps_ptr = np.concatenate([[0], np.cumsum(self.ndeps)]).astype(np.int64)

        # connections and their FIFO order
        chmax = int(channel.max()) + 1 if n else 1
        ckey = (self.src * p + self.dst) * chmax + channel
        conn_keys, conn = np.unique(ckey, return_inverse=True)
        conn = conn.reshape(-1)
        fifo = np.lexsort((self.ids, conn))
        self.pred = np.full(n, -1, dtype=np.int64)
        self.succ = np.full(n, -1, dtype=np.int64)
        if n > 1:
            same = conn[fifo[1:]] == conn[fifo[:-1]]
            self.pred[fifo[1:][same]] = fifo[:-1][same]
            self.succ[fifo[:-1][same]] = fifo[1:][same]

        # routes: one per connection, plus one per distinct pinned route
        router = Router(topology)
        routes: list[tuple[int, ...]] = []
        for k in conn_keys.tolist():
            sd, ch = divmod(int(k), chmax)
            s, d = divmod(sd, p)
            routes.append(router.route(s, d, ch))
        self.route = conn.astype(np.int64)
        pinned_ids: dict[tuple[tuple[str, ...], int, int], int] = {}
        routes_pinned = list(map(operator.attrgetter("route"), ts))
        for i in [i for i, r in enumerate(routes_pinned) if r is not None]:
            t = ts[i]
            if t.route is not None:
                pkey = (t.route, t.src, t.dst)
                rid = pinned_ids.get(pkey)
                if rid is None:
                    path = router.pinned(
                        t.route, t.src, t.dst, f"schedule {schedule.name!r}: transfer {t.id}"
                    )
                    rid = len(routes)
                    routes.append(path)
                    pinned_ids[pkey] = rid
                self.route[i] = rid
        self.rlen = np.array([len(r) for r in routes], dtype=np.int64)
        self.rptr = np.concatenate([[0], np.cumsum(self.rlen)]).astype(np.int64)
        self.rlinks = np.fromiter(
            itertools.chain.from_iterable(routes), np.int64, int(self.rlen.sum())
        )
        links = topology.links
        self.capacity = np.array([float(lk.capacity) for lk in links])
        link_lat = np.array([float(lk.latency) for lk in links])
        self.rlat = np.array([float(link_lat[list(r)].sum()) if r else 0.0 for r in routes])
        self.rcap = np.array([float(self.capacity[list(r)].min()) if r else np.inf for r in routes])


def _capped_maxmin(fe: np.ndarray, le: np.ndarray, fcap: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Max-min rates of flows with private caps ``fcap`` (their routes' narrowest link).

    Links whose total demand at the private caps fits their capacity can never bind and
    are dropped first; flows left without a candidate link run at their private cap.
    """
    rate = fcap.copy()
    if fe.size == 0:
        return rate
    n_links = len(cap)
    demand = np.bincount(le, weights=fcap[fe], minlength=n_links)
    cand = demand > cap * (1 + 1e-12)
    if not cand.any():
        return rate
    keep = cand[le]
    fe, le = fe[keep], le[keep]
    if n_links > 4096:  # compress to the links in play
        links, le = np.unique(le, return_inverse=True)
        le = le.reshape(-1)
        residual = cap[links].astype(float)
    else:
        residual = cap.astype(float)
    n_loc = len(residual)
    num_flows = len(fcap)
    tol = 1 + 1e-12
    # Parallel progressive filling: every *local* bottleneck (a link whose fair share is
    # the smallest on every flow crossing it, or a flow's private cap below all its
    # links' shares) is frozen in the same round. Freezing flows at a level below a
    # link's share only raises that share, so this equals one-at-a-time filling.
    while fe.size:
        cnt = np.bincount(le, minlength=n_loc)
        used = cnt > 0
        share = np.full(n_loc, np.inf)
        share[used] = residual[used] / cnt[used]
        fmin = fcap.copy()
        np.minimum.at(fmin, fe, share[le])
        linkmin = np.full(n_loc, np.inf)
        np.minimum.at(linkmin, le, fmin[fe])
        frozen = np.zeros(num_flows, dtype=bool)
        frozen[fe[(used & (share <= linkmin * tol))[le]]] = True
        frozen[fe[fcap[fe] <= fmin[fe] * tol]] = True
        rate[frozen] = fmin[frozen]
        ent = frozen[fe]
        residual -= np.bincount(le[ent], weights=rate[fe[ent]], minlength=n_loc)
        np.maximum(residual, 0.0, out=residual)
        keep = ~ent
        fe, le = fe[keep], le[keep]
    return rate


def _run(prep: _Prepared, zero_latency: bool) -> dict[str, Any]:
    n = prep.n
    rlat = np.zeros_like(prep.rlat) if zero_latency else prep.rlat
    route = prep.route
    lat_of = rlat[route] if n else np.zeros(0)
    fcap_of = prep.rcap[route] if n else np.zeros(0)
    remdeps = prep.ndeps.copy()
    started = np.zeros(n, dtype=bool)
    txdone = np.zeros(n, dtype=bool)
    start_t = np.full(n, np.nan)
    txend_t = np.full(n, np.nan)
    end_t = np.full(n, np.nan)
    pred, succ = prep.pred, prep.succ
    nbytes = prep.nbytes
    rptr, rlinks = prep.rptr, prep.rlinks
    users_ptr, users = prep.users_ptr, prep.users
    cap = prep.capacity

    # active flows (struct of arrays) and their flow-link incidence (fe: slot, le: link)
    a_tid = np.zeros(0, dtype=np.int64)
    a_rem = np.zeros(0)
    a_rate = np.zeros(0)
    a_fcap = np.zeros(0)
    fe = np.zeros(0, dtype=np.int64)
    le = np.zeros(0, dtype=np.int64)
    demand = np.zeros(len(cap))  # per link: sum of the private caps of its active flows
    cap_tol = cap * (1 + 1e-9)
    heap: list[tuple[float, int, np.ndarray]] = []
    seq = 0
    t = 0.0
    events = 0
    changed = False
    empty = np.zeros(0, dtype=np.int64)

    new = np.flatnonzero((remdeps == 0) & (pred < 0))
    while True:
        if new.size:
            started[new] = True
            start_t[new] = t
            links_new, owner = _gather(rptr, rlinks, route[new])
            fe = np.concatenate([fe, owner + a_tid.size])
            le = np.concatenate([le, links_new])
            a_tid = np.concatenate([a_tid, new])
            a_rem = np.concatenate([a_rem, nbytes[new]])
            new_cap = fcap_of[new]
            a_fcap = np.concatenate([a_fcap, new_cap])
            np.add.at(demand, links_new, new_cap[owner])
            if not changed and (demand[links_new] > cap_tol[links_new]).any():
                changed = True
            if not changed:  # the new flows meet no link that can bind: others unchanged
                a_rate = np.concatenate([a_rate, new_cap])
        if changed:
            a_rate = _capped_maxmin(fe, le, a_fcap, cap)
            changed = False
        if a_tid.size:
            tf = a_rem / a_rate
            dtf = float(tf.min())
        else:
            tf = a_rem
            dtf = np.inf
        tc = heap[0][0] if heap else np.inf
        tn = min(t + dtf, tc)
        if tn == np.inf:
            break
        events += 1
        dt = tn - t
        to_start: list[np.ndarray] = []
        if a_tid.size:
            fin = tf <= dt * (1 + _RTOL) + tn * 1e-13
            a_rem = a_rem - a_rate * dt
            if fin.any():
                done_tx = a_tid[fin]
                keep = ~fin
                ek = keep[fe]
                gone = le[~ek]
                if (demand[gone] > cap_tol[gone]).any():
                    changed = True  # a flow left a link that could bind: others may speed up
                np.subtract.at(demand, gone, a_fcap[fe[~ek]])
                slot = np.cumsum(keep) - 1
                fe, le = slot[fe[ek]], le[ek]
                a_tid, a_rem, a_rate, a_fcap = a_tid[keep], a_rem[keep], a_rate[keep], a_fcap[keep]
                txdone[done_tx] = True
                txend_t[done_tx] = tn
                lats = lat_of[done_tx]
                lo, hi = float(lats.min()), float(lats.max())
                if lo == hi:
                    heapq.heappush(heap, (tn + lo, seq, done_tx))
                    seq += 1
                else:
                    ulat, inv = np.unique(lats, return_inverse=True)
                    inv = inv.reshape(-1)
                    for gi, lv in enumerate(ulat.tolist()):
                        heapq.heappush(heap, (tn + lv, seq, done_tx[inv == gi]))
                        seq += 1
                nxt = succ[done_tx]
                nxt = nxt[nxt >= 0]
                if nxt.size:
                    nxt = nxt[(remdeps[nxt] == 0) & ~started[nxt]]
                    to_start.append(nxt)
        t = tn
        limit = t * (1 + 1e-12) + 1e-300
        if heap and heap[0][0] <= limit:
            groups = []
            while heap and heap[0][0] <= limit:
                tt, _, grp = heapq.heappop(heap)
                end_t[grp] = tt
                groups.append(grp)
            comp = groups[0] if len(groups) == 1 else np.concatenate(groups)
            us, _ = _gather(users_ptr, users, comp)
            if us.size:
                np.subtract.at(remdeps, us, 1)
                newly = us[remdeps[us] == 0]
                if newly.size:
                    if newly.size > 1:
                        newly = np.unique(newly)
                    pr = pred[newly]
                    ok = (pr < 0) | txdone[np.maximum(pr, 0)]
                    to_start.append(newly[ok])
        if to_start:
            new = to_start[0] if len(to_start) == 1 else np.concatenate(to_start)
        else:
            new = empty

    if n and not np.isfinite(end_t).all():
        stuck = np.flatnonzero(~np.isfinite(end_t))
        waiting = stuck[remdeps[stuck] > 0]
        what = (
            "waiting for dependencies that never complete"
            if waiting.size == stuck.size
            else "blocked behind an earlier transfer of their connection"
        )
        ids = ", ".join(str(int(prep.ids[i])) for i in stuck[:5])
        raise SimulationError(
            f"deadlock: {stuck.size} transfers never complete ({what}), e.g. transfer(s) {ids}"
        )
    return {
        "start": start_t,
        "txend": txend_t,
        "end": end_t,
        "events": events,
        "lat": lat_of,
        "makespan": float(end_t.max()) if n else 0.0,
    }


def _critical_path(prep: _Prepared, run: dict[str, Any]) -> tuple[list[int], float]:
    """Walk back from the last completion; returns (positions first..last, latency paid)."""
    end, start, txend, lat = run["end"], run["start"], run["txend"], run["lat"]
    if prep.n == 0:
        return [], 0.0
    cur = int(np.argmax(end))
    via_completion = True
    path: list[int] = []
    latency = 0.0
    seen: set[int] = set()
    while cur >= 0 and cur not in seen:
        seen.add(cur)
        path.append(cur)
        if via_completion:
            latency += float(lat[cur])
        st = start[cur]
        best, best_t, best_completion = -1, -np.inf, True
        d0, d1 = prep.deps_ptr[cur], prep.deps_ptr[cur + 1]
        for d in prep.deps_flat[d0:d1].tolist():
            if end[d] > best_t:
                best, best_t, best_completion = d, end[d], True
        pr = int(prep.pred[cur])
        if pr >= 0 and txend[pr] > best_t * (1 + 1e-12):
            best, best_t, best_completion = pr, txend[pr], False
        if best < 0 or best_t <= 0 or st <= 0:
            break
        cur, via_completion = best, best_completion
    path.reverse()
    return path, latency


def simulate(
    schedule: Schedule,
    topology: Topology,
    *,
    base_latency: float = DEFAULT_BASE_LATENCY,
    zero_latency: bool = False,
    latency_mode: str = "critical_path",
) -> SimResult:
    """Simulate ``schedule`` on ``topology`` at flow level.

    Args:
        schedule: the schedule (its ``topology`` fingerprint, if set, must match).
        topology: the cluster, failures included.
        base_latency: seconds added once to the collective (NCCL's base latency 8.4 µs).
        zero_latency: ignore every link latency and the base latency (bandwidth only).
        latency_mode: how ``latency_s`` is computed: ``"critical_path"`` (the latencies
            paid along the critical path plus ``base_latency``; one run) or ``"rerun"``
            (``time_s`` minus the time of the same run with all latencies zero; two runs).

    Returns:
        A :class:`SimResult`.

    Raises:
        SimulationError: wrong topology, no route, an invalid pinned route, or a deadlock.

    Example:
        >>> from fractions import Fraction
        >>> from resilientcc.topology import hierarchical
        >>> from resilientcc.schedules.ring import ring
        >>> t = hierarchical(2, 8)
        >>> r = simulate(ring(t, Fraction(2**30)), t, zero_latency=True)
        >>> round(r.time_s / (2 * 15 / 16 * 2**30 / 400e9), 9)
        1.0
    """
    if latency_mode not in LATENCY_MODES:
        raise SimulationError(
            f"latency_mode: must be one of {', '.join(LATENCY_MODES)}, got {latency_mode!r}"
        )
    if schedule.ranks != topology.num_ranks:
        raise SimulationError(
            f"schedule {schedule.name!r} has {schedule.ranks} ranks but the topology has "
            f"{topology.num_ranks} GPUs"
        )
    if schedule.topology is not None and schedule.topology != topology.shape_fingerprint:
        raise SimulationError(f"schedule {schedule.name!r} was made for another topology")
    base = 0.0 if zero_latency else float(base_latency)
    if base < 0:
        raise SimulationError(f"base_latency: must not be negative, got {base_latency!r}")
    prep = _Prepared(schedule, topology)
    run = _run(prep, zero_latency)
    makespan = run["makespan"]
    time_s = makespan + base if prep.n else 0.0
    path, path_lat = _critical_path(prep, run)
    if zero_latency:
        latency_s = 0.0
    elif latency_mode == "rerun":
        latency_s = time_s - (_run(prep, True)["makespan"] if prep.n else 0.0)
    else:
        latency_s = path_lat + base if prep.n else 0.0
    # link loads
    n_links = len(topology.links)
    route_bytes = np.bincount(prep.route, weights=prep.nbytes, minlength=len(prep.rlen))
    link_bytes = np.bincount(
        prep.rlinks, weights=np.repeat(route_bytes, prep.rlen), minlength=n_links
    ).astype(float)
    span = makespan if makespan > 0 else 1.0
    util = link_bytes / (prep.capacity * span) if n_links else np.zeros(0)
    arrays = {
        "transfer_ids": prep.ids,
        "src": prep.src,
        "dst": prep.dst,
        "nbytes": prep.nbytes,
        "start_s": run["start"],
        "tx_end_s": run["txend"],
        "end_s": run["end"],
        "route_latency_s": run["lat"],
        "link_capacity": prep.capacity,
        "link_bytes": link_bytes,
        "link_utilisation": util,
    }
    for a in arrays.values():
        a.flags.writeable = False
    return SimResult(
        schedule=schedule.name,
        topology=topology.name,
        time_s=time_s,
        latency_s=latency_s,
        bandwidth_s=time_s - latency_s,
        base_latency_s=base,
        latency_mode=latency_mode,
        num_transfers=prep.n,
        num_events=run["events"],
        link_names=tuple(f"{lk.src}->{lk.dst}" for lk in topology.links),
        critical_path=tuple(int(prep.ids[i]) for i in path),
        **arrays,
    )
