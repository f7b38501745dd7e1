"""Public entry points: :func:`lower_bound`, :func:`fault_free_ring_time`,
:func:`fault_free_lower_bound`, :func:`reference_bandwidth`."""

from __future__ import annotations

import time
from dataclasses import replace
from fractions import Fraction

from resilientcc.bounds.result import BoundConstraint, BoundResult
from resilientcc.errors import BoundError, InputError
from resilientcc.topology.builders import hierarchical, switch_model
from resilientcc.topology.model import GPU, NIC, Topology
from resilientcc.units import to_size

__all__ = [
    "METHODS",
    "fault_free_lower_bound",
    "fault_free_ring_time",
    "fault_free_topology",
    "lower_bound",
    "reference_bandwidth",
    "server_level_bandwidths",
    "switch_model_bandwidths",
]

METHODS = ("auto", "closed_form", "lp")


def _size(size: object) -> Fraction:
    return to_size(size)


def switch_model_bandwidths(topo: Topology) -> tuple[list[Fraction], list[Fraction]] | None:
    """``(egress, ingress)`` per rank if ``topo`` is a switch model, else ``None``.

    A switch model: GPUs plus exactly one other vertex (the switch), every link joins a
    GPU and the switch (parallel links add up).
    """
    others = [nd for nd in topo.nodes if nd.kind != GPU and not nd.failed]
    if len(others) != 1:
        return None
    sw = others[0].name
    rank = {g.name: g.rank for g in topo.gpus}
    p = topo.num_ranks
    eg = [Fraction(0)] * p
    ing = [Fraction(0)] * p
    for lk in topo.links:
        if lk.dst == sw and lk.src in rank:
            eg[rank[lk.src]] += lk.capacity  # type: ignore[index]
        elif lk.src == sw and lk.dst in rank:
            ing[rank[lk.dst]] += lk.capacity  # type: ignore[index]
        else:
            return None
    return eg, ing


def server_level_bandwidths(topo: Topology) -> tuple[list[Fraction], list[Fraction]] | None:
    """Per-server ``(egress, ingress)`` of the server-level switch model, or ``None``.

    Contract every server island (all nodes with that ``server``) into one endpoint and
    every node without a server (fabric switches) into one switch. This is a contraction,
    so the closed form of the resulting switch model is a valid (possibly weaker) lower
    bound for the original topology (docs, "Lower bounds", contraction). ``None`` when
    some link joins two islands directly or an island has no GPU.
    """
    servers = topo.servers
    if len(servers) < 2 or any(g.server is None for g in topo.gpus):
        return None
    island = {nd.name: nd.server for nd in topo.nodes if nd.server is not None}
    if set(island.values()) != set(servers):
        return None
    pos = {s: i for i, s in enumerate(servers)}
    eg = [Fraction(0)] * len(servers)
    ing = [Fraction(0)] * len(servers)
    for lk in topo.links:
        a, b = island.get(lk.src), island.get(lk.dst)
        if a is not None and b is not None:
            if a != b:
                return None
            continue
        if a is not None:
            eg[pos[a]] += lk.capacity
        elif b is not None:
            ing[pos[b]] += lk.capacity
    if any(x <= 0 for x in (*eg, *ing)):
        return None
    return eg, ing


def _hier_params(topo: Topology) -> dict[str, str] | None:
    if topo.param("builder") != "hierarchical":
        return None
    keys = (
        "servers",
        "gpus_per_server",
        "nics_per_server",
        "nic_bw",
        "nvlink_bw",
        "pcie_bw",
        "fabric",
    )
    params = {k: topo.param(k) for k in keys}
    if any(v is None for v in params.values()):
        return None
    return {k: str(v) for k, v in params.items()}


def reference_bandwidth(topo: Topology) -> Fraction:
    """B, the bandwidth the bounds are normalised by and NCCL's flat ring runs at.

    * a hierarchical cluster (built by :func:`~resilientcc.topology.hierarchical`): the
      network bandwidth of a healthy server, ``nics_per_server * nic_bw`` (as if every NIC
      were up), capped by the per-GPU NVLink bandwidth when that is smaller (a GPU's ring
      neighbours talk over NVLink); for a single server, the NVLink bandwidth;
    * a switch model: the largest endpoint egress (the healthy endpoint);
    * any other topology with NICs: the largest ``server_egress`` over servers;
      without NICs: the largest total capacity leaving one GPU.

    Examples:
        >>> reference_bandwidth(hierarchical(4, 8))
        Fraction(400000000000, 1)
    """
    hp = _hier_params(topo)
    if hp is not None:
        nvl = Fraction(hp["nvlink_bw"])
        if int(hp["servers"]) == 1 and int(hp["gpus_per_server"]) > 1:
            return nvl  # a single server: the ring never touches the network
        b = int(hp["nics_per_server"]) * Fraction(hp["nic_bw"])
        if int(hp["gpus_per_server"]) > 1:
            b = min(b, nvl)
        return b
    sm = switch_model_bandwidths(topo)
    if sm is not None:
        return max(sm[0])
    if any(nd.kind == NIC for nd in topo.nodes):
        return max(topo.server_egress(s) for s in topo.nics_of_server)
    return max(
        sum((topo.links[i].capacity for i in topo.out_links[g.name]), Fraction(0))
        for g in topo.gpus
    )


def _closed_form(
    topo: Topology,
    m: Fraction,
    bw: tuple[list[Fraction], list[Fraction]],
    server_level: bool = False,
) -> BoundResult:
    from resilientcc.bounds.closed_form import switch_bound

    start = time.perf_counter()
    eg, ing = bw
    secs, binding = switch_bound(eg, ing, m)
    if server_level:
        binding = binding.replace("endpoint", "server") + " (server-level switch model)"
    bref = reference_bandwidth(topo)
    c = BoundConstraint(
        "gossip" if binding.startswith("gossip") else "endpoint", binding, 1, Fraction(0), secs, 1.0
    )
    return BoundResult(
        seconds=secs,
        method="closed_form",
        binding=binding,
        size=m,
        reference_bandwidth=bref,
        normalized=secs / (m / bref),
        constraints=(c,),
        solve_time_s=time.perf_counter() - start,
    )


def lower_bound(topology: Topology, size: object, method: str = "auto") -> BoundResult:
    """Lower bound on the completion time of an AllReduce of ``size`` bytes.

    Args:
        topology: the cluster (failures applied).
        size: M, bytes (``int``/``Fraction``) or a string like ``"1GiB"``.
        method: ``"closed_form"`` (a switch model; on a cluster, the server-level switch
            model, see :func:`server_level_bandwidths`), ``"lp"`` (any topology;
            server islands are contracted on large graphs) or ``"auto"`` (closed form for a
            switch model, else the LP). ``"closed-form"`` is accepted too.

    Returns:
        A :class:`BoundResult`; ``.seconds`` is an exact ``Fraction``.

    Examples:
        >>> from resilientcc.topology import uniform_switch
        >>> lower_bound(uniform_switch(4, 100, "1/2"), 100).seconds
        Fraction(2, 1)
    """
    m = _size(size)
    meth = method.replace("-", "_") if isinstance(method, str) else method
    if meth not in METHODS:
        raise InputError(f"method: must be one of auto, closed-form, lp; got {method!r}")
    sm = switch_model_bandwidths(topology)
    if meth == "closed_form":
        if sm is not None:
            return _closed_form(topology, m, sm)
        sl = server_level_bandwidths(topology)
        if sl is None:
            raise BoundError(
                "method closed-form: needs a switch model or servers joined only through "
                "fabric switches; use --method lp"
            )
        res = _closed_form(topology, m, sl, server_level=True)
        return replace(
            res,
            notes=(
                "closed form of the server-level switch model (server islands and fabric "
                "switches contracted): a valid lower bound, possibly below the LP",
            ),
        )
    if meth == "auto" and sm is not None:
        return _closed_form(topology, m, sm)
    from resilientcc.bounds.lp import lp_bound

    return lp_bound(topology, m)


def fault_free_ring_time(topology: Topology, size: object) -> Fraction:
    """Bandwidth term of NCCL's flat ring over all ``p`` GPUs with no failure:
    ``2(p-1)/p * M / B`` with B = :func:`reference_bandwidth`.

    Examples:
        >>> fault_free_ring_time(hierarchical(4, 8), 400 * 10**9)
        Fraction(31, 16)
    """
    m = _size(size)
    p = topology.num_ranks
    if p < 2:
        return Fraction(0)
    return Fraction(2 * (p - 1), p) * m / reference_bandwidth(topology)


def fault_free_topology(topology: Topology) -> Topology:
    """The same cluster with no failure.

    Hierarchical clusters are rebuilt from ``topology.params``; a switch model gets every
    endpoint at the largest egress and ingress; any other topology is returned as is when it
    records no failure, else :class:`BoundError` (failed links cannot be restored).
    """
    hp = _hier_params(topology)
    if hp is not None:
        return hierarchical(
            int(hp["servers"]),
            int(hp["gpus_per_server"]),
            int(hp["nics_per_server"]),
            nic_bw=Fraction(hp["nic_bw"]),
            nvlink_bw=Fraction(hp["nvlink_bw"]),
            pcie_bw=Fraction(hp["pcie_bw"]),
            fabric=hp["fabric"],
        )
    sm = switch_model_bandwidths(topology)
    if sm is not None:
        p = topology.num_ranks
        return switch_model([max(sm[0])] * p, [max(sm[1])] * p)
    if not topology.failures:
        return topology
    raise BoundError(
        "fault-free bound: cannot reconstruct the healthy cluster of a custom topology with "
        "failures (save it before the failures, or use a builder)"
    )


def fault_free_lower_bound(topology: Topology, size: object, method: str = "auto") -> BoundResult:
    """:func:`lower_bound` of the same cluster with no failure (see :func:`fault_free_topology`)."""
    return lower_bound(fault_free_topology(topology), size, method)
