"""Failures as edits: each returns a new, validated :class:`Topology`.

A failed NIC keeps its node (marked ``failed``) but loses its links; the GPU that
used it still reaches the network over NVLink through the surviving NICs of its
server (PXN), which is just another path in the graph.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import NamedTuple

from resilientcc.errors import InputError, TopologyError
from resilientcc.topology.model import Topology
from resilientcc.topology.validate import validate
from resilientcc.units import as_fraction

__all__ = [
    "NicScale",
    "apply_fail_specs",
    "degrade_link",
    "fail_nics",
    "parse_fail_spec",
    "scale_server_nics",
]


def _server_nics(topo: Topology, server: int) -> tuple[str, ...]:
    if server not in topo.nics_of_server:
        known = sorted(topo.nics_of_server)
        raise TopologyError(
            f"unknown server {server} (servers with NICs: {known[0]}..{known[-1]})"
            if known
            else f"unknown server {server}: this topology has no NICs"
        )
    return tuple(n.name for n in topo.nics_of_server[server])


def _alive_nic_names(topo: Topology, server: int, idx: Iterable[int], verb: str) -> set[str]:
    """Names of the NICs ``idx`` of ``server``, each known and alive (else one-line errors)."""
    names = _server_nics(topo, server)
    by_local = {n.local: n for n in topo.nics_of_server[server]}
    out: set[str] = set()
    for i in idx:
        if i not in by_local:
            raise TopologyError(f"server {server}: unknown NIC {i} (NICs 0..{len(names) - 1})")
        if by_local[i].failed:
            raise TopologyError(f"server {server}: NIC {i} is already failed, it cannot be {verb}")
        out.add(by_local[i].name)
    return out


def fail_nics(topo: Topology, server: int, nics: int | Iterable[int]) -> Topology:
    """Take NICs of one server down.

    Args:
        topo: the topology.
        server: server index.
        nics: a count ``k`` (fails the ``k`` lowest-numbered NICs still alive, so on a
            healthy server ``nic0 .. nic{k-1}``) or an iterable of NIC indices.

    Raises:
        TopologyError: unknown server or NIC, a NIC already failed, or a GPU left cut off
            (all NICs of a server down in a multi-server cluster).

    Examples:
        >>> from resilientcc.topology import hierarchical
        >>> t = fail_nics(hierarchical(2, 8), 0, 4)
        >>> len(t.alive_nics(0)), t.server_egress(0) / t.server_egress(1)
        (4, Fraction(1, 2))
    """
    names = _server_nics(topo, server)
    if isinstance(nics, int):
        alive = [n.local for n in topo.nics_of_server[server] if not n.failed]
        if nics < 0 or nics > len(alive):
            raise TopologyError(
                f"server {server}: cannot fail {nics} NICs, it has {len(alive)} alive "
                f"(of {len(names)})"
            )
        idx = sorted(i for i in alive[:nics] if i is not None)
    else:
        idx = sorted(set(nics))
    if not idx:
        return topo
    targets = _alive_nic_names(topo, server, idx, "failed again")
    nodes = tuple(
        dataclasses.replace(n, failed=True) if n.name in targets else n for n in topo.nodes
    )
    links = tuple(lk for lk in topo.links if lk.src not in targets and lk.dst not in targets)
    rec = f"server {server}: NICs {','.join(map(str, idx))} down"
    new = dataclasses.replace(topo, nodes=nodes, links=links, failures=(*topo.failures, rec))
    return validate(new)


def degrade_link(
    topo: Topology, src: str, dst: str, fraction: object, both_directions: bool = True
) -> Topology:
    """Scale the capacity of the link(s) ``src -> dst`` (and back) by ``fraction`` in (0, 1]."""
    frac = as_fraction(fraction, "fraction")
    if not 0 < frac <= 1:
        raise TopologyError(f"degrade {src}->{dst}: fraction must be in (0, 1], got {fraction!r}")
    pairs = {(src, dst), (dst, src)} if both_directions else {(src, dst)}
    hit = 0
    links = []
    for lk in topo.links:
        if (lk.src, lk.dst) in pairs:
            hit += 1
            links.append(dataclasses.replace(lk, capacity=lk.capacity * frac))
        else:
            links.append(lk)
    if hit == 0:
        raise TopologyError(f"degrade: no link {src} -> {dst}")
    rec = f"link {src}<->{dst} at {frac}" if both_directions else f"link {src}->{dst} at {frac}"
    return validate(dataclasses.replace(topo, links=tuple(links), failures=(*topo.failures, rec)))


def scale_server_nics(
    topo: Topology, server: int, beta: object, nics: Iterable[int] | None = None
) -> Topology:
    """Scale the network links of a server's NICs (all, or those in ``nics``) by ``beta``
    in (0, 1].

    >>> from resilientcc.topology import hierarchical
    >>> t = scale_server_nics(hierarchical(2, 8), 0, "1/2", nics=[1])
    >>> t.server_egress(0) / t.server_egress(1), t.failures[-1]
    (Fraction(15, 16), 'server 0: NIC 1 bandwidth x1/2')
    """
    chosen = set(_server_nics(topo, server))
    b = as_fraction(beta, "beta")
    if not 0 < b <= 1:
        raise TopologyError(f"server {server}: beta must be in (0, 1], got {b}")
    which = "NIC"
    if nics is not None:
        idx = sorted(set(nics))
        chosen = _alive_nic_names(topo, server, idx, "scaled")
        which = f"NIC{'s' if len(idx) > 1 else ''} {','.join(map(str, idx))}"
    links = tuple(
        dataclasses.replace(lk, capacity=lk.capacity * b)
        if lk.kind == "network" and (lk.src in chosen or lk.dst in chosen)
        else lk
        for lk in topo.links
    )
    rec = f"server {server}: {which} bandwidth x{b}"
    return validate(dataclasses.replace(topo, links=links, failures=(*topo.failures, rec)))


_FAIL_RE = re.compile(r"^\s*(\d+)\s*:\s*(.+?)\s*$")


class NicScale(NamedTuple):
    """Some NICs of a server (indices) at a fraction of their bandwidth."""

    nics: tuple[int, ...]
    beta: Fraction


def parse_fail_spec(spec: str) -> tuple[int, int | tuple[int, ...] | Fraction | NicScale]:
    """Parse a ``--fail`` value.

    Forms: ``"S:K"`` (K NICs of server S down), ``"S:nic1,nic5"`` (those NICs down),
    ``"S:x0.5"`` (server S's NIC bandwidth scaled to 0.5), ``"S:nic1x0.5"`` or
    ``"S:nic1,nic5x0.5"`` (only those NICs scaled).

    >>> parse_fail_spec("0:4"), parse_fail_spec("2:nic1,nic3"), parse_fail_spec("1:x1/2")
    ((0, 4), (2, (1, 3)), (1, Fraction(1, 2)))
    >>> parse_fail_spec("0:nic1x1/2")
    (0, NicScale(nics=(1,), beta=Fraction(1, 2)))
    """
    m = _FAIL_RE.match(spec)
    if not m:
        raise InputError(
            f"--fail {spec!r}: expected SERVER:NICS, e.g. 0:4 or 0:nic1,nic5 or 0:x0.5"
            " or 0:nic1x0.5"
        )
    server = int(m.group(1))
    rest = m.group(2)
    if rest.startswith("x"):
        return server, as_fraction(rest[1:], f"--fail {spec!r}")
    if rest.isdigit():
        return server, int(rest)
    if "x" in rest:
        names, _, beta = rest.rpartition("x")
        return server, NicScale(_nic_indices(spec, names), as_fraction(beta, f"--fail {spec!r}"))
    return server, _nic_indices(spec, rest)


def _nic_indices(spec: str, rest: str) -> tuple[int, ...]:
    parts = [p.strip() for p in rest.split(",")]
    idx = []
    for p in parts:
        mm = re.fullmatch(r"nic(\d+)", p)
        if not mm:
            raise InputError(
                f"--fail {spec!r}: {p!r} is not a NIC name (expected nicN, e.g. 0:nic1,nic5)"
            )
        idx.append(int(mm.group(1)))
    return tuple(idx)


def apply_fail_specs(topo: Topology, specs: Sequence[str]) -> Topology:
    """Apply several ``--fail`` values in order."""
    for spec in specs:
        server, what = parse_fail_spec(spec)
        if isinstance(what, NicScale):
            topo = scale_server_nics(topo, server, what.beta, nics=what.nics)
        elif isinstance(what, Fraction):
            topo = scale_server_nics(topo, server, what)
        else:
            topo = fail_nics(topo, server, what)
    return topo
