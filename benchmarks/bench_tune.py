"""OptCC's rules against OptCC tuned by simulation, and the baselines, on random patterns.

Usage: python benchmarks/bench_tune.py [--servers 4,5,6,8] [--size 64MiB] [--count 30]
[--seed 202]

Each row: a random failure pattern on N x 8 H100-class GPUs (one to four degraded
servers, each losing or slowing NICs, the CLI's --fail forms joined with ``+``), the
simulated times of Balance, R2CC-AllReduce, OptCC as its rules choose
(``generate("optcc")``) and OptCC tuned (:func:`resilientcc.sim.tune.tune`: every
variant simulated, the fastest kept), each over the LP lower bound, and the variant the
tuning kept. The last lines count the rows where OptCC is behind the better baseline,
with and without tuning, and the median gain of tuning where it changed the choice.
The ratios of one row come from one run, side by side (no assertions).
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time

from resilientcc.bounds import lower_bound
from resilientcc.errors import ResilientCCError
from resilientcc.schedules.generators import generate
from resilientcc.sim import simulate
from resilientcc.sim.tune import tune
from resilientcc.topology import apply_fail_specs, hierarchical
from resilientcc.units import parse_size

#: what one degraded server may lose (a --fail value without the server)
LOSSES = (
    "nic1",
    "nic2",
    "nic6",
    "nic3,nic4",
    "nic0,nic7",
    "x1/2",
    "x7/8",
    "x3/4",
    "nic2x1/2",
    "nic0,nic1,nic2,nic3",
    "nic5x3/4",
    "1",
    "2",
    "4",
    "6",
)


def patterns(servers: list[int], seed: int) -> list[tuple[int, list[str]]]:
    """Every pattern of one to four degraded servers, shuffled with ``seed``."""
    out = []
    for n in servers:
        for degraded in range(1, min(4, n) + 1):
            for combo in itertools.combinations(LOSSES, degraded):
                out.append((n, [f"{i}:{loss}" for i, loss in enumerate(combo)]))
    random.Random(seed).shuffle(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="4,5,6,8")
    ap.add_argument("--size", default="64MiB")
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--seed", type=int, default=202)
    a = ap.parse_args()
    size = parse_size(a.size)
    servers = [int(x) for x in a.servers.split(",")]
    print(f"{a.count} random patterns on {a.servers} servers x 8 GPUs, {a.size}, seed {a.seed}")
    print("| servers | pattern | balance | r2cc | optcc (rules) | optcc tuned | kept | s |")
    print("|---|---|---|---|---|---|---|---|")
    behind_rules = behind_tuned = 0
    gains = []
    done = 0
    for n, spec in patterns(servers, a.seed):
        if done >= a.count:
            break
        try:
            topo = apply_fail_specs(hierarchical(n, 8), spec)
        except ResilientCCError:
            continue  # e.g. two servers' failures that cut a GPU off
        done += 1
        t0 = time.perf_counter()
        bound = float(lower_bound(topo, size).seconds)
        base = {
            algo: simulate(generate(algo, topo, size, check=False), topo).time_s / bound
            for algo in ("balance", "r2cc_allreduce")
        }
        res = tune(topo, size)
        rules = res.trial("rules").time_s
        assert rules is not None
        rules /= bound
        tuned = res.time_s / bound
        best_base = min(base.values())
        behind_rules += rules > best_base
        behind_tuned += tuned > best_base
        if res.label != "rules":
            gains.append(1 - tuned / rules)
        print(
            f"| {n} | `{'+'.join(spec)}` | {base['balance']:.3f} | {base['r2cc_allreduce']:.3f}"
            f" | {rules:.3f} | **{tuned:.3f}** | {res.label} | {time.perf_counter() - t0:.1f} |",
            flush=True,
        )
    print(f"OptCC behind the better baseline: rules {behind_rules} / {done}, tuned {behind_tuned}")
    if gains:
        print(
            f"tuning changed the variant in {len(gains)} / {done}: median gain "
            f"{statistics.median(gains):.1%}, largest {max(gains):.1%}"
        )


if __name__ == "__main__":
    main()
