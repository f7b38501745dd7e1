# Each of these prints one line "error: ..." and exits with status 2
rcc bound --fail 9:1
rcc bound --nic-bw -400Gbps
rcc bound --size 1XB
rcc bound --method simplex
rcc bound --size 1e400
