# 4 servers x 4 GPUs, 4 x 400 Gb/s NICs per server; server 0 has lost NIC 0 (1 GiB)
# The fastest any schedule can be on this cluster, with its certificate
rcc bound -n 4 -g 4 --fail 0:1
# Every schedule simulated on it, a row each, against that bound and the fault-free ring
rcc sim all -n 4 -g 4 --fail 0:1 --plot compare.png
# One of them in detail, its latency part measured by a second run with zero latencies
rcc sim optcc -n 4 -g 4 --fail 0:1 --latency-mode rerun
