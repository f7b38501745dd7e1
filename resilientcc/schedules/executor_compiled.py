"""The exact executor's per-chunk loop compiled with numba (same answers, faster).

:func:`run_chunks` does what :func:`resilientcc.schedules.executor.execute` does after
ordering the transfers: for every chunk, run its transfers on multiplicity vectors and
list the wrong final multiplicities, in the same order. Vectors live in a pool: a
buffer holds either ``-1 - u`` (the unit vector ``e_u``, never written) or the index of
a pool row; a copy shares its source's row, a reduce fills a new row, and rows are never
changed once filled. Without numba :func:`available` is false and the executor runs its
Python loop. ``tests/test_executor.py`` compares both with a dense matrix per chunk.
"""

from __future__ import annotations

import numpy as np

from resilientcc import _numba

__all__ = ["available", "run_chunks"]


def available() -> bool:
    """Whether numba can be imported, so that :func:`run_chunks` can run."""
    return _numba.available()


def _chunks(p, cptr, csrc, cdst, ccopy, pool_rows, max_viol, out):  # type: ignore[no-untyped-def]
    """Run every chunk; fills ``out`` (rank, chunk, contribution, multiplicity) rows.

    Returns ``(wrong multiplicities in all, rows of out filled)``.
    """
    nchunks = cptr.shape[0] - 1
    pool = np.zeros((max(pool_rows, 1), p), dtype=np.int64)
    rows = np.empty(p, dtype=np.int64)
    nbad = np.empty(max(pool_rows, 1), dtype=np.int64)
    stamp = np.full(max(pool_rows, 1), -1, dtype=np.int64)
    count = 0
    nviol = 0
    for c in range(nchunks):
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
    _numba.compile_kernels(globals(), ("_chunks",))
    count = count.astype(np.int64)
    total = int(count.sum())
    owner = np.repeat(np.arange(len(count)), count)  # the transfer of every (transfer, chunk)
    offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    ch = chunk.astype(np.int64)[owner] + offset
    copy = is_copy.astype(np.bool_)[owner]
    pool_rows = int(np.bincount(ch[~copy], minlength=nchunks).max()) if nchunks else 0
    order = np.argsort(ch, kind="stable")  # by chunk, execution order within a chunk
    owner = owner[order]
    cptr = np.concatenate([[0], np.cumsum(np.bincount(ch, minlength=nchunks))]).astype(np.int64)
    ccopy = copy[order]
    out = np.zeros((max(max_violations, 0), 4), dtype=np.int64)
    n, nviol = _chunks(
        p,
        cptr,
        src.astype(np.int64)[owner],
        dst.astype(np.int64)[owner],
        ccopy,
        pool_rows,
        max(max_violations, 0),
        out,
    )
    return int(n), out[:nviol]
