"""Topologies without servers, as JSON-shaped dicts: what the tree packing is for.

Each function returns the dictionary form that ``topology_from_dict`` (and ``rcc ...
--topology FILE.json``) reads; ``servers=True`` gives every GPU a server of its own, so
that the layered generators (NCCL's ring, OptCC's variants) run on it too.
"""

from __future__ import annotations

import random


def _gpus(n: int, servers: bool) -> list[dict]:
    return [
        {
            "name": f"g{i}",
            "kind": "gpu",
            "rank": i,
            **({"server": i, "local": 0} if servers else {}),
        }
        for i in range(n)
    ]


def _duplex(a: str, b: str, bw: str, latency: str = "2us") -> list[dict]:
    return [
        {"src": a, "dst": b, "capacity": bw, "latency": latency},
        {"src": b, "dst": a, "capacity": bw, "latency": latency},
    ]


def direct_ring(gpus: int = 6, slow: int = 2, *, servers: bool = False) -> dict:
    """``gpus`` GPUs in a ring of 50 GB/s cables; cable ``slow`` (from GPU ``slow`` to the
    next) at 12.5 GB/s (``-1``: none)."""
    links = []
    for i in range(gpus):
        links += _duplex(f"g{i}", f"g{(i + 1) % gpus}", "12.5GB/s" if i == slow else "50GB/s")
    return {"name": f"direct ring of {gpus}", "nodes": _gpus(gpus, servers), "links": links}


def torus(rows: int = 4, cols: int = 4, *, servers: bool = False) -> dict:
    """A 2-D torus of 50 GB/s cables, the cable from GPU 0 to GPU 1 at 12.5 GB/s."""
    links = []
    for i in range(rows):
        for j in range(cols):
            me = f"g{i * cols + j}"
            links += _duplex(me, f"g{((i + 1) % rows) * cols + j}", "50GB/s")
            bw = "12.5GB/s" if (i, j) == (0, 0) else "50GB/s"
            links += _duplex(me, f"g{i * cols + (j + 1) % cols}", bw)
    return {"name": f"{rows}x{cols} torus", "nodes": _gpus(rows * cols, servers), "links": links}


def two_leaves(per_leaf: int = 4, *, servers: bool = False) -> dict:
    """Two leaf switches of ``per_leaf`` GPUs (50 GB/s each) under one spine, each leaf's
    uplink 100 GB/s: 2:1 oversubscribed."""
    n = 2 * per_leaf
    nodes = _gpus(n, servers) + [{"name": s, "kind": "switch"} for s in ("leaf0", "leaf1", "spine")]
    links = []
    for i in range(n):
        links += _duplex(f"g{i}", f"leaf{i // per_leaf}", "50GB/s", "1us")
    links += _duplex("leaf0", "spine", "100GB/s", "1us") + _duplex(
        "leaf1", "spine", "100GB/s", "1us"
    )
    return {"name": f"two leaves of {per_leaf}", "nodes": nodes, "links": links}


def random_graph(gpus: int = 10, cables: int = 18, seed: int = 3, *, servers: bool = False) -> dict:
    """A ring of ``gpus`` plus random chords, ``cables`` in all, each 25, 50 or 100 GB/s."""
    rng = random.Random(seed)
    edges = {(i, (i + 1) % gpus) for i in range(gpus)}
    while len(edges) < cables:
        a, b = rng.sample(range(gpus), 2)
        if (b, a) not in edges:
            edges.add((a, b))
    links = []
    for a, b in sorted(edges):
        links += _duplex(f"g{a}", f"g{b}", rng.choice(["25GB/s", "50GB/s", "100GB/s"]))
    return {"name": f"random graph of {gpus}", "nodes": _gpus(gpus, servers), "links": links}


GRAPHS = {
    "direct ring of 6, one cable at 1/4": direct_ring,
    "4x4 torus, one cable at 1/4": torus,
    "two leaves of 4, 2:1 spine": two_leaves,
    "random graph of 10": random_graph,
}
