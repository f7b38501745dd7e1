"""The exact executor's per-chunk loop compiled with numba (same answers, faster).

:func:`run_chunks` does what :func:`resilientcc.schedules.executor.execute` does after
ordering the transfers: for every chunk, run its transfers on multiplicity vectors and
list the wrong final multiplicities, in the same order. Vectors live in a pool: a
buffer holds either ``-1 - u`` (the unit vector ``e_u``, never written) or the index of
a pool row; a copy shares its source's row, a reduce fills a new row, and rows are never
changed once filled. Without numba :func:`available` is false and the executor runs its
Python loop. ``tests/test_executor.py`` compares both with a dense matrix per chunk.

Chunks that see the same sequence of operations (the same ``(src, dst, copy)`` in the
same order) end in the same state, and pipelined schedules repeat one pattern piece
after piece: :func:`_twins` groups the chunks by a hash of their sequence, confirms
every member against its group's first chunk element by element, and :func:`_chunks`
runs only the first chunk of each group, listing its wrong multiplicities again for
the others (OptCC on 64 × 8 GPUs runs 504 of its 8,064 chunks; on 128 × 8 GPUs the
loop takes 1.1 s instead of 18.4 s).
"""

from __future__ import annotations

import numpy as np

from resilientcc import _numba

__all__ = ["available", "run_chunks"]


def available() -> bool:
    """Whether numba can be imported, so that :func:`run_chunks` can run."""
    return _numba.available()


def _by_chunk(ch, nchunks):  # type: ignore[no-untyped-def]
    """A stable order of ``ch`` by value (a counting sort; values in ``[0, nchunks)``)."""
    nxt = np.zeros(nchunks + 1, dtype=np.int64)
    for x in ch:
        nxt[x + 1] += 1
    for c in range(nchunks):
        nxt[c + 1] += nxt[c]
    cptr = nxt.copy()
    order = np.empty(ch.shape[0], dtype=np.int64)
    for i in range(ch.shape[0]):
        x = ch[i]
        order[nxt[x]] = i
        nxt[x] += 1
    return order, cptr


def _hashes(p, cptr, csrc, cdst, ccopy):  # type: ignore[no-untyped-def]
    """Two 64-bit hashes of every chunk's sequence of operations (the second seeded
    with its length); each operation is coded as ``(src · p + dst) · 2 + copy``.
    """
    nchunks = cptr.shape[0] - 1
    h1 = np.empty(nchunks, dtype=np.uint64)
    h2 = np.empty(nchunks, dtype=np.uint64)
    m1 = np.uint64(0x100000001B3)
    m2 = np.uint64(0x9E3779B97F4A7C15)
    for c in range(nchunks):
        a = np.uint64(0xCBF29CE484222325)
        b = np.uint64(cptr[c + 1] - cptr[c])
        for e in range(cptr[c], cptr[c + 1]):
            code = np.uint64((csrc[e] * p + cdst[e]) * 2 + (1 if ccopy[e] else 0))
            a = (a ^ code) * m1
            b = (b + code + np.uint64(1)) * m2
            b ^= b >> np.uint64(29)
        h1[c] = a
        h2[c] = b
    return h1, h2


def _confirm(cptr, csrc, cdst, ccopy, cand):  # type: ignore[no-untyped-def]
    """``cand`` with every chunk whose sequence differs from its candidate's set to itself."""
    twin = cand.copy()
    for c in range(cand.shape[0]):
        f = cand[c]
        if f == c:
            continue
        n = cptr[c + 1] - cptr[c]
        same = n == cptr[f + 1] - cptr[f]
        if same:
            for j in range(n):
                e = cptr[c] + j
                g = cptr[f] + j
                if csrc[e] != csrc[g] or cdst[e] != cdst[g] or ccopy[e] != ccopy[g]:
                    same = False
                    break
        if not same:
            twin[c] = c
    return twin


def _twins(
    p: int, cptr: np.ndarray, csrc: np.ndarray, cdst: np.ndarray, ccopy: np.ndarray
) -> np.ndarray:
    """``twin[c]``: the first chunk whose sequence of operations equals chunk ``c``'s.

    Chunks are grouped by two 64-bit hashes of their sequences (:func:`_hashes`); each
    is then compared element by element with its group's first (:func:`_confirm`), and
    one that differs (a collision of both hashes) stands for itself.
    """
    nchunks = cptr.shape[0] - 1
    if nchunks == 0:
        return np.zeros(0, dtype=np.int64)
    h1, h2 = _hashes(p, cptr, csrc, cdst, ccopy)
    idx = np.arange(nchunks, dtype=np.int64)
    order = np.lexsort((idx, h2, h1))  # groups of equal hashes, each in chunk order
    new = np.ones(nchunks, dtype=np.bool_)
    new[1:] = (h1[order][1:] != h1[order][:-1]) | (h2[order][1:] != h2[order][:-1])
    heads = order[new]  # the first chunk of every group
    cand = np.empty(nchunks, dtype=np.int64)
    cand[order] = heads[np.cumsum(new) - 1]
    return _confirm(cptr, csrc, cdst, ccopy, cand)  # type: ignore[no-any-return]


def _chunks(p, cptr, csrc, cdst, ccopy, twin, pool_rows, max_viol, out):  # type: ignore[no-untyped-def]
    """Run every chunk; fills ``out`` (rank, chunk, contribution, multiplicity) rows.

    A chunk whose ``twin`` is an earlier chunk is not run: it ends as its twin did, so
    it adds its twin's count and lists its twin's rows again under its own number (all
    of them: had the twin's been cut at ``max_viol``, nothing more would be listed).

    Returns ``(wrong multiplicities in all, rows of out filled)``.
    """
    nchunks = cptr.shape[0] - 1
    pool = np.zeros((max(pool_rows, 1), p), dtype=np.int64)
    rows = np.empty(p, dtype=np.int64)
    nbad = np.empty(max(pool_rows, 1), dtype=np.int64)
    stamp = np.full(max(pool_rows, 1), -1, dtype=np.int64)
    ccount = np.zeros(nchunks, dtype=np.int64)  # each chunk's wrong multiplicities
    vfrom = np.zeros(nchunks, dtype=np.int64)  # and where its rows are in out
    vto = np.zeros(nchunks, dtype=np.int64)
    count = 0
    nviol = 0
    for c in range(nchunks):
        f = twin[c]
        if f != c:
            count += ccount[f]
            vfrom[c] = nviol
            for x in range(vfrom[f], vto[f]):
                if nviol >= max_viol:
                    break
                for y in range(4):
                    out[nviol, y] = out[x, y]
                out[nviol, 1] = c
                nviol += 1
            vto[c] = nviol
            continue
        before = count
        vfrom[c] = nviol
        for r in range(p):
            rows[r] = -1 - r
        used = 0
        for e in range(cptr[c], cptr[c + 1]):
            src = csrc[e]
            dst = cdst[e]
            if ccopy[e]:
                rows[dst] = rows[src]
                continue
            v = used
            used += 1
            a = rows[dst]
            if a >= 0:
                pool[v, :] = pool[a, :]
            else:
                pool[v, :] = 0
                pool[v, -1 - a] = 1
            b = rows[src]
            if b >= 0:
                pool[v, :] += pool[b, :]
            else:
                pool[v, -1 - b] += 1
            rows[dst] = v
        for r in range(p):
            x = rows[r]
            if x < 0:
                u = -1 - x
                count += p - 1
                for k in range(p):
                    if k != u and nviol < max_viol:
                        out[nviol, 0] = r
                        out[nviol, 1] = c
                        out[nviol, 2] = k
                        out[nviol, 3] = 0
                        nviol += 1
                continue
            if stamp[x] != c:
                stamp[x] = c
                nb = 0
                for k in range(p):
                    if pool[x, k] != 1:
                        nb += 1
                nbad[x] = nb
            count += nbad[x]
            if nbad[x] and nviol < max_viol:
                for k in range(p):
                    if pool[x, k] != 1 and nviol < max_viol:
                        out[nviol, 0] = r
                        out[nviol, 1] = c
                        out[nviol, 2] = k
                        out[nviol, 3] = pool[x, k]
                        nviol += 1
        ccount[c] = count - before
        vto[c] = nviol
    return count, nviol


def run_chunks(
    p: int,
    nchunks: int,
    chunk: np.ndarray,
    count: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    is_copy: np.ndarray,
    max_violations: int,
) -> tuple[int, np.ndarray]:
    """Run the transfers (given in execution order) on every chunk.

    Args:
        p: ranks.
        nchunks: chunks of the schedule.
        chunk: each transfer's first chunk, in execution order.
        count: how many chunks it carries (``chunk`` to ``chunk + count - 1``).
        src: its source rank.
        dst: its destination rank.
        is_copy: whether it copies (else it reduces).
        max_violations: how many wrong multiplicities to list.

    Returns:
        The number of wrong multiplicities and the first ``max_violations`` of them as
        rows ``(rank, chunk, contribution, multiplicity)``, ordered by chunk, rank and
        contribution.
    """
    if not available():
        raise RuntimeError("the compiled executor needs numba")
    _numba.compile_kernels(globals(), ("_by_chunk", "_hashes", "_confirm", "_chunks"))
    count = count.astype(np.int64)
    total = int(count.sum())
    owner = np.repeat(np.arange(len(count)), count)  # the transfer of every (transfer, chunk)
    offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    ch = chunk.astype(np.int64)[owner] + offset
    copy = is_copy.astype(np.bool_)[owner]
    pool_rows = int(np.bincount(ch[~copy], minlength=nchunks).max()) if nchunks else 0
    order, cptr = _by_chunk(ch, nchunks)  # by chunk, execution order within a chunk
    owner = owner[order]
    ccopy = copy[order]
    out = np.zeros((max(max_violations, 0), 4), dtype=np.int64)
    csrc = src.astype(np.int64)[owner]
    cdst = dst.astype(np.int64)[owner]
    twin = _twins(p, cptr, csrc, cdst, ccopy)  # each group of like chunks runs once
    n, nviol = _chunks(
        p,
        cptr,
        csrc,
        cdst,
        ccopy,
        twin,
        pool_rows,
        max(max_violations, 0),
        out,
    )
    return int(n), out[:nviol]
