"""Routes of transfers through a topology: structural rule, PXN remap, pinned routes, fallback.

Rule for ``hierarchical`` topologies (DEVELOPING.md):

* intra-server: ``GPU → nvswitch → GPU`` (the channel only names the connection);
* inter-server, channel ``c``: the source NIC is ``k = c mod K``, replaced by
  ``pxn_remap`` if NIC ``k`` is dead (the ``i``-th dead NIC → alive NICs round-robin).
  Path: src GPU ``[→ nvswitch → GPU whose PCIe NIC is k]`` ``→ NIC k → fabric switch``
  (``rail{k}`` or ``fabric``) ``→ dst server's NIC`` ``[→ its GPU → nvswitch]`` ``→ dst GPU``.
  On a switch fabric each end picks its own NIC for the channel (NCCL's ranks do): the
  destination NIC is NIC ``c mod K`` of the destination server if alive, else the
  destination server's remap of it, whatever the source remapped. On a rail fabric the
  rail is the source's (remapped) NIC if alive at the destination; a rail must be alive
  on both servers: if it is dead at the destination, the destination's remap of it is
  used as the rail when it is alive at the source, else the first rail alive on both
  (from it upwards, cyclically).

Anything else (other builders, missing links, no common rail) falls back to a shortest
path by hop count (breadth-first, deterministic in link order). Pinned routes
(``Transfer.route``) are validated: consecutive nodes must be joined by a link.
"""

from __future__ import annotations

import itertools
from collections import deque

from resilientcc.errors import SimulationError
from resilientcc.schedules.ring import ServerLayout, pxn_remap, server_layouts
from resilientcc.topology.model import Topology

__all__ = ["Router"]


class Router:
    """Computes and caches routes as tuples of link indices into ``topology.links``.

    Examples:
        >>> from resilientcc.topology import hierarchical
        >>> t = hierarchical(2, 2)
        >>> r = Router(t)
        >>> [f"{t.links[i].src}->{t.links[i].dst}" for i in r.route(0, 2, 1)]
        ['s0.gpu0->s0.nvswitch', 's0.nvswitch->s0.gpu1', 's0.gpu1->s0.nic1', 's0.nic1->rail1', 'rail1->s1.nic1', 's1.nic1->s1.gpu1', 's1.gpu1->s1.nvswitch', 's1.nvswitch->s1.gpu0']
    """

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.link_of: dict[tuple[str, str], int] = {}
        for i, lk in enumerate(topology.links):
            self.link_of.setdefault((lk.src, lk.dst), i)
        self.gpu_names = [g.name for g in topology.gpus]
        self.server_of = [g.server for g in topology.gpus]
        self.local_of = [g.local for g in topology.gpus]
        self.hier = topology.param("builder") == "hierarchical"
        self.fabric = topology.param("fabric", "rail")
        self.layouts: dict[int, ServerLayout] = server_layouts(topology) if self.hier else {}
        self.remaps = {s: pxn_remap(lay) for s, lay in self.layouts.items()}
        self._cache: dict[tuple[int, int, int], tuple[int, ...]] = {}
        self._bfs: dict[str, dict[str, int]] = {}

    # ------------------------------------------------------------------ helpers
    def _path(self, nodes: list[str]) -> tuple[int, ...] | None:
        out = []
        for a, b in itertools.pairwise(nodes):
            i = self.link_of.get((a, b))
            if i is None:
                return None
            out.append(i)
        return tuple(out)

    def shortest(self, src: str, dst: str) -> tuple[int, ...] | None:
        """A fewest-hops path ``src → dst`` as link indices (``None`` if unreachable)."""
        parent = self._bfs.get(src)
        if parent is None:
            parent = {src: -1}
            queue = deque([src])
            links = self.topology.links
            while queue:
                u = queue.popleft()
                for li in self.topology.out_links.get(u, ()):
                    v = links[li].dst
                    if v not in parent and links[li].capacity > 0:
                        parent[v] = li
                        queue.append(v)
            self._bfs[src] = parent
        if dst not in parent:
            return None
        path: list[int] = []
        v = dst
        while v != src:
            li = parent[v]
            path.append(li)
            v = self.topology.links[li].src
        return tuple(reversed(path))

    def _structural(self, src: int, dst: int, channel: int) -> tuple[int, ...] | None:
        sa, sb = self.server_of[src], self.server_of[dst]
        if sa is None or sb is None:
            return None
        a_name, b_name = self.gpu_names[src], self.gpu_names[dst]
        if sa == sb:
            return self._path([a_name, f"s{sa}.nvswitch", b_name])
        la, lb = self.layouts.get(sa), self.layouts.get(sb)
        if la is None or lb is None or not la.nics or not la.alive or not lb.alive:
            return None
        k = la.nics[channel % len(la.nics)]
        k_src = self.remaps[sa][k]
        alive_b = set(lb.alive)
        if self.fabric == "switch":
            k_dst = k if k in alive_b else self.remaps[sb].get(k, lb.alive[k % len(lb.alive)])
        elif k_src in alive_b:
            k_dst = k_src
        else:
            alt = self.remaps[sb].get(k_src)
            common = [x for x in la.alive if x in alive_b]
            if alt is not None and alt in la.alive:
                k_src = k_dst = alt
            elif common:
                nxt = [x for x in common if x >= k_src] or common
                k_src = k_dst = nxt[0]
            else:
                return None
        switch = f"rail{k_src}" if self.fabric == "rail" else "fabric"
        nodes = [a_name]
        ga = la.gpu_of_nic(k_src)
        if la.nic_of_gpu.get(self.local_of[src] or 0) != k_src:
            if ga is None:
                return None
            nodes += [f"s{sa}.nvswitch", f"s{sa}.gpu{ga}"]
        nodes += [f"s{sa}.nic{k_src}", switch, f"s{sb}.nic{k_dst}"]
        gb = lb.gpu_of_nic(k_dst)
        if lb.nic_of_gpu.get(self.local_of[dst] or 0) != k_dst:
            if gb is None:
                return None
            nodes += [f"s{sb}.gpu{gb}", f"s{sb}.nvswitch"]
        nodes.append(b_name)
        return self._path(nodes)

    # ------------------------------------------------------------------ API
    def route(self, src: int, dst: int, channel: int) -> tuple[int, ...]:
        """Links of the route ``src → dst`` on ``channel`` (cached).

        Raises:
            SimulationError: no path exists.
        """
        key = (src, dst, channel)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        path = self._structural(src, dst, channel) if self.hier else None
        if path is None:
            path = self.shortest(self.gpu_names[src], self.gpu_names[dst])
        if path is None:
            raise SimulationError(
                f"no route from rank {src} ({self.gpu_names[src]}) to rank {dst} "
                f"({self.gpu_names[dst]})"
            )
        self._cache[key] = path
        return path

    def pinned(self, nodes: tuple[str, ...], src: int, dst: int, where: str) -> tuple[int, ...]:
        """Validate a pinned route (node names) and return its links.

        Raises:
            SimulationError: the route does not start at the src GPU, end at the dst GPU,
                or two consecutive nodes are not joined by a link (``where`` names the transfer).
        """
        if len(nodes) < 2 or nodes[0] != self.gpu_names[src] or nodes[-1] != self.gpu_names[dst]:
            raise SimulationError(
                f"{where}: pinned route must go from {self.gpu_names[src]} to "
                f"{self.gpu_names[dst]}, got {' -> '.join(nodes) or 'an empty route'}"
            )
        out = []
        for a, b in itertools.pairwise(nodes):
            i = self.link_of.get((a, b))
            if i is None:
                raise SimulationError(f"{where}: pinned route uses a missing link {a} -> {b}")
            out.append(i)
        return tuple(out)
