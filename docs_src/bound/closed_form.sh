# Closed form of the server-level switch model (a valid, possibly weaker, bound)
rcc bound --fail 0:4 --method closed-form
# The LP on the full graph (GPUs, NVSwitches, NICs, rail switches)
rcc bound --fail 0:4 --method lp
