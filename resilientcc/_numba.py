"""numba, imported only when a compiled loop first runs.

The compiled loops (:mod:`resilientcc.sim.compiled`,
:mod:`resilientcc.schedules.executor_compiled`) define their kernels as plain functions
and call :func:`compile_kernels` before their first run, which rebinds the kernels in
their module to numba dispatchers (a kernel calling another finds the dispatcher there
when numba compiles it). So importing resilientcc does not import numba (about 0.2 s),
and commands that never run a compiled loop do not pay for it.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

__all__ = ["available", "compile_kernels"]

_numba: Any = None
_tried = False


def _load() -> Any:
    """The numba module, or None where it cannot be imported (tried once)."""
    global _numba, _tried
    if not _tried:
        _tried = True
        try:
            import numba

            _numba = numba
        except ImportError:  # pragma: no cover - exercised only where numba is missing
            _numba = None
    return _numba


def available() -> bool:
    """Whether numba can be imported (imports it on the first call)."""
    return _load() is not None


def compile_kernels(
    namespace: MutableMapping[str, Any], names: Sequence[str], inline: Sequence[str] = ()
) -> None:
    """Rebind ``namespace[name]`` to a numba dispatcher for every name (once), and
    ``namespace["numba"]`` to the module (for ``numba.objmode`` inside kernels).

    The kernels named in ``inline`` are inlined into their callers by numba (worth it
    for helpers with many array arguments called in an inner loop: each array is passed
    as several values). Machine code is cached on disk; where no cache location is
    writable the kernels compile in every process.
    """
    if namespace.get("_kernels_compiled"):
        return
    numba = _load()
    if numba is None:
        raise RuntimeError("the compiled loops need numba (pip install numba)")
    namespace["numba"] = numba
    for name in names:
        fn = namespace[name]
        how = "always" if name in inline else "never"
        try:
            namespace[name] = numba.njit(cache=True, inline=how)(fn)
        except RuntimeError:  # no writable cache location
            namespace[name] = numba.njit(inline=how)(fn)
    namespace["_kernels_compiled"] = True
