# Write OptCC's schedule for this failure (16 MiB: the same stages in fewer pieces)
rcc synth optcc -n 4 -g 4 --fail 0:1 --size 16MiB -o optcc.json
# Prove it lossless, race-free and deadlock-free, and lossless when a NIC fails mid-run
rcc verify optcc.json --failover
# Run it on real buffers (16 ranks as threads), GPU 0's NIC dying at its 4th send
rcc run optcc.json --backend local --fail-channel 0:0:3:delivered
# Simulate the file, and convert it to MSCCL XML for NCCL's MSCCL executor
rcc sim optcc.json -n 4 -g 4 --fail 0:1 --latency-mode rerun
rcc synth optcc.json -n 4 -g 4 --fail 0:1 -o optcc.xml --format msccl-xml
