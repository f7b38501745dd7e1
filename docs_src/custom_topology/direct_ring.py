"""An AllReduce on GPUs wired to each other directly, with one cable at a quarter speed.

The layered generators place their stages by server; here no GPU has one, so OptCC (and
``rcc sim trees``) pack reduce and broadcast trees into the graph instead.
"""

import sys
from fractions import Fraction
from pathlib import Path

from resilientcc.bounds import lower_bound
from resilientcc.schedules.tree_packing import pack_trees, tree_allreduce
from resilientcc.sim import simulate
from resilientcc.topology.io import topology_from_dict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graphs import direct_ring  # the module next to this file


def main() -> None:
    topo = topology_from_dict(direct_ring())
    size = Fraction(256 * 2**20)
    bound = lower_bound(topo, size).seconds
    packing = pack_trees(topo)
    schedule = tree_allreduce(topo, size, packing=packing)
    result = simulate(schedule, topo)
    print(f"lower bound        {float(bound) * 1e3:.3f} ms")
    print(
        f"packing, no delays {packing.time_s(size) * 1e3:.3f} ms ({len(packing.pairs)} tree pairs)"
    )
    print(
        f"simulated          {result.time_s * 1e3:.3f} ms ({result.time_s / float(bound):.3f} × the bound)"
    )


if __name__ == "__main__":
    main()
