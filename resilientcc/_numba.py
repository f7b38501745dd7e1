"""numba, where it can be imported: the one place that imports it and compiles with it.

The compiled loops (:mod:`resilientcc.sim.compiled`,
:mod:`resilientcc.schedules.executor_compiled`) decorate their kernels with :func:`jit`;
without numba it returns the function unchanged and :data:`AVAILABLE` is false, and
their callers run the pure-Python loops instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AVAILABLE", "jit", "numba"]

try:
    import numba

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None  # type: ignore[assignment]
    AVAILABLE = False


def jit(fn: Any) -> Any:
    """``numba.njit`` with machine code cached on disk (compiled in every process where no
    cache location is writable); ``fn`` itself without numba."""
    if not AVAILABLE:
        return fn
    try:
        return numba.njit(cache=True)(fn)
    except RuntimeError:  # no writable cache location
        return numba.njit(fn)
