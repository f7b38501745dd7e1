# 4 servers x 4 GPUs, 4 x 400 Gb/s NICs per server; server 0 has lost NIC 0 (1 GiB)
# The fastest any schedule can be on this cluster, with its certificate
rcc bound -n 4 -g 4 --fail 0:1
# Four schedules simulated on it, each against that bound and NCCL's fault-free ring
rcc sim ring -n 4 -g 4 --fail 0:1
rcc sim balance -n 4 -g 4 --fail 0:1
rcc sim r2cc_allreduce -n 4 -g 4 --fail 0:1
rcc sim optcc -n 4 -g 4 --fail 0:1 --plot optcc.png
