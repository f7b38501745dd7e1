# The flagship cluster, healthy: 4 servers x 8 H100, 8 x 400 Gb/s NICs per server, 1 GiB
rcc bound
# Server 0 loses 4 of its 8 NICs (the 4 GPUs behind them reroute over NVLink: PXN)
rcc bound --fail 0:4
