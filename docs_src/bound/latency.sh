# The bound that also counts the simulator's latencies (NCCL's base 8.4 µs by default)
rcc bound --fail 0:4 --size 256MiB --latency
# ... with another base latency
rcc bound --fail 0:4 --size 256MiB --latency --base-latency 0us --json
