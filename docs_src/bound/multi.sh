# 8 servers; server 0 loses 4 NICs, server 3 loses nic1 and nic5, 256 MiB
rcc bound --servers 8 --fail 0:4 --fail 3:nic1,nic5 --size 256MiB
# One server's NIC bandwidth degraded to a quarter, single-switch fabric
rcc bound --fail 2:x0.25 --fabric switch
# 400 Gb/s NICs shared by two GPUs each, 16 servers
rcc bound --servers 16 --nics-per-server 4 --fail 5:2
