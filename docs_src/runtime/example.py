"""Run a schedule on real buffers while a NIC channel dies mid-collective; then the mutant."""

from fractions import Fraction

from resilientcc.runtime import ChannelFailure, run_schedule
from resilientcc.schedules.generators import generate
from resilientcc.topology import fail_nics, hierarchical

# 2 servers x 4 GPUs; server 0 has lost NIC 1 (its traffic goes through the others)
topo = fail_nics(hierarchical(2, 4), server=0, nics=1)
for name in ("ring", "optcc"):
    sched = generate(name, topo, Fraction(2**20))  # checked exactly before it returns
    run = run_schedule(sched, elements=4096)
    print(f"{name}: {run.ranks} ranks, {run.transfers} transfers, exact = {run.exact}")

# NCCL's ring again; rank 0's channel 0 dies as it sends its 8th transfer on it. That one
# arrives, but rank 0 cannot tell, so it sends it again on channel 1, with every transfer
# of channel 0 not acknowledged yet, and the receiver drops the copies it already has
ring = generate("ring", topo, Fraction(2**20))
kill = [ChannelFailure(rank=0, channel=0, after=7, outcome="delivered")]
run = run_schedule(ring, elements=4096, failures=kill)
print(f"channel 0 of rank 0 killed: exact = {run.exact}, moved (rank, from, to) {run.migrations}")
print(f"every re-sent transfer dropped as a duplicate: {run.resent == run.duplicates > 0}")

# the same without the receivers' duplicate check: the re-sent reduce is added twice
bad = run_schedule(ring, elements=4096, failures=kill, dedup=False)
print(f"without dedup: exact = {bad.exact}, wrong on ranks {bad.wrong_ranks}")
