"""Builders for the topologies users have: H100-class clusters and switch models.

Defaults follow DESIGN.md §7: 400 Gb/s NICs (50 GB/s), NVLink 450 GB/s per
direction per GPU through an NVSwitch, PCIe Gen5 x16 (64 GB/s) between a GPU and
its NIC, and latencies that add up to NCCL's cost-model constants (an NVLink hop
GPU→NVSwitch→GPU is 3.4 µs, an inter-server hop GPU→NIC→fabric→NIC→GPU is 14 µs).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from resilientcc.errors import TopologyError
from resilientcc.topology.model import GPU, MAX_GPUS, NIC, SWITCH, Link, Node, Topology
from resilientcc.units import as_fraction, check_bandwidth_range, parse_bandwidth, parse_time

__all__ = [
    "DEFAULT_NIC_BW",
    "DEFAULT_NVLINK_BW",
    "DEFAULT_PCIE_BW",
    "hierarchical",
    "switch_model",
    "uniform_switch",
]

DEFAULT_NIC_BW = Fraction(50 * 10**9)  # 400 Gb/s
DEFAULT_NVLINK_BW = Fraction(450 * 10**9)  # H100 SXM, per direction
DEFAULT_PCIE_BW = Fraction(64 * 10**9)  # PCIe Gen5 x16
DEFAULT_NVLINK_LATENCY = Fraction(17, 10**7)  # 1.7 us per link, 3.4 us per GPU-GPU hop
DEFAULT_PCIE_LATENCY = Fraction(1, 10**6)  # 1 us
DEFAULT_NET_LATENCY = Fraction(6, 10**6)  # 6 us per link; GPU->GPU over the network: 14 us


def _bw(value: object, what: str) -> Fraction:
    if isinstance(value, str):
        return parse_bandwidth(value, what)
    frac = as_fraction(value, what)
    if frac <= 0:
        raise TopologyError(f"{what}: must be positive, got {value!r}")
    check_bandwidth_range(frac, what, value, error=TopologyError)
    return frac


def _lat(value: object, what: str) -> Fraction:
    if isinstance(value, str):
        return parse_time(value, what)
    frac = as_fraction(value, what)
    if frac < 0:
        raise TopologyError(f"{what}: must not be negative, got {value!r}")
    return frac


def _duplex(a: str, b: str, cap: Fraction, lat: Fraction, kind: str) -> list[Link]:
    return [Link(a, b, cap, lat, kind), Link(b, a, cap, lat, kind)]


def hierarchical(
    servers: int,
    gpus_per_server: int = 8,
    nics_per_server: int | None = None,
    nic_bw: object = DEFAULT_NIC_BW,
    nvlink_bw: object = DEFAULT_NVLINK_BW,
    pcie_bw: object = DEFAULT_PCIE_BW,
    fabric: str = "rail",
    nvlink_latency: object = DEFAULT_NVLINK_LATENCY,
    pcie_latency: object = DEFAULT_PCIE_LATENCY,
    net_latency: object = DEFAULT_NET_LATENCY,
) -> Topology:
    """An H100-class cluster: servers of GPUs on an NVSwitch, NICs on a network fabric.

    Node names: ``s{i}.gpu{g}``, ``s{i}.nvswitch``, ``s{i}.nic{k}`` and the fabric
    switches ``rail{k}`` (``fabric="rail"``: one switch per NIC index, a rail-only
    network, so traffic between rails crosses NVLink) or ``fabric`` (``"switch"``: one
    non-blocking switch for every NIC). GPU ``g`` is attached by PCIe to NIC
    ``g * nics_per_server // gpus_per_server``. Rank of ``s{i}.gpu{g}`` is
    ``i * gpus_per_server + g``.

    Args:
        servers: number of servers (≥ 1; ≥ 2 for a network to matter).
        gpus_per_server: GPUs per server.
        nics_per_server: NICs per server (1..gpus_per_server), default one per GPU;
            with fewer NICs than GPUs, consecutive GPUs share a NIC.
        nic_bw: per-NIC bandwidth each direction (bytes/s or a string like ``"400Gbps"``).
        nvlink_bw: per-GPU NVLink bandwidth each direction.
        pcie_bw: GPU↔NIC bandwidth each direction.
        fabric: ``"rail"`` or ``"switch"``.

    Examples:
        >>> t = hierarchical(2, 8)
        >>> t.num_ranks, len(t.nics_of_server[0]), t.server_egress(0)
        (16, 8, Fraction(400000000000, 1))
    """
    if not isinstance(servers, int) or servers < 1:
        raise TopologyError(f"servers: must be a positive integer, got {servers!r}")
    if not isinstance(gpus_per_server, int) or gpus_per_server < 1:
        raise TopologyError(f"gpus-per-server: must be a positive integer, got {gpus_per_server!r}")
    if servers * gpus_per_server > MAX_GPUS:
        raise TopologyError(
            f"servers × gpus-per-server: {servers * gpus_per_server:,} GPUs, more than {MAX_GPUS:,}"
        )
    k = gpus_per_server if nics_per_server is None else nics_per_server
    if not isinstance(k, int) or k < 1 or k > gpus_per_server:
        raise TopologyError(
            f"nics-per-server: must be between 1 and gpus-per-server ({gpus_per_server}), got {k!r}"
        )
    if fabric not in ("rail", "switch"):
        raise TopologyError(f"fabric: must be 'rail' or 'switch', got {fabric!r}")
    nic_c = _bw(nic_bw, "nic-bw")
    nvl_c = _bw(nvlink_bw, "nvlink-bw")
    pcie_c = _bw(pcie_bw, "pcie-bw")
    nvl_l = _lat(nvlink_latency, "nvlink-latency")
    pcie_l = _lat(pcie_latency, "pcie-latency")
    net_l = _lat(net_latency, "net-latency")

    nodes: list[Node] = []
    links: list[Link] = []
    for s in range(servers):
        nvs = f"s{s}.nvswitch"
        nodes.append(Node(nvs, SWITCH, server=s))
        for kk in range(k):
            nodes.append(Node(f"s{s}.nic{kk}", NIC, server=s, local=kk))
        for g in range(gpus_per_server):
            name = f"s{s}.gpu{g}"
            nodes.append(Node(name, GPU, server=s, local=g, rank=s * gpus_per_server + g))
            if gpus_per_server > 1:
                links += _duplex(name, nvs, nvl_c, nvl_l, "nvlink")
            links += _duplex(name, f"s{s}.nic{g * k // gpus_per_server}", pcie_c, pcie_l, "pcie")
    if fabric == "rail":
        for kk in range(k):
            nodes.append(Node(f"rail{kk}", SWITCH))
            for s in range(servers):
                links += _duplex(f"s{s}.nic{kk}", f"rail{kk}", nic_c, net_l, "network")
    else:
        nodes.append(Node("fabric", SWITCH))
        for s in range(servers):
            for kk in range(k):
                links += _duplex(f"s{s}.nic{kk}", "fabric", nic_c, net_l, "network")
    params = (
        ("builder", "hierarchical"),
        ("servers", str(servers)),
        ("gpus_per_server", str(gpus_per_server)),
        ("nics_per_server", str(k)),
        ("nic_bw", str(nic_c)),
        ("nvlink_bw", str(nvl_c)),
        ("pcie_bw", str(pcie_c)),
        ("fabric", fabric),
    )
    name = f"{servers}x{gpus_per_server} GPUs, {k} NICs/server, {fabric} fabric"
    return Topology(tuple(nodes), tuple(links), name=name, params=params)


def switch_model(
    egress: Sequence[object],
    ingress: Sequence[object] | None = None,
    latency: object = Fraction(0),
) -> Topology:
    """The switch model: n endpoints (ranks) on one non-blocking switch.

    Endpoint ``i`` is GPU ``ep{i}`` (rank ``i``, server ``i``) with an uplink of
    capacity ``egress[i]`` and a downlink of capacity ``ingress[i]`` (defaults to
    ``egress``). Each endpoint stands for a GPU or for a whole server whose NICs are
    pooled; this is the model of the closed-form bounds.

    Examples:
        >>> t = switch_model([100, 100, 50])
        >>> str(t.links[0].capacity), str(t.links[1].capacity)
        ('100', '100')
    """
    n = len(egress)
    if n < 1:
        raise TopologyError("switch model: needs at least one endpoint")
    ing = egress if ingress is None else ingress
    if len(ing) != n:
        raise TopologyError(f"switch model: {n} egress values but {len(ing)} ingress values")
    lat = _lat(latency, "latency")
    nodes = [Node(f"ep{i}", GPU, server=i, local=0, rank=i) for i in range(n)]
    nodes.append(Node("switch", SWITCH))
    links: list[Link] = []
    for i in range(n):
        links.append(
            Link(f"ep{i}", "switch", _bw(egress[i], f"egress of endpoint {i}"), lat, "network")
        )
        links.append(
            Link("switch", f"ep{i}", _bw(ing[i], f"ingress of endpoint {i}"), lat, "network")
        )
    return Topology(
        tuple(nodes),
        tuple(links),
        name=f"switch model, {n} endpoints",
        params=(("builder", "switch"),),
    )


def uniform_switch(n: int, bw: object = DEFAULT_NIC_BW * 8, straggler_beta: object = 1) -> Topology:
    """Switch model with ``n`` endpoints of bandwidth ``bw``; endpoint 0 scaled by ``straggler_beta``.

    Examples:
        >>> t = uniform_switch(4, 100, "1/2")
        >>> str(t.links[0].capacity), str(t.links[2].capacity)
        ('50', '100')
    """
    if not isinstance(n, int) or n < 1:
        raise TopologyError(f"endpoints: must be a positive integer, got {n!r}")
    if n > MAX_GPUS:
        raise TopologyError(f"endpoints: {n:,}, more than {MAX_GPUS:,}")
    b = _bw(bw, "bandwidth")
    beta = as_fraction(straggler_beta, "beta")
    if not 0 < beta <= 1:
        raise TopologyError(f"beta: must be in (0, 1], got {straggler_beta!r}")
    caps = [b * beta] + [b] * (n - 1)
    return switch_model(caps)
