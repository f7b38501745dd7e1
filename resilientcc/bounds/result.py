"""Result types of the lower-bound computations."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from resilientcc.units import format_time

__all__ = ["BoundConstraint", "BoundResult", "format_bandwidth"]


def format_bandwidth(bps: Fraction | float) -> str:
    """Bandwidth in GB/s without exponent notation, e.g. ``'200 GB/s'``, ``'15800 GB/s'``."""
    x = float(bps)
    if abs(x) >= 1e9:
        return f"{x / 1e9:.6g} GB/s"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.6g} MB/s"
    return f"{x:.6g} B/s"


@dataclass(frozen=True)
class BoundConstraint:
    """One constraint of the final LP with its dual value.

    The constraint reads ``sum(f_e for e in links) >= rhs * M`` with ``f_e <= c_e T``, so
    alone it proves ``T >= rhs * M / capacity`` (:attr:`seconds`).

    Attributes:
        kind: ``"cut"`` (a vertex set S that splits the GPUs: load leaving S ≥ M),
            ``"partition-out"`` / ``"partition-in"`` (k groups: load leaving / entering the
            groups ≥ 2(k−1)M), or ``"endpoint"`` / ``"gossip"`` for the closed form.
        description: human-readable, e.g. ``"cut: the 8 GPUs of server 0 must send M out
            over 200 GB/s"``.
        rhs: the right-hand side as a multiple of M (1 for a cut, 2(k−1) for k groups).
        capacity: total capacity (bytes/s) of the links the constraint sums over.
        seconds: ``rhs * M / capacity``, exact.
        dual: the LP dual value (0 for constraints that do not bind).
        links: indices of the links (into the LP's graph).
    """

    kind: str
    description: str
    rhs: int
    capacity: Fraction
    seconds: Fraction
    dual: float = 0.0
    links: tuple[int, ...] = ()


@dataclass(frozen=True)
class BoundResult:
    """A lower bound on the AllReduce completion time (bandwidth term).

    Attributes:
        seconds: the bound (exact :class:`Fraction` when ``exact``, else ``float``).
        method: ``"closed_form"`` or ``"lp"``.
        binding: the binding constraint, human-readable.
        size: the message size M (bytes).
        reference_bandwidth: B (bytes/s): the healthy per-server network bandwidth
            (see :func:`resilientcc.bounds.reference_bandwidth`).
        normalized: ``seconds / (M / B)``, the bound as a multiple of M/B.
        exact: whether ``seconds`` is exact.
        constraints: the final constraints (LP: with duals; the certificate).
        iterations: cut-generation rounds (LP).
        solve_time_s: wall time of the computation.
        num_cuts, num_partitions: cut and partition constraints in the final LP.
        contracted: the LP ran on the graph with server islands contracted (a relaxation).
        certified: for a contracted LP, whether the lifted solution was checked against the
            cut and partition separation on the original graph (``True``: no violated
            constraint found; ``None``: not checked).
        partition_search: ``"exact"`` (all partitions enumerated), ``"heuristic"``, or ``""``.
        lp_value: the LP optimum in seconds as a float (solver precision).
        notes: anything a reader should know.
    """

    seconds: Fraction | float
    method: str
    binding: str
    size: Fraction
    reference_bandwidth: Fraction
    normalized: Fraction | float
    exact: bool = True
    constraints: tuple[BoundConstraint, ...] = ()
    iterations: int = 0
    solve_time_s: float = 0.0
    num_cuts: int = 0
    num_partitions: int = 0
    contracted: bool = False
    certified: bool | None = None
    partition_search: str = ""
    lp_value: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def duals(self) -> tuple[float, ...]:
        """Dual values of :attr:`constraints`, in order."""
        return tuple(c.dual for c in self.constraints)

    def certificate(self) -> str:
        """The dual certificate in words: a nonnegative combination of constraints whose
        weighted right-hand sides add up to the bound."""
        used = [c for c in self.constraints if c.dual > 1e-12]
        if not used:
            return f"T >= {format_time(self.seconds)}: {self.binding}"
        total = sum(c.dual * c.rhs for c in used)
        parts = [f"{c.dual * c.rhs / total:.4g} x [{c.description}]" for c in used]
        return f"T >= {format_time(self.seconds)} from " + " + ".join(parts)
