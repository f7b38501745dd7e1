"""The bound from Python: the flagship cluster with server 0 at half its NICs."""

from fractions import Fraction

from resilientcc.bounds import fault_free_lower_bound, fault_free_ring_time, lower_bound
from resilientcc.topology import fail_nics, hierarchical

topo = fail_nics(hierarchical(4, 8), server=0, nics=4)
size = 2**30  # 1 GiB

bound = lower_bound(topo, size)  # method="auto": the LP on this graph
ring = fault_free_ring_time(topo, size)  # NCCL's flat ring, no failure
healthy = fault_free_lower_bound(topo, size)

print(f"lower bound      {float(bound.seconds) * 1e3:.4f} ms = {bound.normalized} M/B")
print(f"fault-free ring  {float(ring) * 1e3:.4f} ms")
print(f"overhead         {bound.seconds / ring - 1}")  # exactly 1/31
print(f"healthy bound    {float(healthy.seconds) * 1e3:.4f} ms")
print(f"binding          {bound.binding}")
print(bound.certificate())
assert bound.seconds / ring - 1 == Fraction(1, 31)
