"""Failover-lossless: a channel dies mid-collective and the migration protocol recovers.

Model (DESIGN.md §6.4). Channel ``f`` (optionally only on one server) fails at a
symbolic point of the execution: a *consistent cut* — Booleans ``started_t`` and
``done_t`` for every transfer, closed under deps and FIFO order
(:func:`~resilientcc.verify.encode.cut_constraints`). Every transfer of the failed
channel is then

* completed (``done_t``): nothing to do;
* in flight (``started_t ∧ ¬done_t``): delivered (the receiver committed it, the
  acknowledgement is lost), half-delivered or lost — ``O_t ∈ {0, 1, 2}``, free, and
  the sender cannot tell which;
* not started (``¬started_t``): simply issued on a surviving channel.

The protocol re-sends every in-flight transfer (the data it read at ``S_t``, kept
until acknowledged) on a surviving channel; a re-send completes and is committed.
With ``dedup`` the receiver commits a transfer id at most once, so the number of
commits is ``min(1, deliveries)``; without it, a delivered-then-re-sent transfer is
committed twice. With two failures a re-send may itself be caught in flight by the
second failure (on the other channel) and be re-sent again.

The commit counts ``n_t`` feed the multiplicity SSA of
:mod:`resilientcc.verify.lossless` (a second commit of a reduce adds the data
again; of a copy, writes it again), and Z3 is asked for a failure time, a timing
and outcomes that leave some ``(rank, chunk, contribution)`` with multiplicity ≠ 1.
``unsat`` proves the final state exact for every failure point and outcome.
Commits happen where the original commit would (a race-free schedule orders every
other access to the destination against it, and dependents wait for the
acknowledgement), so one timing of the re-send stands for all.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any

from resilientcc.schedules.executor import execute
from resilientcc.schedules.ir import Schedule, Transfer
from resilientcc.verify.encode import (
    Deadline,
    ScheduleGraph,
    contribution_var,
    cut_constraints,
    done_var,
    outcome_var,
    run_check,
    started_var,
)
from resilientcc.verify.lossless import chunk_orders, chunk_terms
from resilientcc.verify.result import (
    PROVED,
    UNKNOWN,
    VIOLATED,
    Counterexample,
    FailurePoint,
    PropertyResult,
)

__all__ = ["OUTCOMES", "check_failover_lossless", "failure_scenarios", "replay_commits"]

PROPERTY = "failover_lossless"
OUTCOMES = ("delivered", "half-delivered", "lost")


def failure_scenarios(
    schedule: Schedule, failures: int = 1, gpus_per_server: int | None = None
) -> list[tuple[tuple[int, ...], int | None]]:
    """``(channels, server)`` pairs to check: every channel (or pair of channels).

    With ``gpus_per_server`` a failure hits channel ``f`` of one server only (the
    transfers whose source is on that server); otherwise every server's channel ``f``.
    """
    if failures not in (1, 2):
        raise ValueError("failures must be 1 or 2")
    chans = schedule.channels
    combos = [(c,) for c in chans] if failures == 1 else list(itertools.combinations(chans, 2))
    if gpus_per_server is None:
        return [(c, None) for c in combos]
    servers = sorted({t.src // gpus_per_server for t in schedule.transfers})
    return [(c, s) for s in servers for c in combos]


def _hit_set(
    schedule: Schedule, channel: int, server: int | None, gpus_per_server: int | None
) -> list[Transfer]:
    return [
        t
        for t in schedule.transfers
        if t.channel == channel
        and (server is None or gpus_per_server is None or t.src // gpus_per_server == server)
    ]


def replay_commits(schedule: Schedule, commits: dict[int, int]) -> Schedule:
    """The schedule with transfer ``t`` committed ``commits[t]`` times (for the executor).

    Each extra commit is a copy of ``t`` that runs right after it (it depends on ``t``
    and ``t``'s dependents wait for it): the same happens-before position as ``t``.
    """
    next_id = max((t.id for t in schedule.transfers), default=-1) + 1
    extra_of: dict[int, list[int]] = {}
    extra: list[Transfer] = []
    for tid, n in sorted(commits.items()):
        prev = tid
        for _ in range(n - 1):
            extra.append(dataclasses.replace(schedule.by_id[tid], id=next_id, deps=(prev,)))
            extra_of.setdefault(tid, []).append(next_id)
            prev = next_id
            next_id += 1
    ts = []
    for t in schedule.transfers:
        deps = list(t.deps)
        for d in t.deps:
            deps.extend(extra_of.get(d, ()))
        ts.append(dataclasses.replace(t, deps=tuple(deps)))
    return dataclasses.replace(schedule, transfers=tuple(ts + extra))


def check_failover_lossless(
    schedule: Schedule,
    *,
    failures: int = 1,
    dedup: bool = True,
    gpus_per_server: int | None = None,
    channels: tuple[int, ...] | None = None,
    timeout_s: float | None = None,
    graph: ScheduleGraph | None = None,
) -> PropertyResult:
    """Prove the final state exact for every single (or double) channel failure.

    Args:
        failures: 1 or 2 failed channels.
        dedup: the receiver commits each transfer id at most once (the protocol);
            ``False`` models a receiver without it and must yield a counterexample
            (a delivered reduce re-sent and applied twice).
        gpus_per_server: fail channel ``f`` of one server at a time.
        channels: only these channels may fail (default: every channel used).

    Examples:
        >>> from resilientcc.verify.examples import ring_allreduce
        >>> check_failover_lossless(ring_allreduce(3)).verdict
        'proved'
        >>> r = check_failover_lossless(ring_allreduce(3), dedup=False)
        >>> r.verdict, r.counterexample.multiplicity
        ('violated', 2)
    """
    import z3

    t0 = time.perf_counter()
    deadline = Deadline(timeout_s)
    g = graph or ScheduleGraph(schedule)
    order = g.dep_order
    if order is None or g.order is None:
        return PropertyResult(
            PROPERTY, UNKNOWN, None, time.perf_counter() - t0, "dependency cycle: see deadlock"
        )
    scenarios = [
        (cs, s)
        for cs, s in failure_scenarios(schedule, failures, gpus_per_server)
        if channels is None or set(cs) <= set(channels)
    ]
    solver = z3.SolverFor("QF_LIA")
    ncuts = failures
    for i in range(ncuts):
        solver.add(*cut_constraints(g, i))
    if ncuts == 2:
        # the two failure points are ordered: the earlier cut is contained in the later
        first = z3.Bool("failure0_first")
        for t in g.transfers:
            for a, b in ((0, 1), (1, 0)):
                guard = first if a == 0 else z3.Not(first)
                solver.add(z3.Implies(guard, z3.Implies(done_var(t.id, a), done_var(t.id, b))))
                solver.add(
                    z3.Implies(guard, z3.Implies(started_var(t.id, a), started_var(t.id, b)))
                )
    unknown_reason = ""
    dedup_v = z3.BoolVal(dedup)
    slices = 0
    orders = chunk_orders(schedule, order)
    for chans, server in scenarios:
        hit_sets = [_hit_set(schedule, c, server, gpus_per_server) for c in chans]
        touched = sorted({c for hs in hit_sets for t in hs for c in t.chunk_ids})
        for chunk in touched:  # chunks never exchange data: one slice per chunk
            slices += 1
            solver.push()
            fs = list(range(len(chans)))
            chunk_sets = [[t for t in hs if chunk in t.chunk_ids] for hs in hit_sets]
            extra, hits = _encode_commits(solver, chans, fs, chunk_sets, dedup_v)
            k = contribution_var(chunk)
            solver.add(k >= 0, k < schedule.ranks)
            finals = {chunk: chunk_terms(schedule, chunk, orders.get(chunk, ()), k, extra)}
            solver.add(z3.Or([m != 1 for m in finals[chunk]]))
            answer, reason = run_check(solver, deadline)
            if answer == "sat":
                cex = _decode(
                    schedule, solver.model(), chans, server, fs, chunk_sets, hits, extra, finals
                )
                solver.pop()
                return PropertyResult(
                    PROPERTY,
                    VIOLATED,
                    cex,
                    time.perf_counter() - t0,
                    f"z3 sat: failure of channel {', '.join(map(str, chans))}"
                    + (f" on server {server}" if server is not None else ""),
                )
            solver.pop()
            if answer == "unknown":
                unknown_reason = reason
                if deadline.expired():
                    break
        if deadline.expired():
            break
    secs = time.perf_counter() - t0
    if unknown_reason:
        return PropertyResult(PROPERTY, UNKNOWN, None, secs, f"z3: {unknown_reason}")
    return PropertyResult(
        PROPERTY,
        PROVED,
        None,
        secs,
        f"z3 unsat for {len(scenarios)} failure scenarios, {slices} chunk slices ({failures} failure"
        f"{'s' if failures > 1 else ''}, dedup={'on' if dedup else 'off'})",
    )


def _encode_commits(
    solver: Any, chans: tuple[int, ...], fs: list[int], hit_sets: list[list[Transfer]], dedup: Any
) -> tuple[dict[int, Any], dict[int, list[tuple[Any, Any]]]]:
    """Outcome variables and the extra-commit term ``n_t − 1`` of each transfer.

    Failure ``i`` is the cut ``fs[i]``; ``t`` is caught in flight by it when it has
    started but not completed there.
    """
    import z3

    extra: dict[int, Any] = {}
    hits: dict[int, list[tuple[Any, Any]]] = {}  # tid -> [(caught, outcome)] per attempt
    for i, hs in enumerate(hit_sets):
        cut = fs[i]
        for t in hs:
            o1 = outcome_var(t.id, 1)
            solver.add(o1 >= 0, o1 <= 2)
            caught = z3.And(started_var(t.id, cut), z3.Not(done_var(t.id, cut)))
            attempts = [(caught, o1)]
            if len(chans) == 2:
                # the re-send may be placed on the other failing channel before it dies
                # and still be in flight then (it has no deadline: dependents wait)
                mine_first = (
                    z3.Bool("failure0_first") if i == 0 else z3.Not(z3.Bool("failure0_first"))
                )
                o2 = outcome_var(t.id, 2)
                on_other = z3.Bool(f"resend_on_{chans[1 - i]}_{t.id}")
                pending = z3.Bool(f"resend_pending_{t.id}")
                solver.add(o2 >= 0, o2 <= 2)
                caught2 = z3.And(caught, mine_first, on_other, pending)
                attempts.append((caught2, o2))
            hits[t.id] = attempts
            delivered = sum((z3.If(z3.And(c, o == 0), 1, 0) for c, o in attempts), z3.IntVal(1))
            committed = z3.If(dedup, z3.If(delivered >= 1, 1, 0), delivered)
            extra[t.id] = committed - 1
    return extra, hits


def _decode(
    schedule: Schedule,
    model: Any,
    chans: tuple[int, ...],
    server: int | None,
    fs: list[int],
    hit_sets: list[list[Transfer]],
    hits: dict[int, list[tuple[Any, Any]]],
    extra: dict[int, Any],
    finals: dict[int, list[Any]],
) -> Counterexample:
    import z3

    def ev(x: Any) -> Any:
        v = model.eval(x, model_completion=True)
        return v.as_long() if hasattr(v, "as_long") else bool(v)

    if len(fs) == 2:
        times: tuple[int, ...] = (1, 2) if ev(z3.Bool("failure0_first")) else (2, 1)
    else:
        times = (1,)
    completed: list[int] = []
    in_flight: list[tuple[int, str]] = []
    not_started: list[int] = []
    for i, hs in enumerate(hit_sets):
        for t in hs:
            if ev(done_var(t.id, fs[i])):
                completed.append(t.id)
            elif ev(started_var(t.id, fs[i])):
                what = OUTCOMES[ev(hits[t.id][0][1])]
                if len(hits[t.id]) > 1 and ev(hits[t.id][1][0]):
                    what += f"; its re-send is caught by the other failure: {OUTCOMES[ev(hits[t.id][1][1])]}"
                in_flight.append((t.id, what))
            else:
                not_started.append(t.id)
    commits = {tid: 1 + ev(x) for tid, x in extra.items() if ev(x) != 0}
    where = None
    for c, ms in finals.items():
        for r, m in enumerate(ms):
            v = ev(m)
            if v != 1:
                where = (r, c, ev(contribution_var(c)), v)
                break
        if where:
            break
    assert where is not None
    r, c, k, v = where
    replay = execute(replay_commits(schedule, commits), max_violations=10**6)
    agree = any(
        (x.rank, x.chunk, x.contribution, x.multiplicity) == (r, c, k, v) for x in replay.violations
    )
    failure = FailurePoint(
        chans,
        server,
        times,
        tuple(sorted(completed)),
        tuple(sorted(in_flight)),
        tuple(sorted(not_started)),
        tuple(sorted(commits.items())),
    )
    doubled = tuple(schedule.by_id[t] for t in sorted(commits))
    return Counterexample(
        PROPERTY,
        f"after the failure rank {r} holds contribution {k} of chunk {c} {v} times",
        transfers=doubled,
        rank=r,
        chunk=c,
        contribution=k,
        multiplicity=v,
        failure=failure,
        trace=(
            "executor replay of these commits " + ("agrees" if agree else f"DISAGREES ({replay})"),
        ),
    )
