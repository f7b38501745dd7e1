"""Random audit: every generator on randomly drawn clusters, checked by independent means.

For each seed the script draws a cluster (1 to 6 servers, or 3 to 10 with ``--large``;
GPUs and NICs per server, rail or switch fabric, NICs lost or slowed on random servers)
and a message size, generates every algorithm of ``GENERATORS`` on it and checks

* ``exact``: the symbolic executor finds every rank with every contribution once;
* ``bound``: the simulated time, with and without latencies, is at least the LP lower
  bound, and with latencies at least the latency-aware bound (a violation is a bug in a
  generator, the simulator or the bound);
* ``msccl`` (``--checks``): the MSCCL XML parses back into the same schedule, where the
  executor's limits let it export;
* ``verify``: Z3 proves the schedule lossless, race-free and deadlock-free (failover too
  up to 120 transfers), for schedules of up to 300 transfers;
* ``run``: the runtime (in-process queues) runs it with one channel killed and every
  rank ends exact, for schedules of up to 3000 transfers.

A generator that refuses a cluster (``ResilientCCError``) is counted, with its reason,
not failed; anything else it raises is a failure. Each failure is printed with its seed:
``--seeds N:N+1 -v`` reproduces it. The exit status is 1 when any check failed.

Usage::

    python scripts/random_audit.py --seeds 0:400                 # exact + bound
    python scripts/random_audit.py --seeds 0:100 --checks all    # + msccl, verify, run
    python scripts/random_audit.py --seeds 1000:1080 --large     # 3-10 servers, 16-256 MiB

On 2026-11-28, seeds 0:400 (2,400 schedules) found OptCC and R2CC-AllReduce dividing by
zero on one server whose NICs were all down (seed 113), fixed the same day.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from resilientcc.errors import ExportError, ResilientCCError
from resilientcc.schedules import executor
from resilientcc.schedules.generators import GENERATORS, generate
from resilientcc.schedules.ir import Schedule
from resilientcc.topology import fail_nics, hierarchical, scale_server_nics
from resilientcc.topology.model import Topology

CHECKS = ("exact", "bound", "msccl", "verify", "run")
DEFAULT_CHECKS = ("exact", "bound")
VERIFY_MAX_TRANSFERS = 300
FAILOVER_MAX_TRANSFERS = 120
RUN_MAX_TRANSFERS = 3000
RTOL = 1e-9


@dataclass(frozen=True)
class Case:
    """One drawn cluster and message size."""

    seed: int
    topology: Topology
    size: Fraction
    desc: str


@dataclass
class Tally:
    """What the audit saw, per algorithm."""

    schedules: int = 0
    refused: Counter[tuple[str, str]] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    #: seed -> simulated time over the LP bound (the ``bound`` check)
    ratios: dict[int, float] = field(default_factory=dict)


def draw_case(seed: int, large: bool = False) -> Case:
    """The cluster and size of ``seed`` (the same on every machine)."""
    rng = random.Random(seed)
    if large:
        servers = rng.choice([3, 4, 5, 6, 8, 10])
        gpus = rng.choice([4, 8, 8])
    else:
        servers = rng.choice([1, 2, 2, 3, 3, 4, 5, 6])
        gpus = rng.choice([1, 2, 3, 4, 5, 6, 8])
    nics = rng.choice([None, None, max(1, gpus // 2), 1])
    fabric = rng.choice(["rail", "rail", "switch"])
    topo = hierarchical(servers, gpus, nics_per_server=nics, fabric=fabric)
    k = nics or gpus
    parts = [f"{servers}x{gpus} GPUs, {k} NICs/server, {fabric}"]
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        server = rng.randrange(servers)
        if rng.random() < 0.5 and k > 1:
            idx = rng.sample(range(k), rng.randint(1, k - 1))
            try:
                topo = fail_nics(topo, server, idx)
                parts.append(f"{server}:nic{',nic'.join(map(str, sorted(idx)))} down")
            except ResilientCCError:
                pass  # would cut a server off the network, or NICs already down
        else:
            beta = rng.choice([Fraction(1, 8), Fraction(1, 2), Fraction(3, 4), Fraction(7, 8)])
            one = [rng.randrange(k)] if rng.random() < 0.4 else None
            try:
                topo = scale_server_nics(topo, server, beta, nics=one)
                where = f"nic{one[0]}" if one else ""
                parts.append(f"{server}:{where}x{beta}")
            except ResilientCCError:
                pass  # a NIC already down
    if large:
        sizes = [2**24, 2**28, 3 * 2**26 + 1]
    else:
        sizes = [1, 7, 4096, 10**6 + 3, 2**20, 3 * 2**22 + 5, 2**26]
    size = Fraction(rng.choice(sizes))
    return Case(seed, topo, size, f"{'; '.join(parts)}; {int(size):,} B")


def _check_bound(
    s: Schedule, case: Case, bounds: tuple[float, float]
) -> tuple[list[str], float | None]:
    """The bound check's failures, and the simulated time (``None``: nothing to send)."""
    from resilientcc import sim

    lb, lat = bounds
    if not s.transfers:
        return [], None
    bad = []
    timed = sim.simulate(s, case.topology).time_s
    zero = sim.simulate(s, case.topology, zero_latency=True).time_s
    if timed < lb * (1 - RTOL):
        bad.append(f"simulated {timed:.6e} s < LP bound {lb:.6e} s")
    if zero < lb * (1 - RTOL):
        bad.append(f"simulated at zero latency {zero:.6e} s < LP bound {lb:.6e} s")
    if timed < lat * (1 - RTOL):
        bad.append(f"simulated {timed:.6e} s < latency bound {lat:.6e} s")
    return bad, timed


def _check_msccl(s: Schedule) -> list[str] | None:
    from resilientcc.schedules import msccl

    try:
        xml = msccl.to_msccl_xml(s)
    except ExportError:
        return None  # beyond the executor's limits: the export says so
    return [] if msccl.from_msccl_xml(xml) == s else ["MSCCL XML parses back different"]


def _check_verify(s: Schedule) -> list[str] | None:
    from resilientcc.verify import verify

    if len(s.transfers) > VERIFY_MAX_TRANSFERS:
        return None
    report = verify(s, failover=len(s.transfers) <= FAILOVER_MAX_TRANSFERS, timeout_s=120)
    return [f"{r.property}: {r.verdict}" for r in report.results if r.verdict == "violated"]


def _check_run(s: Schedule, rng: random.Random) -> list[str] | None:
    from resilientcc.runtime import run_schedule
    from resilientcc.runtime.engine import ChannelFailure

    if not s.transfers or len(s.transfers) > RUN_MAX_TRANSFERS:
        return None
    t = rng.choice(s.transfers)
    sent = sum(1 for u in s.transfers if u.src == t.src and u.channel == t.channel)
    failure = ChannelFailure(
        t.src, t.channel, after=rng.randrange(sent), outcome=rng.choice(["lost", "delivered"])
    )
    try:
        result = run_schedule(s, elements=rng.choice([1, 7, 256]), failures=[failure])
    except ResilientCCError as e:
        if "every channel" in str(e):
            return None  # the only channel between two ranks died: nothing to migrate to
        raise
    return [] if result.exact else [f"run not exact on ranks {list(result.wrong_ranks)}"]


def _run_check(check: str, s: Schedule, rng: random.Random) -> list[str] | None:
    """One check's failures (empty: passed; ``None``: not applicable to this schedule);
    ``bound`` is run by :func:`audit_case` itself, which keeps its time."""
    if check == "exact":
        return [] if executor.execute(s).ok else ["not exact"]
    if check == "msccl":
        return _check_msccl(s)
    if check == "verify":
        return _check_verify(s)
    return _check_run(s, rng)


def audit_case(
    case: Case,
    tally: dict[str, Tally],
    checks: Sequence[str],
    algorithms: Sequence[str],
    make: Callable[[str, Topology, Fraction], Schedule] = generate,
) -> list[str]:
    """Run every check of ``checks`` on every algorithm for ``case``; returns the failures."""
    from resilientcc import bounds

    found: list[str] = []
    bound_pair = (0.0, 0.0)
    if "bound" in checks:
        lb = float(bounds.lower_bound(case.topology, case.size).seconds)
        lat = lb
        if case.topology.num_ranks > 1:
            lat = float(bounds.latency_lower_bound(case.topology, case.size).seconds)
        bound_pair = (lb, lat)
    for algo in algorithms:
        t = tally.setdefault(algo, Tally())
        where = f"seed {case.seed}, {algo} on {case.desc}"
        fails: list[str] = []
        try:
            s = make(algo, case.topology, case.size)
        except ResilientCCError as e:
            t.refused[(type(e).__name__, str(e).split(":")[0][:60])] += 1
            continue
        except Exception:
            s = None
            fails.append(f"{where}: generator raised {traceback.format_exc(limit=-2)}")
        if s is not None:
            t.schedules += 1
            rng = random.Random(case.seed)
            for check in checks:
                bad: list[str] | None
                try:
                    if check == "bound":
                        bad, timed = _check_bound(s, case, bound_pair)
                        if timed is not None and bound_pair[0] > 0:
                            t.ratios[case.seed] = timed / bound_pair[0]
                    else:
                        bad = _run_check(check, s, rng)
                except Exception:
                    bad = [f"raised {traceback.format_exc(limit=-2)}"]
                if bad is None:
                    t.skipped[check] += 1
                fails += [f"{where}: {check}: {b}" for b in bad or []]
        t.failures += fails
        found += fails
    return found


def behind(tally: Mapping[str, Tally], algo: str = "optcc") -> list[tuple[float, int, str]]:
    """``(time over the fastest other algorithm's, seed, that algorithm)`` for every case
    where ``algo`` and another were simulated, slowest first (not a failure: how far the
    rules' choice is from the best generator at hand)."""
    mine = tally[algo].ratios if algo in tally else {}
    out = []
    for seed, ratio in mine.items():
        others = [
            (t.ratios[seed], name) for name, t in tally.items() if name != algo and seed in t.ratios
        ]
        if others:
            best = min(others)
            out.append((ratio / best[0], seed, best[1]))
    return sorted(out, reverse=True)


def behind_report(
    tally: Mapping[str, Tally], algo: str = "optcc", margin: float = 1.05
) -> list[str]:
    """Lines on how often ``algo`` was more than ``margin`` × slower than the fastest other."""
    rows = behind(tally, algo)
    if not rows:
        return []
    late = [r for r in rows if r[0] > margin]
    ratios = sorted(r[0] for r in rows)
    lines = [
        f"{algo} behind the fastest other by more than {margin - 1:.0%}: {len(late)} of"
        f" {len(rows)} cases (median {algo} / fastest other {ratios[len(ratios) // 2]:.3f})"
    ]
    lines += [f"  seed {seed}: {r:.3f} x {name}'s time" for r, seed, name in late[:5]]
    return lines


def parse_seeds(text: str) -> range:
    try:
        a, _, b = text.partition(":")
        seeds = range(int(a), int(b) if b else int(a) + 1)
    except ValueError:
        raise SystemExit(f"error: --seeds: expected A:B, got {text!r}") from None
    if not seeds:
        raise SystemExit(f"error: --seeds: {text!r} is empty")
    return seeds


def case_options(description: str, seeds: str, sizes: str) -> argparse.ArgumentParser:
    """A parser with the options the benchmarks over this audit's clusters share:
    ``--seeds`` (default ``seeds``), ``--large``, ``--sizes`` (default ``sizes``, read
    by :func:`parse_sizes`) and ``-v``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seeds", default=seeds, help=f"A:B, the seeds A..B-1 (default {seeds})")
    ap.add_argument("--large", action="store_true", help="the audit's large draw")
    ap.add_argument("--sizes", default=sizes, help="comma-separated sizes")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    return ap


def trees_against_rules(topology: Topology, size: Fraction) -> tuple[float, bool, str]:
    """OptCC's tree packing against its rules' choice without it (``trees=False``), for
    the benchmarks over this audit's clusters: the trees' simulated time over the
    other's, whether OptCC's rules give the trees, and the other's variant."""
    from resilientcc.schedules.optcc import choose_variant, optcc
    from resilientcc.sim import simulate

    other = optcc(topology, size, trees=False)
    trees = simulate(optcc(topology, size, trees=True), topology).time_s
    ratio = trees / simulate(other, topology).time_s
    chosen = choose_variant(topology, size).variant == "trees"
    return ratio, chosen, str(other.meta_get("variant"))


def trees_cases(
    seeds: range,
    large: bool,
    sizes: Sequence[Fraction],
    bin_of: Callable[[Topology], tuple[tuple[object, ...], str] | None],
    verbose: bool = False,
) -> dict[tuple[object, ...], list[tuple[float, bool]]]:
    """:func:`trees_against_rules` on every cluster of ``seeds`` that ``bin_of`` keeps,
    at every size: ``(bytes, *bin) -> [(trees / other, whether the rules give the
    trees), ...]``. ``bin_of`` gives a cluster's bin and a note for the ``verbose`` line
    (``None``: left out)."""
    from collections import defaultdict

    from resilientcc.units import format_size

    out: dict[tuple[object, ...], list[tuple[float, bool]]] = defaultdict(list)
    for seed in seeds:
        case = draw_case(seed, large)
        kept = bin_of(case.topology)
        if kept is None:
            continue
        key, note = kept
        for size in sizes:
            ratio, chosen, other = trees_against_rules(case.topology, size)
            out[(int(size), *key)].append((ratio, chosen))
            if verbose:
                print(f"seed {seed}: {case.desc.rsplit(';', 1)[0]}; {format_size(size)},"
                      f"{note} {other}: trees {ratio:.3f} x"
                      f"{' (chosen)' if chosen else ''}", flush=True)  # fmt: skip
    return out


def ratio_cells(ratios: Sequence[float]) -> str:
    """Table cells of the trees' times over the other's: how many the trees won, the
    geometric mean, the worst and the best."""
    import statistics

    return (
        f"{sum(r < 1 for r in ratios)} | {statistics.geometric_mean(ratios):.3f} |"
        f" {max(ratios):.3f} | {min(ratios):.3f}"
    )


def parse_sizes(text: str) -> list[Fraction]:
    """Comma-separated sizes (``16MiB,64MiB``) as bytes."""
    from resilientcc.units import parse_size

    return [Fraction(parse_size(s)) for s in text.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:100", help="A:B, the seeds A..B-1 (default 0:100)")
    ap.add_argument("--large", action="store_true", help="3-10 servers, 16-256 MiB")
    ap.add_argument(
        "--checks",
        default=",".join(DEFAULT_CHECKS),
        help=f"comma-separated of {', '.join(CHECKS)}, or all (default exact,bound)",
    )
    ap.add_argument("--algorithms", default="all", help="comma-separated, or all")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = ap.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    checks = CHECKS if args.checks == "all" else tuple(args.checks.split(","))
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise SystemExit(f"error: --checks: unknown {unknown} (known: {', '.join(CHECKS)})")
    algorithms = sorted(GENERATORS) if args.algorithms == "all" else args.algorithms.split(",")
    unknown = [a for a in algorithms if a not in GENERATORS]
    if unknown:
        raise SystemExit(f"error: --algorithms: unknown {unknown} (known: {', '.join(GENERATORS)})")
    tally: dict[str, Tally] = {}
    t0 = time.time()
    for i, seed in enumerate(seeds):
        case = draw_case(seed, args.large)
        found = audit_case(case, tally, checks, algorithms)
        if args.verbose:
            print(f"seed {seed}: {case.desc}: {'ok' if not found else 'FAILED'}")
        for f in found:
            print(f"FAIL {f}", flush=True)
        if not args.verbose and (i + 1) % 25 == 0:
            print(f"  {i + 1}/{len(seeds)} seeds, {time.time() - t0:.0f} s", file=sys.stderr)
    print(f"\nrandom audit: seeds {seeds.start}:{seeds.stop}, checks {', '.join(checks)}")
    print(f"{'algorithm':<16}{'schedules':>10}{'refused':>9}{'skipped':>9}{'failed':>8}")
    for algo in algorithms:
        t = tally.get(algo, Tally())
        print(
            f"{algo:<16}{t.schedules:>10}{sum(t.refused.values()):>9}"
            f"{sum(t.skipped.values()):>9}{len(t.failures):>8}"
        )
    reasons = Counter[str]()
    for t in tally.values():
        for (kind, why), n in t.refused.items():
            reasons[f"{kind}: {why}"] += n
    for why, n in reasons.most_common(5):
        print(f"  refused {n}x: {why}")
    for line in behind_report(tally):
        print(line)
    failed = sum(len(t.failures) for t in tally.values())
    print(f"{failed} failure(s); {time.time() - t0:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
