"""The simulator's event loop compiled with numba (the same model, 15-30 × faster on OptCC).

:func:`run_compiled` is :func:`resilientcc.sim.flow._run` with every data structure
flattened into numpy arrays, so that numba can compile the whole loop: the incremental
max-min fair sharing of :class:`resilientcc.sim.sharing.Sharing`, the water-filling of
:func:`resilientcc.sim.maxmin.waterfill`, and the finish and completion heaps. It
implements the same semantics step for step; only the order in which simultaneous
flows are visited may differ, so times agree with the pure-Python loop up to rounding
(the tests compare both on every generator).

The pure-Python loop stays the reference and the fallback: where numba cannot be
imported (it is a dependency, but wheels lag new Python versions) :func:`available` is
false and :func:`resilientcc.sim.simulate` uses Python. The first call on a machine
compiles the loop (about 10 s); numba caches the machine code on disk (next to this
file, or in its user cache where that is read-only), so later processes load it in
about half a second.

Data layout (all ``int64`` / ``float64`` arrays):

* classes: ``clptr`` / ``clk``, the CSR of each class's links that can bind;
* links: the classes active on each, kept in a block of ``lptr`` (as many slots as
  classes cross it), with ``lnact`` in use; ``incpos[e]`` is where incidence ``e``
  (class ``k``'s ``j``-th link is ``e = clptr[k] + j``) sits in its link's block, and
  ``lslot`` holds incidences, so a class leaves a link by swapping with the last one;
* members: the transfers of each class that are transmitting, a binary heap in a block
  of ``mptr`` (``mcnt`` in use, keys in ``mkey``) ordered by *service target*. All flows of a class run
  at the same rate, so the loop keeps one service clock per class (bytes served to
  each of its flows since it last had none) and a flow ends when the clock reaches the
  clock at its start plus its bytes. A rate change then costs one entry in the finish
  heap per class, not one per flow, and the finish heap holds classes, not flows;
* the finish heap: indexed by class (``fkey`` / ``fcls`` / ``fpos``), each class's
  entry moved in place when its next finish changes;
* per link, ``lused`` (the sum of rate × flows of its active classes, kept as rates
  and flows change and summed afresh whenever an update visits all of them) and
  ``lmax`` (a bound on their largest rate): an update that reaches a link whose
  classes are all slower than its threshold takes their total without visiting them;
* per class, ``cdelta`` (flows gained since the last update, net) for the classes in
  ``ctouch``: when all are zero (``skip_cancelled``) no rate can change and the update
  is skipped, as in :class:`~resilientcc.sim.sharing.Sharing`; a class that emptied in
  between gets back its rate (``srate``) and its share of ``lused``;
* per update (with ``leave_out``, as in :class:`~resilientcc.sim.sharing.Sharing`):
  ``cidx``, each recomputed class's place in ``comp``, and ``keepl``, the links on
  which :func:`_reach` left classes out, for :func:`_widen` to check; every link an
  update reaches is then *short* (its residual is its ``lused`` minus the recomputed
  classes' share, summed once ``comp`` is complete and topped up after each widening).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from resilientcc import _numba
from resilientcc.sim.sharing import _FULL_RTOL, _KEEP_RTOL, _MAX_WIDEN, _SLACK_RTOL

__all__ = ["available", "run_compiled"]

numba: Any = None  # the module, bound by _numba.compile_kernels (numba.objmode in _loop)

# the progress callback of the run in flight (numba calls back into Python through it)
_progress_cb: Callable[[int, int, float], None] | None = None


def _report_progress(completed: int, n: int, t: float) -> None:
    if _progress_cb is not None:
        _progress_cb(completed, n, t)


def available() -> bool:
    """Whether numba can be imported, so that :func:`run_compiled` can run."""
    return _numba.available()


def _hpush(hk, hv, size, key, val):  # type: ignore[no-untyped-def]
    """Push ``(key, val)`` on the binary heap ``hk`` / ``hv`` of ``size``; new size."""
    p = size
    while p > 0:
        parent = (p - 1) >> 1
        kp = hk[parent]
        if kp < key or (kp == key and hv[parent] < val):
            break
        hk[p] = kp
        hv[p] = hv[parent]
        p = parent
    hk[p] = key
    hv[p] = val
    return size + 1


def _hpop(hk, hv, size):  # type: ignore[no-untyped-def]
    """Drop the head of the binary heap ``hk`` / ``hv`` of ``size``; new size."""
    size -= 1
    if size == 0:
        return 0
    key = hk[size]
    val = hv[size]
    p = 0
    while True:
        c = 2 * p + 1
        if c >= size:
            break
        if c + 1 < size and (hk[c + 1] < hk[c] or (hk[c + 1] == hk[c] and hv[c + 1] < hv[c])):
            c += 1
        if key < hk[c] or (key == hk[c] and val < hv[c]):
            break
        hk[p] = hk[c]
        hv[p] = hv[c]
        p = c
    hk[p] = key
    hv[p] = val
    return size


def _iset(fkey, fcls, fpos, size, k, key):  # type: ignore[no-untyped-def]
    """Set class ``k``'s key in the indexed heap (``fpos[k] < 0``: absent); new size."""
    p = fpos[k]
    if p < 0:
        p = size
        size += 1
    elif key > fkey[p]:  # later: sift down
        while True:
            c = 2 * p + 1
            if c >= size:
                break
            if c + 1 < size and (
                fkey[c + 1] < fkey[c] or (fkey[c + 1] == fkey[c] and fcls[c + 1] < fcls[c])
            ):
                c += 1
            if key < fkey[c] or (key == fkey[c] and k < fcls[c]):
                break
            fkey[p] = fkey[c]
            fcls[p] = fcls[c]
            fpos[fcls[p]] = p
            p = c
        fkey[p] = key
        fcls[p] = k
        fpos[k] = p
        return size
    while p > 0:  # sooner (or new): sift up
        parent = (p - 1) >> 1
        kp = fkey[parent]
        if kp < key or (kp == key and fcls[parent] < k):
            break
        fkey[p] = kp
        fcls[p] = fcls[parent]
        fpos[fcls[p]] = p
        p = parent
    fkey[p] = key
    fcls[p] = k
    fpos[k] = p
    return size


def _iremove(fkey, fcls, fpos, size, k):  # type: ignore[no-untyped-def]
    """Take class ``k`` out of the indexed heap, if there; new size."""
    p = fpos[k]
    if p < 0:
        return size
    fpos[k] = -1
    size -= 1
    if p == size:
        return size
    last = fcls[size]
    key = fkey[size]
    fcls[p] = last
    fpos[last] = p
    parent = (p - 1) >> 1
    if p > 0 and (fkey[parent] > key or (fkey[parent] == key and fcls[parent] > last)):
        fkey[p] = math.inf  # _iset sifts it up
    else:
        fkey[p] = -math.inf  # _iset sifts it down
    return _iset(fkey, fcls, fpos, size, last, key)


def _waterfill(comp, ncomp, hptr, hlk, resid, mult, ccap, lptr, ws, wi, ep, rate_out):  # type: ignore[no-untyped-def]
    """Max-min rates of the classes ``comp[:ncomp]`` (see maxmin.waterfill).

    ``hlk[hptr[idx]:hptr[idx + 1]]`` are class ``comp[idx]``'s links, ``resid`` their
    capacity; a link's users go to its block of ``lptr`` (room for every class that
    crosses it). ``ws`` (floats) and ``wi`` (ints) are scratch space, ``ep`` a number
    not used in an earlier call.
    """
    n_links = resid.shape[0]
    n_inc = lptr[n_links]
    # scratch layout, indexed by link (no local renumbering)
    res = ws[0:n_links]
    hk = ws[n_links:]
    lstamp = wi[0:n_links]
    cnt = wi[n_links : 2 * n_links]
    ucnt = wi[2 * n_links : 3 * n_links]
    touched = wi[3 * n_links : 4 * n_links]
    off = 4 * n_links
    uflat = wi[off : off + n_inc]
    off += n_inc
    frozen = wi[off : off + ncomp]
    off += ncomp
    hv = wi[off:]
    nloc = 0
    size = 0
    for idx in range(ncomp):
        k = comp[idx]
        m = mult[k]
        frozen[idx] = 0
        fmin = math.inf
        for e in range(hptr[idx], hptr[idx + 1]):
            li = hlk[e]
            if lstamp[li] != ep:
                lstamp[li] = ep
                cnt[li] = 0
                res[li] = resid[li]
                ucnt[li] = 0
                touched[nloc] = li
                nloc += 1
            cnt[li] += m
            uflat[lptr[li] + ucnt[li]] = idx
            ucnt[li] += 1
            if resid[li] < fmin:
                fmin = resid[li]
        fc = ccap[k]
        if fmin > fc:  # no link of it is as narrow as its private cap
            size = _hpush(hk, hv, size, fc, -1 - idx)
    for a in range(nloc):
        li = touched[a]
        size = _hpush(hk, hv, size, res[li] / cnt[li], li)
    left = ncomp
    while left:
        level = hk[0]
        j = hv[0]
        size = _hpop(hk, hv, size)
        if j < 0:
            lo_u, hi_u = 0, 1
            share = level
        else:
            c = cnt[j]
            if c == 0:
                continue
            share = res[j] / c
            if share > level:
                size = _hpush(hk, hv, size, share, j)
                continue
            lo_u, hi_u = lptr[j], lptr[j] + ucnt[j]
        for pos in range(lo_u, hi_u):
            idx = -1 - j if j < 0 else uflat[pos]
            if frozen[idx]:
                continue
            frozen[idx] = 1
            left -= 1
            k = comp[idx]
            fc = ccap[k]
            r = share if share < fc else fc
            rate_out[idx] = r
            m = mult[k]
            used = r * m
            for e in range(hptr[idx], hptr[idx + 1]):
                j2 = hlk[e]
                x = res[j2] - used
                res[j2] = x if x > 0.0 else 0.0
                cnt[j2] -= m


def _reach(
    li,
    lo,
    cap,
    lptr,
    lnact,
    lslot,
    inc_cls,
    crate,
    mult,
    jstamp,
    jround,
    cseen,
    ep,
    cidx,
    comp,
    ncomp,
    lused,
    lmax,
):  # type: ignore[no-untyped-def]
    """Reach over link ``li`` to the classes an update must recompute with it; ``(ncomp, kept)``.

    If the link had slack (its flows' rates summed to less than its capacity), it was no
    class's bottleneck: none is added. Otherwise only the classes at its top rate (the
    ones it can bind), leaving out those that joined this round, whose rate is not an
    old max-min rate. Either way the classes left out are *kept* at their rates, and
    ``kept`` says whether any is at least ``lo`` (a slower one keeps its rate anyway);
    :func:`_widen` checks afterwards that the link binds none of them. Refreshes the
    link's ``lused`` and ``lmax`` when it visits its classes.
    """
    if lused[li] < cap[li] * (1 - _SLACK_RTOL):
        for p in range(lptr[li], lptr[li] + lnact[li]):
            k = inc_cls[lslot[p]]
            if cseen[k] != ep and crate[k] >= lo:
                return ncomp, True
        return ncomp, False
    tot = 0.0
    mx = 0.0
    top = 0.0
    for p in range(lptr[li], lptr[li] + lnact[li]):
        k = inc_cls[lslot[p]]
        r = crate[k]
        tot += r * mult[k]
        if r > mx:
            mx = r
        if r > top and jstamp[k] != jround:
            top = r
    lused[li] = tot
    lmax[li] = mx
    top *= 1 - _SLACK_RTOL
    if top < lo:
        top = lo
    kept = False
    for p in range(lptr[li], lptr[li] + lnact[li]):
        k = inc_cls[lslot[p]]
        if cseen[k] == ep:
            continue
        r = crate[k]
        if r >= top:
            cseen[k] = ep
            cidx[k] = ncomp
            comp[ncomp] = k
            ncomp += 1
        elif r >= lo:
            kept = True
    return ncomp, kept


def _widen(
    keepl,
    nkeep,
    lo,
    res,
    cap,
    lptr,
    lnact,
    lslot,
    inc_cls,
    cseen,
    ep,
    cidx,
    comp,
    ncomp,
    crate,
    rate,
):  # type: ignore[no-untyped-def]
    """Check the links that kept classes (``keepl[:nkeep]``); ``(nkeep, ncomp)``.

    The new rates (``rate[cidx[k]]`` for the recomputed classes, ``cseen[k] == ep``)
    stand unless they fill such a link (``res``, what the water-filling left of it, is
    about zero) while a kept class on it is faster than the recomputed classes there:
    the link would freeze them at a level below a class it carries. The kept classes of
    such a link (those at least ``lo``) join ``comp`` and it leaves the list; the update
    is sound once no class was added. See :meth:`resilientcc.sim.sharing.Sharing.update`.
    """
    n = 0
    for a in range(nkeep):
        li = keepl[a]
        if res[li] > cap[li] * _FULL_RTOL:
            keepl[n] = li
            n += 1
            continue
        kept = 0.0
        level = 0.0  # the rate of the classes it froze, if any: the fastest recomputed
        for p in range(lptr[li], lptr[li] + lnact[li]):
            k = inc_cls[lslot[p]]
            if cseen[k] == ep:
                r = rate[cidx[k]]
                if r > level:
                    level = r
            elif crate[k] > kept:
                kept = crate[k]
        if kept <= level * (1 + _KEEP_RTOL):
            keepl[n] = li
            n += 1
            continue
        for p in range(lptr[li], lptr[li] + lnact[li]):
            k = inc_cls[lslot[p]]
            if cseen[k] != ep and crate[k] >= lo:
                cseen[k] = ep
                cidx[k] = ncomp
                comp[ncomp] = k
                ncomp += 1
    return n, ncomp


def _fill_level(li, ell, cap, lptr, lnact, lslot, inc_cls, crate, mult, jstamp, jround):  # type: ignore[no-untyped-def]
    """A better lower bound than ``ell`` on the level at which link ``li`` fills.

    The level ``x`` solves ``sum(min(rate_k, x) * flows_k) + x * joining = capacity``
    over the classes active on the link (``joining``: the flows of classes that gained
    flows this round, which all rise with the level). Starting from any ``ell`` below
    it, ``(capacity - sum of the rates below ell) / (flows at or above ell)`` is again
    below it and no lower than ``ell``; two such steps are taken. A joining flow's
    max-min rate is at least the smallest of these levels over its links: at the level
    where it freezes, one of its links fills, with every class slower than that level
    at its old rate (progressive filling runs the same below it).
    """
    for _ in range(2):
        slow = 0.0
        rising = 0
        for p in range(lptr[li], lptr[li] + lnact[li]):
            k2 = inc_cls[lslot[p]]
            m2 = mult[k2]
            if jstamp[k2] != jround and crate[k2] < ell:
                slow += crate[k2] * m2
            else:
                rising += m2
        if rising == 0:
            return ell
        nxt = (cap[li] - slow) / rising
        if nxt <= ell:
            return ell
        ell = nxt
    return ell


def _loop(  # type: ignore[no-untyped-def]
    nbytes,
    lat,
    tcls,
    tcap,
    succ,
    pred,
    uptr,
    users,
    remdeps,
    first,
    clptr,
    clk,
    ccap,
    cap,
    captol,
    lptr,
    mptr,
    progress_every,
    drain_rtol,
    skip_cancelled,
    leave_out,
    start_t,
    txend_t,
    end_t,
):
    """The event loop; fills the three time arrays, returns (events, completed)."""
    n = nbytes.shape[0]
    n_cls = ccap.shape[0]
    n_links = cap.shape[0]
    inf = math.inf
    # --- sharing state
    demand = np.zeros(n_links)
    lcnt = np.zeros(n_links, dtype=np.int64)
    hot = np.zeros(n_links, dtype=np.bool_)
    lnact = np.zeros(n_links, dtype=np.int64)
    lslot = np.empty(max(lptr[n_links], 1), dtype=np.int64)  # incidences
    incpos = np.zeros(max(clptr[n_cls], 1), dtype=np.int64)
    inc_cls = np.empty(max(clptr[n_cls], 1), dtype=np.int64)
    for k in range(n_cls):
        for e in range(clptr[k], clptr[k + 1]):
            inc_cls[e] = k
    mult = np.zeros(n_cls, dtype=np.int64)
    crate = ccap.copy()
    # per link: sum of rate x flows over its active classes (kept as rates change, summed
    # afresh whenever a scan visits all of them) and a bound on their largest rate
    lused = np.zeros(n_links)
    lmax = np.zeros(n_links)
    lshort = np.zeros(n_links, dtype=np.int64)  # epoch in which the scan skipped it
    lsub = np.zeros(n_links)
    shortl = np.empty(n_links, dtype=np.int64)
    seedflag = np.zeros(n_links, dtype=np.bool_)
    seeds = np.empty(n_links, dtype=np.int64)
    nseeds = 0
    joined_cls = np.empty(max(n, 1), dtype=np.int64)
    njoined = 0
    jstamp = np.zeros(n_cls, dtype=np.int64)  # round in which a class gained flows
    jround = 0
    xstar = inf
    ep = 0
    wep = 0  # the water-filling's stamp (several calls per update)
    cseen = np.zeros(n_cls, dtype=np.int64)
    rseen = np.zeros(n_links, dtype=np.int64)
    resid = np.zeros(n_links)
    ws = np.zeros(2 * n_links + n_cls + 1)  # waterfill's scratch space
    wi = np.zeros(5 * n_links + lptr[n_links] + 2 * n_cls + 2, dtype=np.int64)
    comp = np.empty(max(n_cls, 1), dtype=np.int64)
    cidx = np.zeros(max(n_cls, 1), dtype=np.int64)  # each class's place in comp
    keepl = np.empty(max(n_links, 1), dtype=np.int64)  # links that kept classes out: checked
    hptr = np.zeros(max(n_cls, 1) + 1, dtype=np.int64)
    hlk = np.empty(max(clptr[n_cls], 1), dtype=np.int64)
    wrate = np.empty(max(n_cls, 1))
    chg_k = np.empty(max(n_cls, 1), dtype=np.int64)
    chg_old = np.empty(max(n_cls, 1))
    # --- members of each class: a heap by service target; the class's service (bytes
    # per flow) was svc at tsvc, growing at its rate since
    mcnt = np.zeros(n_cls, dtype=np.int64)
    mslot = np.empty(max(mptr[n_cls], 1), dtype=np.int64)
    mkey = np.zeros(max(mptr[n_cls], 1))  # the service target of each slot's flow
    svc = np.zeros(n_cls)
    tsvc = np.zeros(n_cls)
    # the finish heap: every class with flows, keyed by its next finish (indexed)
    fkey = np.zeros(max(n_cls, 1))
    fcls = np.zeros(max(n_cls, 1), dtype=np.int64)
    fpos = np.full(max(n_cls, 1), -1, dtype=np.int64)
    fsize = 0
    dirty = np.zeros(n_cls, dtype=np.bool_)  # its next finish must be set again
    dlist = np.empty(max(n_cls, 1), dtype=np.int64)
    ndirty = 0
    # --- transfers
    txdone = np.zeros(n, dtype=np.bool_)
    gheap = [(0.0, 0, 0)]
    gheap.pop()
    cheap = [(0.0, 0, 0)]
    cheap.pop()
    seq = 0
    t = 0.0
    events = 0
    completed = 0
    to_start = np.empty(max(n, 1), dtype=np.int64)
    nstart = first.shape[0]
    to_start[:nstart] = first
    joined = np.empty(max(n, 1), dtype=np.int64)
    done = np.empty(max(n, 1), dtype=np.int64)
    # --- classes touched since the last update: net flows gained, whether (and at what
    # rate) they emptied
    cdelta = np.zeros(max(n_cls, 1), dtype=np.int64)
    ctouch = np.empty(max(n_cls, 1), dtype=np.int64)
    tstamp = np.zeros(max(n_cls, 1), dtype=np.int64)
    emptied = np.zeros(max(n_cls, 1), dtype=np.bool_)
    srate = np.zeros(max(n_cls, 1))
    ntouch = 0
    tround = 1

    while True:
        nj = 0
        for a in range(nstart):
            i = to_start[a]
            start_t[i] = t
            k = tcls[i]
            if k < 0:
                fc = tcap[i]
                tf = t + nbytes[i] / fc if fc > 0 else inf
                seq += 1
                heapq.heappush(gheap, (tf, seq, i))
            else:
                # sharing.join(k)
                if mult[k] == 0:
                    for e in range(clptr[k], clptr[k + 1]):
                        li = clk[e]
                        p = lptr[li] + lnact[li]
                        lslot[p] = e
                        incpos[e] = p
                        lnact[li] += 1
                mult[k] += 1
                fc = ccap[k]
                rk = crate[k]
                for e in range(clptr[k], clptr[k + 1]):
                    li = clk[e]
                    lused[li] += rk
                    if rk > lmax[li]:
                        lmax[li] = rk
                    d = demand[li] + fc
                    demand[li] = d
                    lcnt[li] += 1
                    if d > captol[li]:
                        hot[li] = True
                        if not seedflag[li]:
                            seedflag[li] = True
                            seeds[nseeds] = li
                            nseeds += 1
                joined_cls[njoined] = k
                njoined += 1
                if tstamp[k] != tround:
                    tstamp[k] = tround
                    ctouch[ntouch] = k
                    ntouch += 1
                cdelta[k] += 1
                joined[nj] = i
                nj += 1
        nstart = 0
        # the same flows per class as at the last update: the same rates (Sharing.update)
        cancelled = skip_cancelled and ntouch > 0
        for a in range(ntouch):
            if cdelta[ctouch[a]] != 0:
                cancelled = False
                break
        for a in range(ntouch):
            k = ctouch[a]
            if cancelled and emptied[k]:  # back to its rate, and so its links' sums
                x = (srate[k] - crate[k]) * mult[k]
                for e in range(clptr[k], clptr[k + 1]):
                    lused[clk[e]] += x
                crate[k] = srate[k]
            cdelta[k] = 0
            emptied[k] = False
        ntouch = 0
        tround += 1
        if cancelled:
            for a in range(nseeds):
                seedflag[seeds[a]] = False
            nseeds = 0
            njoined = 0
        # --- sharing.update()
        nchg = 0
        # a lower bound on every joining flow's max-min rate: on each of its links, the
        # level at which the link would fill if the classes that gained flows rose with
        # it and every other class stayed at its rate (or the level, if lower); see
        # _fill_level. The plain fair share capacity / flows is its first iterate.
        jround += 1
        for a in range(njoined):
            jstamp[joined_cls[a]] = jround
        for a in range(njoined):
            k = joined_cls[a]
            lb = ccap[k]
            for e in range(clptr[k], clptr[k + 1]):
                li = clk[e]
                if hot[li] and cap[li] < lb * lcnt[li]:
                    ell = cap[li] / lcnt[li]
                    if ell < xstar:
                        ell = _fill_level(
                            li, ell, cap, lptr, lnact, lslot, inc_cls, crate, mult, jstamp, jround
                        )
                    if ell < lb:
                        lb = ell
            if lb < xstar:
                xstar = lb
        njoined = 0
        if nseeds:
            lo = xstar * (1 - _KEEP_RTOL) if xstar < inf else -1.0
            for s in range(nseeds):
                seedflag[seeds[s]] = False
            # first leaving out links with slack and slow classes on full links (widening
            # where that proves wrong, up to _MAX_WIDEN times), then, failing that, not
            for attempt in range(2 if leave_out else 1):
                ep += 1
                omitting = attempt == 0 and leave_out
                ncomp = 0
                for s in range(nseeds):
                    li = seeds[s]
                    for p in range(lptr[li], lptr[li] + lnact[li]):
                        k = inc_cls[lslot[p]]
                        # slower classes keep their rates; the joined ones are recomputed
                        if cseen[k] != ep and (crate[k] >= lo or jstamp[k] == jround):
                            cseen[k] = ep
                            cidx[k] = ncomp
                            comp[ncomp] = k
                            ncomp += 1
                nkeep = 0
                nh = 0
                nshort = 0
                nsub = 0  # the classes of comp already in lsub
                idx = 0
                widen = 0
                while True:
                    while idx < ncomp:
                        k = comp[idx]
                        hptr[idx] = nh
                        for e in range(clptr[k], clptr[k + 1]):
                            li = clk[e]
                            if not hot[li]:
                                continue
                            hlk[nh] = li
                            nh += 1
                            if rseen[li] == ep:
                                continue
                            rseen[li] = ep
                            if omitting or lmax[li] < lo:  # its sum minus comp's, below
                                lshort[li] = ep
                                lsub[li] = 0.0
                                shortl[nshort] = li
                                nshort += 1
                                if omitting and lmax[li] >= lo:
                                    ncomp, kept = _reach(
                                        li,
                                        lo,
                                        cap,
                                        lptr,
                                        lnact,
                                        lslot,
                                        inc_cls,
                                        crate,
                                        mult,
                                        jstamp,
                                        jround,
                                        cseen,
                                        ep,
                                        cidx,
                                        comp,
                                        ncomp,
                                        lused,
                                        lmax,
                                    )
                                    if kept:
                                        keepl[nkeep] = li
                                        nkeep += 1
                                continue
                            used = 0.0
                            tot = 0.0
                            mx = 0.0
                            for p in range(lptr[li], lptr[li] + lnact[li]):
                                k2 = inc_cls[lslot[p]]
                                rk = crate[k2]
                                x = rk * mult[k2]
                                tot += x
                                if rk > mx:
                                    mx = rk
                                if cseen[k2] == ep:
                                    continue
                                if rk >= lo:
                                    cseen[k2] = ep
                                    cidx[k2] = ncomp
                                    comp[ncomp] = k2
                                    ncomp += 1
                                else:
                                    used += x
                            lused[li] = tot
                            lmax[li] = mx
                            resid[li] = cap[li] - used if cap[li] > used else 0.0
                        idx += 1
                    hptr[ncomp] = nh
                    if nshort:
                        # comp's share of each short link: the classes added since the last
                        # water-filling (a link first reached now has only those)
                        for idx in range(nsub, ncomp):
                            k = comp[idx]
                            x = crate[k] * mult[k]
                            for e in range(hptr[idx], hptr[idx + 1]):
                                li = hlk[e]
                                if lshort[li] == ep:
                                    lsub[li] += x
                        for a in range(nshort):
                            li = shortl[a]
                            used = lused[li] - lsub[li]
                            if used < 0.0:
                                used = 0.0
                            resid[li] = cap[li] - used if cap[li] > used else 0.0
                    nsub = ncomp
                    wep += 1
                    _waterfill(comp, ncomp, hptr, hlk, resid, mult, ccap, lptr, ws, wi, wep, wrate)
                    idx = ncomp
                    if nkeep:
                        nkeep, ncomp = _widen(
                            keepl,
                            nkeep,
                            lo,
                            ws,
                            cap,
                            lptr,
                            lnact,
                            lslot,
                            inc_cls,
                            cseen,
                            ep,
                            cidx,
                            comp,
                            ncomp,
                            crate,
                            wrate,
                        )
                    if idx == ncomp:  # nothing was wrong
                        break
                    widen += 1
                    if widen > _MAX_WIDEN:
                        break
                if idx == ncomp:
                    break
            nseeds = 0
            for idx in range(ncomp):
                k = comp[idx]
                r = wrate[idx]
                old = crate[k]
                if r != old:
                    crate[k] = r
                    x = (r - old) * mult[k]
                    for e in range(clptr[k], clptr[k + 1]):
                        li = clk[e]
                        lused[li] += x
                        if r > lmax[li]:
                            lmax[li] = r
                    chg_k[nchg] = k
                    chg_old[nchg] = old
                    nchg += 1
        xstar = inf
        # new rates: bring the changed classes' service up to now at the old rate
        for c in range(nchg):
            k = chg_k[c]
            svc[k] += chg_old[c] * (t - tsvc[k])
            tsvc[k] = t
            if not dirty[k]:
                dirty[k] = True
                dlist[ndirty] = k
                ndirty += 1
        for a in range(nj):
            i = joined[a]
            k = tcls[i]
            if mcnt[k] == 0:
                svc[k] = 0.0
                tsvc[k] = t
            else:
                svc[k] += crate[k] * (t - tsvc[k])
                tsvc[k] = t
            base = mptr[k]
            _hpush(mkey[base:], mslot[base:], mcnt[k], svc[k] + nbytes[i], i)
            mcnt[k] += 1
            if not dirty[k]:
                dirty[k] = True
                dlist[ndirty] = k
                ndirty += 1
        # the next finish of every class that changed
        for a in range(ndirty):
            k = dlist[a]
            dirty[k] = False
            if mcnt[k] == 0:
                fsize = _iremove(fkey, fcls, fpos, fsize, k)
                continue
            r = crate[k]
            tf = tsvc[k] + (mkey[mptr[k]] - svc[k]) / r if r > 0 else inf
            fsize = _iset(fkey, fcls, fpos, fsize, k, tf)
        ndirty = 0

        tn = fkey[0] if fsize else inf
        if len(gheap) and gheap[0][0] < tn:
            tn = gheap[0][0]
        if len(cheap) and cheap[0][0] < tn:
            tn = cheap[0][0]
        if tn == inf:
            break
        events += 1
        if progress_every > 0 and events % progress_every == 0:
            with numba.objmode():
                _report_progress(completed, n, t)
        nd = 0
        bound = t + ((tn - t) * (1 + drain_rtol) + tn * 1e-13)
        while len(gheap) and gheap[0][0] <= bound:
            done[nd] = heapq.heappop(gheap)[2]
            nd += 1
        while fsize and fkey[0] <= bound:
            k = fcls[0]
            fsize = _iremove(fkey, fcls, fpos, fsize, k)
            dirty[k] = True
            dlist[ndirty] = k
            ndirty += 1
            r = crate[k]
            while mcnt[k]:  # every flow of the class that drains by the bound
                base = mptr[k]
                if tsvc[k] + (mkey[base] - svc[k]) / r > bound:
                    break
                i = mslot[base]
                _hpop(mkey[base:], mslot[base:], mcnt[k])
                mcnt[k] -= 1
                done[nd] = i
                nd += 1
                if tstamp[k] != tround:
                    tstamp[k] = tround
                    ctouch[ntouch] = k
                    ntouch += 1
                cdelta[k] -= 1
                # sharing.leave(k)
                if crate[k] < xstar:
                    xstar = crate[k]
                m = mult[k] - 1
                mult[k] = m
                fc = ccap[k]
                rk = crate[k]
                for e in range(clptr[k], clptr[k + 1]):
                    li = clk[e]
                    lused[li] -= rk
                    if hot[li] and not seedflag[li]:
                        seedflag[li] = True
                        seeds[nseeds] = li
                        nseeds += 1
                    c = lcnt[li] - 1
                    lcnt[li] = c
                    d = demand[li] - fc if c else 0.0
                    demand[li] = d
                    hot[li] = d > captol[li]
                    if m == 0:
                        pe = incpos[e]
                        lastp = lptr[li] + lnact[li] - 1
                        e2 = lslot[lastp]
                        lslot[pe] = e2
                        incpos[e2] = pe
                        lnact[li] -= 1
                        if lnact[li] == 0:
                            lused[li] = 0.0
                            lmax[li] = 0.0
                if m == 0:
                    if not emptied[k]:
                        emptied[k] = True
                        srate[k] = crate[k]
                    crate[k] = fc
        for a in range(nd):
            i = done[a]
            txdone[i] = True
            txend_t[i] = tn
            seq += 1
            heapq.heappush(cheap, (tn + lat[i], seq, i))
            s = succ[i]
            if s >= 0 and remdeps[s] == 0:
                to_start[nstart] = s
                nstart += 1
        t = tn
        limit = t * (1 + 1e-12) + 1e-300
        while len(cheap) and cheap[0][0] <= limit:
            tc, _, i = heapq.heappop(cheap)
            completed += 1
            end_t[i] = tc
            for q in range(uptr[i], uptr[i + 1]):
                u = users[q]
                d2 = remdeps[u] - 1
                remdeps[u] = d2
                if d2 == 0:
                    pu = pred[u]
                    if pu < 0 or txdone[pu]:
                        to_start[nstart] = u
                        nstart += 1
    return events, completed


#: the kernels, compiled by numba on the first run (:func:`_numba.compile_kernels`)
_KERNELS = (
    "_hpush",
    "_hpop",
    "_iset",
    "_iremove",
    "_waterfill",
    "_reach",
    "_widen",
    "_fill_level",
    "_loop",
)
#: those inlined into ``_loop`` (called once per update or per link: 8-10 % faster at
#: 1024 GPUs, against 2 s more to compile)
_INLINE = ("_reach", "_widen", "_waterfill", "_fill_level")


def run_compiled(
    prep: Any,
    zero_latency: bool,
    progress: Callable[[int, int, float], None] | None,
    progress_every: int,
    bind_rtol: float,
    drain_rtol: float,
    skip_cancelled: bool = True,
    leave_out: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Run the compiled loop on a ``flow._Prepared``.

    Returns:
        ``(start, txend, end, route latency, dependencies left, events)`` per transfer.
    """
    global _progress_cb
    if not available():
        raise RuntimeError("the compiled simulator needs numba (pip install numba)")
    _numba.compile_kernels(globals(), _KERNELS, _INLINE)
    n = prep.n
    lat = np.zeros(n) if zero_latency else prep.rlat[prep.route].astype(float)
    tcls = prep.route_class[prep.route].astype(np.int64)
    tcap = prep.rcap[prep.route].astype(float)
    n_cls = len(prep.class_links)
    n_links = len(prep.capacity)
    clen = np.array([len(c) for c in prep.class_links], dtype=np.int64)
    clptr = np.concatenate([[0], np.cumsum(clen)]).astype(np.int64)
    clk = np.fromiter((li for c in prep.class_links for li in c), np.int64, int(clen.sum()))
    ccap = np.array(prep.class_cap, dtype=float)
    cap = prep.capacity.astype(float)
    captol = cap * (1 + bind_rtol)
    lptr = np.concatenate([[0], np.cumsum(np.bincount(clk, minlength=n_links))]).astype(np.int64)
    in_cls = tcls[tcls >= 0]
    mptr = np.concatenate([[0], np.cumsum(np.bincount(in_cls, minlength=n_cls))]).astype(np.int64)
    remdeps = prep.ndeps.astype(np.int64).copy()
    first = np.flatnonzero((prep.ndeps == 0) & (prep.pred < 0)).astype(np.int64)
    start = np.full(n, np.nan)
    txend = np.full(n, np.nan)
    end = np.full(n, np.nan)
    _progress_cb = progress
    try:
        events, _ = _loop(
            prep.nbytes.astype(float),
            lat,
            tcls,
            tcap,
            prep.succ.astype(np.int64),
            prep.pred.astype(np.int64),
            prep.users_ptr.astype(np.int64),
            prep.users.astype(np.int64),
            remdeps,
            first,
            clptr,
            clk,
            ccap,
            cap,
            captol,
            lptr,
            mptr,
            progress_every if progress is not None else 0,
            drain_rtol,
            skip_cancelled,
            leave_out,
            start,
            txend,
            end,
        )
    finally:
        _progress_cb = None
    return start, txend, end, lat, remdeps, int(events)
