"""Simulate the flat ring and Balance on a cluster where one server lost a quarter of its NICs."""

from fractions import Fraction

from resilientcc.schedules.balance import balance
from resilientcc.schedules.ring import ring
from resilientcc.sim import byte_floor, simulate
from resilientcc.topology import fail_nics, hierarchical

size = Fraction(2**30)  # 1 GiB
healthy = hierarchical(2, 8)  # 2 servers x 8 H100, 8 x 400 Gb/s NICs each
degraded = fail_nics(healthy, 0, 2)  # server 0 loses NICs 0 and 1 (X = 1/4)

ff = simulate(ring(healthy, size), healthy)
naive = simulate(ring(degraded, size), degraded)  # same ring, dead NICs' channels rerouted by PXN
bal = simulate(balance(degraded, size), degraded)  # traffic spread over surviving NICs by bandwidth

for name, r in [("fault-free ring", ff), ("naive ring", naive), ("balance", bal)]:
    print(f"{name:16} {r.time_s * 1e3:7.3f} ms  (latency part {r.latency_s * 1e6:5.1f} us)")
print("busiest link under balance:", bal.busiest_links(1)[0][0])
floor, link = byte_floor(balance(degraded, size), degraded)  # no run: bytes / capacity
print(f"balance's byte floor: {floor * 1e3:.3f} ms on {link}")
w = bal.floor_window()  # the run's time around that link
print(
    f"  + {w.head_s * 1e6:.1f} us before its first byte, {w.idle_s * 1e6:.1f} us idle,"
    f" {w.tail_s * 1e6:.1f} us after its last byte"
)

assert abs(ff.bandwidth_s - 2 * 15 / 16 * 2**30 / 400e9) < 1e-9 * ff.time_s
assert naive.time_s > 1.9 * ff.time_s  # a surviving NIC carries two channels
assert 1.33 < bal.time_s / ff.time_s < 1.37  # about 1/(1 - X)
assert floor <= bal.time_s  # no run beats its busiest link
assert abs(w.head_s + w.floor_s + w.idle_s + w.tail_s - bal.time_s) < 1e-12  # they add up
