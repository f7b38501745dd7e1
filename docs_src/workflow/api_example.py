"""The schedule tutorial from Python: compare, synthesize, prove, simulate, export."""

import tempfile
from fractions import Fraction
from pathlib import Path

from resilientcc.bounds import lower_bound
from resilientcc.schedules import execute, save_schedule
from resilientcc.schedules.generators import generate
from resilientcc.schedules.msccl import load_msccl, save_msccl
from resilientcc.sim import simulate
from resilientcc.topology import fail_nics, hierarchical
from resilientcc.verify import verify

# 4 servers x 4 GPUs, 4 NICs per server; server 0 has lost NIC 0
topo = fail_nics(hierarchical(4, 4), server=0, nics=1)
size = Fraction(2**30)  # 1 GiB
bound = lower_bound(topo, size)
print(f"lower bound {float(bound.seconds) * 1e3:.3f} ms ({bound.binding})")

# every generator checks its schedule with the exact executor before returning it
for name in ("ring", "balance", "r2cc_allreduce", "optcc"):
    sched = generate(name, topo, size)
    res = simulate(sched, topo)
    print(f"{name:15s} {res.time_s * 1e3:7.3f} ms  {res.time_s / float(bound.seconds):.3f} x bound")

# a smaller schedule of the same shape to prove correct with Z3
small = generate("optcc", topo, Fraction(16 * 2**20))
report = verify(small, failover=True)
print(f"verify: {report.verdict} ({', '.join(r.property for r in report.results)})")

# files: the schedule as JSON and as MSCCL XML, which reads back as the same schedule
with tempfile.TemporaryDirectory() as tmp:
    save_schedule(small, Path(tmp) / "optcc.json")
    save_msccl(small, Path(tmp) / "optcc.xml")
    back = load_msccl(Path(tmp) / "optcc.xml")
    print(f"MSCCL XML round trip identical: {back == small}")
    print(f"the read-back schedule is an AllReduce: {execute(back).ok}")
