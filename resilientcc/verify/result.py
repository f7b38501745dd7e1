"""Verdicts, counterexamples and reports of :mod:`resilientcc.verify`.

A verdict is ``"proved"`` (the solver answered ``unsat`` to "is there a violation?",
or ``sat`` to "is there a consistent issue order?" for deadlock), ``"violated"``
(with a :class:`Counterexample` decoded from a Z3 model) or ``"unknown"`` (the solver
gave up or ran out of time). The last two are never conflated.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any

from resilientcc.schedules.ir import Transfer

__all__ = [
    "PROPERTIES",
    "PROVED",
    "UNKNOWN",
    "VERDICTS",
    "VIOLATED",
    "Counterexample",
    "FailurePoint",
    "PropertyResult",
    "VerificationReport",
]

PROVED = "proved"
VIOLATED = "violated"
UNKNOWN = "unknown"
VERDICTS = (PROVED, VIOLATED, UNKNOWN)
#: Property names, in the order :func:`resilientcc.verify.verify` checks them.
PROPERTIES = ("deadlock_free", "race_free", "lossless", "failover_lossless")


def _fmt_chunks(t: Transfer) -> str:
    return f"chunk {t.chunk}" if t.count == 1 else f"chunks {t.chunk}-{t.chunk + t.count - 1}"


def _fmt_transfer(t: Transfer) -> str:
    return (
        f"#{t.id} {t.op} {_fmt_chunks(t)}: rank {t.src} -> rank {t.dst} "
        f"(channel {t.channel}, deps {list(t.deps)})"
    )


@dataclass(frozen=True)
class FailurePoint:
    """Where a failure struck, decoded from a Z3 model.

    Attributes:
        channels: the failed channel(s), in failure order.
        server: the server whose NIC failed (None: the channel failed on every server).
        times: the order of the failures (1 = first), one per channel.
        completed: ids on the failed channel(s) that had completed before the failure.
        in_flight: ``(id, outcome)`` for the transfers in flight, outcome in
            ``delivered`` / ``half-delivered`` / ``lost`` (the sender cannot tell).
        not_started: ids on the failed channel(s) not yet started (simply re-routed).
        committed: ``(id, times committed)`` for every transfer committed other than once.
    """

    channels: tuple[int, ...]
    server: int | None = None
    times: tuple[int, ...] = ()
    completed: tuple[int, ...] = ()
    in_flight: tuple[tuple[int, str], ...] = ()
    not_started: tuple[int, ...] = ()
    committed: tuple[tuple[int, int], ...] = ()

    def __str__(self) -> str:
        where = f" of server {self.server}" if self.server is not None else ""
        if len(self.channels) == 1:
            head = f"channel {self.channels[0]}{where} fails"
        else:
            order = sorted(zip(self.times, self.channels, strict=True))
            head = f"channels {' then '.join(str(c) for _, c in order)}{where} fail"
        lines = [
            f"{head}: at that point {len(self.completed)} of its transfers (in this chunk) "
            f"completed, {len(self.in_flight)} in flight, {len(self.not_started)} not started"
        ]
        for tid, outcome in self.in_flight:
            lines.append(f"  in flight: #{tid} -> {outcome}; re-sent on a surviving channel")
        for tid, n in self.committed:
            lines.append(f"  receiver commits #{tid} {n} times")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "channels": list(self.channels),
            "server": self.server,
            "times": list(self.times),
            "completed": list(self.completed),
            "in_flight": [[t, o] for t, o in self.in_flight],
            "not_started": list(self.not_started),
            "committed": [[t, n] for t, n in self.committed],
        }


@dataclass(frozen=True)
class Counterexample:
    """A human-readable witness that a property fails.

    Attributes:
        property: the property it violates.
        summary: one line saying what goes wrong.
        transfers: the transfers involved (the racing pair, the cycle, the double commit).
        rank, chunk, contribution, multiplicity: a wrong final multiplicity
            (``rank`` holds ``contribution`` ``multiplicity`` times in ``chunk``; expected 1).
        failure: the failure point and delivery outcomes (failover only).
        trace: extra lines (times from the model, the cycle's edges).
    """

    property: str
    summary: str
    transfers: tuple[Transfer, ...] = ()
    rank: int | None = None
    chunk: int | None = None
    contribution: int | None = None
    multiplicity: int | None = None
    failure: FailurePoint | None = None
    trace: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = [f"{self.property} violated: {self.summary}"]
        if self.multiplicity is not None:
            lines.append(
                f"  rank {self.rank}, chunk {self.chunk}: contribution of rank "
                f"{self.contribution} counted {self.multiplicity} times (expected 1)"
            )
        if self.failure is not None:
            lines.extend("  " + x for x in str(self.failure).splitlines())
        if self.transfers:
            lines.append("  transfers involved:")
            lines.extend("    " + _fmt_transfer(t) for t in self.transfers)
        lines.extend("  " + x for x in self.trace)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "property": self.property,
            "summary": self.summary,
            "transfers": [
                {
                    "id": t.id,
                    "src": t.src,
                    "dst": t.dst,
                    "chunk": t.chunk,
                    "count": t.count,
                    "op": t.op,
                    "deps": list(t.deps),
                    "channel": t.channel,
                }
                for t in self.transfers
            ],
            "rank": self.rank,
            "chunk": self.chunk,
            "contribution": self.contribution,
            "multiplicity": self.multiplicity,
            "failure": self.failure.to_dict() if self.failure is not None else None,
            "trace": list(self.trace),
        }


@dataclass(frozen=True)
class PropertyResult:
    """The verdict on one property.

    Attributes:
        property: its name (see :data:`PROPERTIES`).
        verdict: ``proved`` / ``violated`` / ``unknown``.
        counterexample: set when violated.
        seconds: wall time spent on it.
        detail: how it was decided (slices, solver answer, reason for unknown).
    """

    property: str
    verdict: str
    counterexample: Counterexample | None = None
    seconds: float = 0.0
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "property": self.property,
            "verdict": self.verdict,
            "counterexample": (
                self.counterexample.to_dict() if self.counterexample is not None else None
            ),
            "seconds": round(self.seconds, 6),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class VerificationReport:
    """Outcome of :func:`resilientcc.verify.verify`.

    Attributes:
        verdict: ``proved`` (every property proved), ``violated`` (one failed; see
            ``counterexample``) or ``unknown`` (none failed but one was not decided).
        property: the violated (or undecided) property, or ``"all"`` when proved.
        counterexample: the witness when violated.
        seconds: total wall time.
        results: the per-property results, in checking order.
        schedule: the schedule's name.
    """

    verdict: str
    property: str
    counterexample: Counterexample | None
    seconds: float
    results: tuple[PropertyResult, ...] = field(default_factory=tuple)
    schedule: str = ""

    @builtins.property
    def proved(self) -> bool:
        return self.verdict == PROVED

    def result(self, prop: str) -> PropertyResult | None:
        """The result for ``prop``, or None if it was not checked."""
        for r in self.results:
            if r.property == prop:
                return r
        return None

    def __str__(self) -> str:
        head = f"{self.schedule or 'schedule'}: {self.verdict}"
        if self.verdict == PROVED:
            head += " (" + ", ".join(r.property for r in self.results) + ")"
        else:
            head += f" ({self.property})"
        lines = [head + f" in {self.seconds:.2f} s"]
        for r in self.results:
            lines.append(f"  {r.property:18s} {r.verdict:9s} {r.seconds:7.2f} s  {r.detail}")
        if self.counterexample is not None:
            lines.append(str(self.counterexample))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule,
            "verdict": self.verdict,
            "property": self.property,
            "counterexample": (
                self.counterexample.to_dict() if self.counterexample is not None else None
            ),
            "seconds": round(self.seconds, 6),
            "results": [r.to_dict() for r in self.results],
        }
