"""Tune OptCC on a cluster where three of four servers run their NICs at 3/4 speed."""

from fractions import Fraction

from resilientcc.bounds import lower_bound
from resilientcc.sim.tune import tune
from resilientcc.topology import apply_fail_specs, hierarchical

size = Fraction(64 * 2**20)  # 64 MiB
cluster = apply_fail_specs(
    hierarchical(4, 2),  # 4 servers x 2 GPUs, a NIC each, rail fabric
    ["1:x3/4", "2:x3/4", "3:x3/4"],  # --fail values of the CLI
)
bound = float(lower_bound(cluster, size).seconds)

res = tune(cluster, size)  # every OptCC variant generated and simulated
for t in res.trials:
    shown = "does not run here" if t.time_s is None else f"{t.time_s / bound:.3f} x the bound"
    print(f"{t.label:18} {shown}  {t.note}")
print("kept:", res.label, f"({res.time_s * 1e6:.0f} us)")

assert res.time_s == min(t.time_s for t in res.trials if t.time_s is not None)
assert res.schedule.meta_get("tuned") == res.label
