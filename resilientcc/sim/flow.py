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

Implementation. :class:`_Prepared` turns the schedule into arrays once (numpy):
dependency and connection (FIFO) pointers, one route per connection (plus one per
distinct pinned route), route latencies and private caps (narrowest link), and the
*classes* below. The event loop (:func:`_run`) is plain Python on lists: most events
touch one or a few flows, where numpy's per-call overhead would dominate. It is the
reference; :mod:`resilientcc.sim.compiled` is the same loop on flat arrays, compiled
with numba, which ``engine="auto"`` runs from :data:`COMPILED_MIN_TRANSFERS` transfers.
Its cost follows the flows that change, not all the active ones:

* **Lazy progress.** A flow keeps ``(bytes left at t0, t0)``; its finish time sits in a
  heap and is recomputed only when its rate changes (stale entries are skipped by a
  version number). Flows that can never be slowed down are pushed once, in groups that
  started together and end together; completions (finish + route latency) are a heap
  of groups too.
* **Links that can bind.** A connection has at most one transfer transmitting, so a
  link can bind only if the private caps of the connections crossing it sum to more
  than its capacity (``_BIND_RTOL`` relative); no other link is ever looked at, and a
  route crossing none runs at its private cap.
* **Classes.** Flows whose routes cross the same links that can bind, with the same
  private cap, always get the same max-min rate: rates are kept per class, with the
  number of active flows as a multiplicity.
* **Incremental max-min** (:class:`resilientcc.sim.sharing.Sharing`). When flows start
  or end, only the classes reachable from the links they touch over links that
  currently can bind, and at least as fast as the slowest flow that changed, are
  recomputed; every other class provably keeps its rate and its flows keep their heap
  entries.

All flows draining within a relative 1e-10 of the earliest one (plus 1e-13 of the
current time) finish in the same event, and all completions due within 1e-12 of it are
handled with it, as one batch; the number of loop iterations is ``num_events``.

Max-min rates are exact up to rounding, but the schedule dynamics can amplify rounding:
on asymmetric schedules two correct implementations (or the same one with capacities
changed by 1e-15) may differ by more than 1e-9 in per-transfer times.
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from resilientcc.errors import SimulationError
from resilientcc.schedules.ir import Schedule
from resilientcc.sim import compiled
from resilientcc.sim.maxmin import maxmin_rates
from resilientcc.sim.result import SimResult, busiest_link_time
from resilientcc.sim.routing import Router
from resilientcc.sim.sharing import Sharing
from resilientcc.topology.model import Topology

__all__ = [
    "COMPILED_MIN_TRANSFERS",
    "DEFAULT_BASE_LATENCY",
    "ENGINES",
    "LATENCY_MODES",
    "PROGRESS_EVERY",
    "byte_floor",
    "link_loads",
    "maxmin_rates",
    "simulate",
]

DEFAULT_BASE_LATENCY = 8.4e-6
LATENCY_MODES = ("critical_path", "rerun")
ENGINES = ("auto", "python", "compiled")
#: ``engine="auto"`` compiles the loop (numba) from this many transfers
COMPILED_MIN_TRANSFERS = 2000
#: :func:`simulate` calls its ``progress`` every this many events
PROGRESS_EVERY = 4096

#: skip a max-min update in which every class's joins and leaves cancel: exact (rates
#: depend only on the flows per class), 10-30 % faster on pipelined schedules; False
#: recomputes it (the loops before 2026-11-26, for side-by-side benchmarks)
SKIP_CANCELLED = True
#: in a max-min update, leave out the classes that the links it reaches cannot bind
#: (all on a link with slack, those below the top of a full one), adding them back
#: where the new rates prove that wrong (see sim.sharing): exact, about 2 x faster on
#: OptCC at 64-128 servers; False reaches every class at least as fast as the update's
#: threshold (the loops before, for side-by-side benchmarks)
LEAVE_OUT = True
#: leave out of every class the links that another of its links always fills first
#: (see _dominated): exact, 1.3 x faster on OptCC at 128 servers; False keeps them
DROP_DOMINATED = True

_RTOL = 1e-10  # flows draining within this relative tolerance of each other finish together
_BIND_RTOL = 1e-9  # a link binds only if its flows' private caps exceed its capacity by more


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


def _column(ts: tuple[object, ...], name: str) -> np.ndarray:
    return np.fromiter(map(operator.attrgetter(name), ts), np.int64, len(ts))


class _Prepared:
    """Arrays derived from a schedule and a topology (routes, deps, connections, classes)."""

    def __init__(self, schedule: Schedule, topology: Topology) -> None:
        ts = schedule.transfers
        n = len(ts)
        self.n = n
        p = schedule.ranks
        self.ids = _column(ts, "id")
        self.src = _column(ts, "src")
        self.dst = _column(ts, "dst")
        chunk = _column(ts, "chunk")
        channel = _column(ts, "channel")
        deps_lists = list(map(operator.attrgetter("deps"), ts))
        chunk_bytes = np.array([float(c.size * schedule.size) for c in schedule.chunks])
        self.nbytes = chunk_bytes[chunk] if n else np.zeros(0)
        count = _column(ts, "count")
        multi = np.flatnonzero(count > 1)
        if len(multi):  # runs of chunks: their exact total (prefix sums), once per run
            sizes = (c.size for c in schedule.chunks)
            prefix = list(itertools.accumulate(sizes, initial=Fraction(0)))
            runs: dict[tuple[int, int], float] = {}
            out = []
            for run in zip(chunk[multi].tolist(), count[multi].tolist(), strict=True):
                b = runs.get(run)
                if b is None:
                    c0, cnt = run
                    b = runs[run] = float((prefix[c0 + cnt] - prefix[c0]) * schedule.size)
                out.append(b)
            self.nbytes[multi] = out

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
        if dep.size > 1:
            key = user * n + dep  # nondecreasing in user; sorted if every deps tuple is
            if not bool((key[1:] >= key[:-1]).all()):
                key = np.sort(key)
            if bool((key[1:] == key[:-1]).any()):
                key = key[np.concatenate([[True], key[1:] != key[:-1]])]
                user, dep = key // n, key % n
        self.ndeps = np.bincount(user, minlength=n).astype(np.int64)
        order = np.argsort(dep, kind="stable")
        self.users = user[order]
        self.users_ptr = np.concatenate([[0], np.cumsum(np.bincount(dep, minlength=n))]).astype(
            np.int64
        )
        self.deps_flat = dep  # grouped by user, in user order
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
        pinned = list(map(operator.attrgetter("route"), ts))
        if pinned.count(None) < n:
            for i, t in enumerate(ts):
                if t.route is None:
                    continue
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
        self._classes(routes, conn, len(conn_keys))

    def _classes(self, routes: list[tuple[int, ...]], conn: np.ndarray, n_conn: int) -> None:
        """Links that can bind, and the class of every route (``-1``: crosses none)."""
        n_links, n_routes = len(self.capacity), len(routes)
        # the most a connection can put on a link: the largest private cap of its routes
        # (route r is connection r's, then come the pinned routes)
        if n_routes == n_conn:
            most = np.bincount(self.rlinks, np.repeat(self.rcap, self.rlen), minlength=n_links)
        else:
            pair = np.unique(conn * n_routes + self.route)
            pc, pr = pair // n_routes, pair % n_routes
            lk, owner = _gather(self.rptr, self.rlinks, pr)
            weight = self.rcap[pr][owner]
            order = np.lexsort((weight, lk, pc[owner]))  # per (connection, link): largest last
            ck = (pc[owner] * n_links + lk)[order]
            last = np.concatenate([ck[1:] != ck[:-1], [True]])
            most = np.bincount(lk[order][last], weight[order][last], minlength=n_links)
        bind = (most > self.capacity * (1 + _BIND_RTOL)).tolist()
        paths = [tuple(li for li in path if bind[li]) for path in routes]
        if DROP_DOMINATED:
            gone = set(_dominated(paths, self.capacity))
            if gone:
                paths = [tuple(li for li in bl if li not in gone) for bl in paths]
        cls_of: dict[tuple[tuple[int, ...], float], int] = {}
        route_class: list[int] = []
        self.class_links: list[tuple[int, ...]] = []
        self.class_cap: list[float] = []
        for r, bl in enumerate(paths):
            if not bl:
                route_class.append(-1)
                continue
            key = (bl, float(self.rcap[r]))
            k = cls_of.get(key)
            if k is None:
                k = cls_of[key] = len(self.class_links)
                self.class_links.append(bl)
                self.class_cap.append(key[1])
            route_class.append(k)
        self.route_class = np.array(route_class, dtype=np.int64)


def _dominated(paths: list[tuple[int, ...]], capacity: np.ndarray) -> list[int]:
    """The links that another link always binds first, given the routes' candidate links.

    Link ``a`` is dominated by ``b`` when every route crossing ``a`` crosses ``b`` and
    ``a`` is at least as wide: at any moment ``a`` carries at most what ``b`` does with
    at least its capacity, so ``b`` fills no later and ``a`` never sets a rate (equal
    routes and capacity: the higher index is the dominated one). The relation has no
    cycles, so every dominated link has an undominated one above it and all can go at
    once; max-min rates are unchanged. On OptCC's clusters these are the PCIe links
    between a GPU and the NIC only its flows use, about 40 % of the incidences.
    """
    users: dict[int, set[int]] = {}
    for r, path in enumerate(paths):
        for li in path:
            users.setdefault(li, set()).add(r)
    out = []
    for a, ra in users.items():
        cap_a = capacity[a]
        for b in paths[next(iter(ra))]:
            if b == a or capacity[b] > cap_a:
                continue
            rb = users[b]
            if ra <= rb and (len(ra) < len(rb) or capacity[b] < cap_a or b < a):
                out.append(a)
                break
    return out


@dataclass
class _Run:
    """Per-transfer times of one run (numpy arrays indexed like the transfers)."""

    start: np.ndarray
    txend: np.ndarray
    end: np.ndarray
    lat: np.ndarray
    events: int
    makespan: float


def _run(
    prep: _Prepared, zero_latency: bool, progress: Callable[[int, int, float], None] | None = None
) -> _Run:
    """The event loop (see the module docstring); ``progress`` as in :func:`simulate`."""
    n = prep.n
    heappush, heappop = heapq.heappush, heapq.heappop
    inf = math.inf
    # per transfer
    nbytes = prep.nbytes.tolist()
    lat_np = np.zeros(n) if zero_latency else prep.rlat[prep.route]
    lat = lat_np.tolist()
    tcls = prep.route_class[prep.route].tolist()
    tcap = prep.rcap[prep.route].tolist()
    succ = prep.succ.tolist()
    pred = prep.pred.tolist()
    uptr = prep.users_ptr.tolist()
    users = prep.users.tolist()
    remdeps = prep.ndeps.tolist()
    # rates of the classes of flows that cross links that can bind
    sharing = Sharing(
        prep.class_links,
        prep.class_cap,
        prep.capacity.tolist(),
        _BIND_RTOL,
        SKIP_CANCELLED,
        LEAVE_OUT,
    )
    crate = sharing.rate
    members: list[set[int]] = [set() for _ in prep.class_links]
    # transfers
    txdone = bytearray(n)
    start_t = [math.nan] * n
    txend_t = [math.nan] * n
    end_t = [math.nan] * n
    rem0 = [0.0] * n  # flows of a class: bytes left at time t0, rate last changed at t0
    t0 = [0.0] * n
    fver = [0] * n  # version of a class flow's live entry in fheap
    # finish heaps: class flows one by one (versioned: rates change), the other flows in
    # groups that started together and finish together; completions in groups
    fheap: list[tuple[float, int, int]] = []
    gheap: list[tuple[float, int, list[int]]] = []
    cheap: list[tuple[float, int, list[int]]] = []
    seq = 0
    t = 0.0
    events = 0
    completed = 0

    to_start: list[int] = np.flatnonzero((prep.ndeps == 0) & (prep.pred < 0)).tolist()
    while True:
        joined: list[int] = []
        if to_start:
            groups: dict[float, list[int]] = {}
            for i in to_start:
                start_t[i] = t
                k = tcls[i]
                if k < 0:  # crosses no link that can bind: runs at its private cap
                    fc = tcap[i]
                    tf = t + nbytes[i] / fc if fc > 0 else inf
                    g = groups.get(tf)
                    if g is None:
                        groups[tf] = [i]
                    else:
                        g.append(i)
                else:
                    rem0[i] = nbytes[i]
                    t0[i] = t
                    sharing.join(k)
                    joined.append(i)
            for tf, g in groups.items():
                seq += 1
                heappush(gheap, (tf, seq, g))
            to_start = []
        # new rates: re-time the flows of the classes whose rate changed
        for k, old in sharing.update():
            r = crate[k]
            for i in members[k]:
                left = rem0[i] - old * (t - t0[i])
                rem0[i] = left
                t0[i] = t
                seq += 1
                fver[i] = seq
                heappush(fheap, (t + left / r if r > 0 else inf, seq, i))
        for i in joined:
            k = tcls[i]
            members[k].add(i)
            r = crate[k]
            seq += 1
            fver[i] = seq
            heappush(fheap, (t + rem0[i] / r if r > 0 else inf, seq, i))

        while fheap and fver[fheap[0][2]] != fheap[0][1]:
            heappop(fheap)
        tn = fheap[0][0] if fheap else inf
        if gheap and gheap[0][0] < tn:
            tn = gheap[0][0]
        if cheap and cheap[0][0] < tn:
            tn = cheap[0][0]
        if tn == inf:
            break
        events += 1
        if progress is not None and not events % PROGRESS_EVERY:
            progress(completed, n, t)
        # flows draining by tn (within the tolerance) finish transmitting now
        done: list[int] = []
        bound = t + ((tn - t) * (1 + _RTOL) + tn * 1e-13)
        while gheap and gheap[0][0] <= bound:
            done += heappop(gheap)[2]
        while fheap:
            tf, v, i = fheap[0]
            if fver[i] != v:
                heappop(fheap)
                continue
            if tf > bound:
                break
            heappop(fheap)
            k = tcls[i]
            members[k].discard(i)
            sharing.leave(k)
            done.append(i)
        if done:
            groups = {}
            for i in done:
                txdone[i] = 1
                txend_t[i] = tn
                lt = lat[i]
                g = groups.get(lt)
                if g is None:
                    groups[lt] = [i]
                else:
                    g.append(i)
                s = succ[i]
                if s >= 0 and not remdeps[s]:  # its connection is free, it is ready
                    to_start.append(s)
            for lt, g in groups.items():
                seq += 1
                heappush(cheap, (tn + lt, seq, g))
        t = tn
        # completions due now: dependants may become ready
        limit = t * (1 + 1e-12) + 1e-300
        while cheap and cheap[0][0] <= limit:
            tc, _, g = heappop(cheap)
            completed += len(g)
            for i in g:
                end_t[i] = tc
                for u in users[uptr[i] : uptr[i + 1]]:
                    d = remdeps[u] - 1
                    remdeps[u] = d
                    if not d:
                        p = pred[u]
                        if p < 0 or txdone[p]:
                            to_start.append(u)

    return _finish(
        prep,
        np.array(start_t, dtype=float),
        np.array(txend_t, dtype=float),
        np.array(end_t, dtype=float),
        lat_np,
        np.array(remdeps, dtype=np.int64),
        events,
    )


def _finish(
    prep: _Prepared,
    start: np.ndarray,
    txend: np.ndarray,
    end: np.ndarray,
    lat: np.ndarray,
    remdeps: np.ndarray,
    events: int,
) -> _Run:
    """A loop's times as a :class:`_Run`; raises on transfers that never completed."""
    n = prep.n
    if n and not np.isfinite(end).all():
        stuck = np.flatnonzero(~np.isfinite(end))
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
    return _Run(
        start=start,
        txend=txend,
        end=end,
        lat=lat,
        events=events,
        makespan=float(end.max()) if n else 0.0,
    )


def _run_engine(
    prep: _Prepared,
    zero_latency: bool,
    engine: str,
    progress: Callable[[int, int, float], None] | None,
) -> _Run:
    """Run the loop ``engine`` names (``"auto"`` resolved by :func:`_pick_engine`)."""
    if _pick_engine(engine, prep.n) == "python":
        return _run(prep, zero_latency, progress)
    start, txend, end, lat, remdeps, events = compiled.run_compiled(
        prep,
        zero_latency,
        progress,
        PROGRESS_EVERY,
        _BIND_RTOL,
        _RTOL,
        SKIP_CANCELLED,
        LEAVE_OUT,
    )
    return _finish(prep, start, txend, end, lat, remdeps, events)


def _pick_engine(engine: str, n: int) -> str:
    if engine not in ENGINES:
        raise SimulationError(f"engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "compiled":
        if not compiled.available():
            raise SimulationError(
                "engine 'compiled' needs numba, which cannot be imported here (pip install"
                " numba, or use engine='python')"
            )
        return "compiled"
    if engine == "auto" and n >= COMPILED_MIN_TRANSFERS and compiled.available():
        return "compiled"
    return "python"


def _critical_path(prep: _Prepared, run: _Run) -> tuple[list[int], float]:
    """Walk back from the last completion; returns (positions first..last, latency paid)."""
    end, start, txend, lat = run.end, run.start, run.txend, run.lat
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


def _check_fits(schedule: Schedule, topology: Topology) -> None:
    if schedule.ranks != topology.num_ranks:
        raise SimulationError(
            f"schedule {schedule.name!r} has {schedule.ranks} ranks but the topology has "
            f"{topology.num_ranks} GPUs"
        )
    if schedule.topology is not None and schedule.topology != topology.shape_fingerprint:
        raise SimulationError(f"schedule {schedule.name!r} was made for another topology")


def _link_names(topology: Topology) -> tuple[str, ...]:
    return tuple(f"{lk.src}->{lk.dst}" for lk in topology.links)


def _link_bytes(prep: _Prepared, n_links: int) -> np.ndarray:
    """Bytes over every link: each transfer's bytes on every link of its route."""
    route_bytes = np.bincount(prep.route, weights=prep.nbytes, minlength=len(prep.rlen))
    return np.bincount(
        prep.rlinks, weights=np.repeat(route_bytes, prep.rlen), minlength=n_links
    ).astype(float)


def _link_window(
    prep: _Prepared, start: np.ndarray, txend: np.ndarray, n_links: int
) -> tuple[np.ndarray, np.ndarray]:
    """When each link's first transfer started and its last one finished transmitting
    (NaN for a link no transfer crosses): per route first, then over the routes' links."""
    n_routes = len(prep.rlen)
    first_r = np.full(n_routes, np.inf)
    last_r = np.full(n_routes, -np.inf)
    if prep.n:
        np.minimum.at(first_r, prep.route, start)
        np.maximum.at(last_r, prep.route, txend)
    first = np.full(n_links, np.inf)
    last = np.full(n_links, -np.inf)
    np.minimum.at(first, prep.rlinks, np.repeat(first_r, prep.rlen))
    np.maximum.at(last, prep.rlinks, np.repeat(last_r, prep.rlen))
    first[~np.isfinite(first)] = np.nan
    last[~np.isfinite(last)] = np.nan
    return first, last


def link_loads(schedule: Schedule, topology: Topology) -> np.ndarray:
    """Bytes every link of ``topology`` carries when ``schedule`` runs, without simulating.

    Routes are the simulator's (:class:`~resilientcc.sim.routing.Router`, PXN and pinned
    routes included), so this equals :attr:`SimResult.link_bytes`; indexed like
    ``topology.links``.

    Raises:
        SimulationError: wrong topology or no route.
    """
    _check_fits(schedule, topology)
    return _link_bytes(_Prepared(schedule, topology), len(topology.links))


def byte_floor(schedule: Schedule, topology: Topology) -> tuple[float, str]:
    """The schedule's byte floor: ``(seconds, link)`` of its busiest link, bytes / capacity.

    No run of ``schedule`` can end sooner, whatever the order and overlap of its
    transfers (latencies aside): ``simulate(..., zero_latency=True).time_s`` is at least
    this. Set against the lower bound it says how much of a schedule's gap comes from
    where it puts its bytes, and against the zero-latency time how much from the
    dynamics (see ``docs/simulator.md``).

    Examples:
        >>> from fractions import Fraction
        >>> from resilientcc.topology import hierarchical
        >>> from resilientcc.schedules.ring import ring
        >>> t = hierarchical(2, 8)
        >>> secs, link = byte_floor(ring(t, Fraction(2**30)), t)
        >>> round(secs / (2 * 15 / 16 * 2**30 / 400e9), 9), link
        (1.0, 's0.nic0->rail0')
    """
    _check_fits(schedule, topology)
    prep = _Prepared(schedule, topology)
    loads = _link_bytes(prep, len(topology.links))
    return busiest_link_time(loads, prep.capacity, _link_names(topology))


def simulate(
    schedule: Schedule,
    topology: Topology,
    *,
    base_latency: float = DEFAULT_BASE_LATENCY,
    zero_latency: bool = False,
    latency_mode: str = "critical_path",
    progress: Callable[[int, int, float], None] | None = None,
    engine: str = "auto",
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
        progress: called every :data:`PROGRESS_EVERY` events as ``progress(completed,
            transfers, simulated_seconds)`` (for long runs; the second run of
            ``"rerun"`` reports too).
        engine: the event loop: ``"python"`` (the reference), ``"compiled"`` (the same
            loop compiled with numba, :mod:`resilientcc.sim.compiled`; needs numba) or
            ``"auto"`` (compiled from :data:`COMPILED_MIN_TRANSFERS` transfers when
            numba is installed). The two agree up to rounding.

    Returns:
        A :class:`SimResult`.

    Raises:
        SimulationError: wrong topology, no route, an invalid pinned route, a deadlock,
            an unknown engine, or ``"compiled"`` without numba.

    Examples:
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
    _check_fits(schedule, topology)
    _pick_engine(engine, 0)
    base = 0.0 if zero_latency else float(base_latency)
    if base < 0:
        raise SimulationError(f"base_latency: must not be negative, got {base_latency!r}")
    prep = _Prepared(schedule, topology)
    run = _run_engine(prep, zero_latency, engine, progress)
    makespan = run.makespan
    time_s = makespan + base if prep.n else 0.0
    path, path_lat = _critical_path(prep, run)
    if zero_latency:
        latency_s = 0.0
    elif latency_mode == "rerun":
        latency_s = time_s - (_run_engine(prep, True, engine, progress).makespan if prep.n else 0.0)
    else:
        latency_s = path_lat + base if prep.n else 0.0
    n_links = len(topology.links)
    link_bytes = _link_bytes(prep, n_links)
    link_first, link_last = _link_window(prep, run.start, run.txend, n_links)
    span = makespan if makespan > 0 else 1.0
    util = link_bytes / (prep.capacity * span) if n_links else np.zeros(0)
    arrays = {
        "transfer_ids": prep.ids,
        "src": prep.src,
        "dst": prep.dst,
        "nbytes": prep.nbytes,
        "start_s": run.start,
        "tx_end_s": run.txend,
        "end_s": run.end,
        "route_latency_s": run.lat,
        "link_capacity": prep.capacity,
        "link_bytes": link_bytes,
        "link_utilisation": util,
        "link_first_s": link_first,
        "link_last_s": link_last,
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
        num_events=run.events,
        link_names=_link_names(topology),
        critical_path=tuple(int(prep.ids[i]) for i in path),
        **arrays,
    )
