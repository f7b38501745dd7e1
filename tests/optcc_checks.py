"""Shared check for the OptCC tests: a schedule near the bound and ahead of its rivals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

from resilientcc.bounds import lower_bound
from resilientcc.schedules.ir import Schedule, Transfer
from resilientcc.schedules.optcc import optcc
from resilientcc.sim import simulate
from resilientcc.topology.model import Topology


def assert_optcc_near_bound(
    topo: Topology,
    size: Fraction,
    variant: str,
    factor: float,
    rivals: Sequence[Callable[[Topology, Fraction], Schedule]],
) -> None:
    """OptCC (its exact executor check on) runs ``variant``, simulates between the bound and
    ``factor`` times it, and faster than every schedule in ``rivals``."""
    sched = optcc(topo, size)
    assert sched.meta_get("variant") == variant
    t = simulate(sched, topo).time_s
    bound = float(lower_bound(topo, size).seconds)
    assert bound <= t <= factor * bound
    for rival in rivals:
        assert t < simulate(rival(topo, size), topo).time_s, rival.__name__


def fan_out(sched: Schedule, gpus: int) -> dict[int, set[int]]:
    """For every chunk that server 0 (the degraded one) sends over the network, the
    servers it sends it to: one for its partials, every other server for its own results."""
    fans: dict[int, set[int]] = {}
    for t in sched.transfers:
        if t.src // gpus == 0 and t.dst // gpus != 0:
            fans.setdefault(t.chunk, set()).add(t.dst // gpus)
    return fans


def assert_own_results_lagged(
    sched: Schedule, gpus: int, pieces: int, lag: int, piece_of: Callable[[int], int]
) -> None:
    """Server 0 sends each of its own results (a chunk it sends to more than one server)
    only after its partials (chunks it sends to one server) of piece ``k + lag`` (the last
    piece's at the end) from the same GPU, where ``k`` is the result's piece."""
    fans = fan_out(sched, gpus)
    by_id = {t.id: t for t in sched.transfers}

    def out_of_0(t: Transfer) -> bool:
        return t.src // gpus == 0 and t.dst // gpus != 0

    results = [t for t in sched.transfers if out_of_0(t) and len(fans[t.chunk]) > 1]
    assert results
    for t in results:
        gates = [by_id[d] for d in t.deps if out_of_0(by_id[d])]
        assert {g.src for g in gates} == {t.src}, t
        assert all(len(fans[g.chunk]) == 1 for g in gates)  # partials, not results
        assert {piece_of(g.chunk) for g in gates} == {min(pieces - 1, piece_of(t.chunk) + lag)}
