"""Mutation testing of the verifier: small semantic edits to correct schedules.

Each mutant is one edit: drop a transfer, duplicate a reduce, retarget a transfer to
another rank or chunk, delete a dependency, or swap copy/reduce. A mutant is
*wrong* when the exact executor finds a wrong final multiplicity, the graph
reachability check finds a race, or deps ∪ FIFO has a cycle; otherwise it is an
*equivalent* mutant (still a correct, race-free AllReduce). The verifier must reject
every wrong mutant with a counterexample and prove every equivalent one.

>>> import random
>>> from resilientcc.verify.examples import ring_allreduce
>>> ms = generate_mutants(ring_allreduce(3), random.Random(0), per_kind=2)
>>> sorted({m.kind for m in ms})
['delete_dep', 'drop', 'duplicate_reduce', 'retarget_chunk', 'retarget_rank', 'swap_op']
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from resilientcc.schedules.executor import execute
from resilientcc.schedules.ir import COPY, REDUCE, Schedule, Transfer
from resilientcc.verify.encode import ScheduleGraph
from resilientcc.verify.races import race_pairs_graph

__all__ = ["KINDS", "Mutant", "classify", "generate_mutants"]

KINDS = ("drop", "duplicate_reduce", "retarget_rank", "retarget_chunk", "delete_dep", "swap_op")


@dataclass(frozen=True)
class Mutant:
    """One edited schedule: ``kind`` (see :data:`KINDS`) and what was changed."""

    kind: str
    description: str
    schedule: Schedule


def _replace(s: Schedule, transfers: list[Transfer], tag: str) -> Schedule:
    return dataclasses.replace(s, name=f"{s.name}~{tag}", transfers=tuple(transfers))


def _drop(s: Schedule, t: Transfer) -> Schedule:
    ts = []
    for u in s.transfers:
        if u.id == t.id:
            continue
        if t.id in u.deps:  # keep the rest of the order: inherit the dropped one's deps
            deps = tuple(dict.fromkeys([d for d in u.deps if d != t.id] + list(t.deps)))
            u = dataclasses.replace(u, deps=deps)
        ts.append(u)
    return _replace(s, ts, f"drop{t.id}")


def _mutate(s: Schedule, kind: str, t: Transfer, rng: random.Random) -> Mutant | None:
    ts = list(s.transfers)
    i = ts.index(t)
    if kind == "drop":
        return Mutant(kind, f"drop #{t.id}", _drop(s, t))
    if kind == "duplicate_reduce":
        if t.op != REDUCE:
            return None
        new = dataclasses.replace(t, id=max(u.id for u in ts) + 1, deps=(t.id,))
        return Mutant(kind, f"duplicate reduce #{t.id}", _replace(s, [*ts, new], f"dup{t.id}"))
    if kind == "retarget_rank":
        choices = [r for r in range(s.ranks) if r not in (t.src, t.dst)]
        if not choices:
            return None
        r = rng.choice(choices)
        ts[i] = dataclasses.replace(t, dst=r)
        return Mutant(kind, f"#{t.id} dst {t.dst} -> {r}", _replace(s, ts, f"dst{t.id}"))
    if kind == "retarget_chunk":
        others = [c for c in range(len(s.chunks) - t.count + 1) if c != t.chunk]
        if not others:
            return None
        c = rng.choice(others)
        ts[i] = dataclasses.replace(t, chunk=c)
        return Mutant(kind, f"#{t.id} chunk {t.chunk} -> {c}", _replace(s, ts, f"chk{t.id}"))
    if kind == "delete_dep":
        if not t.deps:
            return None
        d = rng.choice(t.deps)
        ts[i] = dataclasses.replace(t, deps=tuple(x for x in t.deps if x != d))
        return Mutant(kind, f"#{t.id} no longer waits for #{d}", _replace(s, ts, f"dep{t.id}"))
    if kind == "swap_op":
        op = COPY if t.op == REDUCE else REDUCE
        ts[i] = dataclasses.replace(t, op=op)
        return Mutant(kind, f"#{t.id} {t.op} -> {op}", _replace(s, ts, f"op{t.id}"))
    raise ValueError(f"unknown mutation kind {kind!r}")


def generate_mutants(
    schedule: Schedule, rng: random.Random, per_kind: int = 5, kinds: tuple[str, ...] = KINDS
) -> list[Mutant]:
    """Up to ``per_kind`` mutants of each kind, at transfers sampled with ``rng``."""
    out: list[Mutant] = []
    ts = list(schedule.transfers)
    for kind in kinds:
        made = 0
        for t in rng.sample(ts, len(ts)):
            if made >= per_kind:
                break
            m = _mutate(schedule, kind, t, rng)
            if m is not None:
                out.append(m)
                made += 1
    return out


def classify(schedule: Schedule) -> tuple[bool, str]:
    """``(wrong, why)`` by the exact executor, graph reachability and a cycle search.

    Independent of Z3: this is the oracle the verifier is tested against.
    """
    g = ScheduleGraph(schedule)
    if g.order is None:
        return True, "deps ∪ FIFO has a cycle"
    res = execute(schedule)
    if not res.ok:
        return True, f"executor: {res}"
    races = race_pairs_graph(schedule, limit=1)
    if races:
        a, b = races[0]
        return True, f"race between #{a.tid} and #{b.tid} on rank {a.rank} chunk {a.chunk}"
    return False, "equivalent: exact and race-free"
