"""One rank's run of a schedule, with NIC-channel failures and lossless migration.

Each rank runs :func:`run_rank` on its own buffer (a float64 array; every rank's has the
same length). The loop alternates between issuing every send that is ready (its deps
known complete, its connection's earlier transfers issued: :mod:`resilientcc.runtime.plan`)
and handling one incoming message:

* ``DATA``: commit the transfer (``reduce`` adds the payload into the chunks, ``copy``
  overwrites them), acknowledge it to the sender, and tell the ranks in
  :attr:`~resilientcc.runtime.plan.RankPlan.notify`;
* ``ACK`` / ``DONE``: the transfer completed;
* ``END``: that rank has nothing more to send.

A sender reads its chunks when it issues a transfer (the payload is a copy), as the IR
says; the schedule's race-freedom (:mod:`resilientcc.verify.races`) makes every order the
loop may take give the same result.

**Failures** (:class:`ChannelFailure`, the model of :mod:`resilientcc.verify.failover`).
Channel ``c`` of rank ``r`` (one of its NICs) dies when ``r`` is about to send its
``after``-th transfer on it (counting from 0). That transfer is in flight and is
``delivered`` (the receiver commits it, but the sender cannot tell) or ``lost`` (a
half-delivered transfer is never committed, so it counts as lost), and the sender
knows at once that ``c`` is dead (a send error). Or it is ``silent``: ``c`` drops that
transfer and every later one the rank sends on it, with no error, and the rank finds
out when a channel with sends waiting has had no acknowledgement for ``ack_timeout_s``
(counted from its oldest waiting send or its latest acknowledgement, whichever is
later). The timeout watches every channel and cannot tell a dead one from one whose
receiver is slow: a live channel that stalls that long is given up too, which costs
re-sends and nothing else (the receiver drops the duplicates), and a rank's last live
channel is never given up on a timeout alone.

The migration protocol, once the sender knows: it re-sends, on a surviving channel of
its own (the next one of the schedule's channels that is alive), the in-flight transfer
and every transfer it sent on ``c`` that is not acknowledged yet (they may or may not
have been delivered: it cannot tell), and sends every later transfer of ``c`` there
too, each connection still in its own FIFO order.
The receiver commits a transfer id at most once and drops duplicates (``dedup``;
without it a re-sent reduce is added twice, which the run's check catches).
Acknowledgements and notices are not lost (they stand for a control path of their own).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from resilientcc.errors import ResilientCCError, ScheduleError
from resilientcc.runtime.plan import RankPlan, transfer_slices
from resilientcc.runtime.transport import ACK, DATA, DONE, END, HEADER_LEN, Transport
from resilientcc.schedules.ir import COPY, Schedule, Transfer

__all__ = [
    "EVENT_KINDS",
    "OUTCOMES",
    "ChannelFailure",
    "RankStats",
    "RunError",
    "RunEvent",
    "run_rank",
]

OUTCOMES = ("delivered", "lost", "silent")


class RunError(ResilientCCError):
    """A run of a schedule could not finish (no progress, no surviving channel)."""


@dataclass(frozen=True)
class ChannelFailure:
    """Channel ``channel`` of rank ``rank`` dies as it sends its ``after``-th transfer on it.

    ``outcome``: what happens to that transfer, ``"delivered"`` (committed by the
    receiver, unknown to the sender) or ``"lost"``; the sender knows the channel is dead
    at once. ``"silent"``: that transfer and every later one sent on the channel are
    lost without an error, and the sender finds out from a missing acknowledgement.
    """

    rank: int
    channel: int
    after: int = 0
    outcome: str = "lost"

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ScheduleError(
                f"failure outcome must be one of {', '.join(OUTCOMES)}, got {self.outcome!r}"
            )
        if self.after < 0:
            raise ScheduleError(f"failure 'after' must be at least 0, got {self.after}")


#: what a :class:`RunEvent` records
EVENT_KINDS = ("send", "resend", "swallowed", "commit", "duplicate", "fail", "give_up")


@dataclass(frozen=True)
class RunEvent:
    """One thing rank ``rank`` did, at ``time_s`` on its clock (``time.monotonic``).

    ``kind`` (:data:`EVENT_KINDS`): ``send`` / ``resend`` / ``swallowed`` (a send that a
    silently dead channel swallowed: the trace knows, the sender does not) of
    ``transfer`` on ``channel`` to ``peer``; ``commit`` / ``duplicate`` (a copy dropped,
    or committed again without dedup) of ``transfer`` from ``peer``; ``fail``: ``channel``
    died (``detail``: the outcome); ``give_up``: the rank gave ``channel`` up (``detail``:
    why, and the channel used instead).
    """

    rank: int
    time_s: float
    kind: str
    transfer: int = -1
    channel: int = -1
    peer: int = -1
    detail: str = ""


@dataclass
class RankStats:
    """What one rank did (counts, bytes, and the failures that fired)."""

    rank: int
    sent: int = 0
    resent: int = 0
    duplicates: int = 0
    payload_elements: int = 0
    control_messages: int = 0
    migrated: dict[int, int] = field(default_factory=dict)  # dead channel -> channel used
    dropped: int = 0  # messages a silently dead channel swallowed
    detect_s: float = 0.0  # longest wait from a silent failure to its timeout
    max_ack_gap_s: float = 0.0  # longest a waiting channel went without an acknowledgement
    events: list[RunEvent] = field(default_factory=list)  # with run_rank(trace=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RankStats:
        """Undo ``dataclasses.asdict`` (and a JSON round trip: string keys, lists)."""
        d = dict(d)
        d["migrated"] = {int(k): int(v) for k, v in d.get("migrated", {}).items()}
        d["events"] = [RunEvent(**e) for e in d.get("events", [])]
        return cls(**d)


def _header(kind: int, rank: int, tid: int, n: int = 0, channel: int = 0) -> np.ndarray:
    h = np.zeros(HEADER_LEN, dtype=np.int64)
    h[:] = (kind, rank, tid, n, channel)
    return h


def run_rank(
    schedule: Schedule,
    plan: RankPlan,
    transport: Transport,
    buffer: np.ndarray,
    slices: tuple[tuple[int, int], ...],
    *,
    failures: Sequence[ChannelFailure] = (),
    dedup: bool = True,
    idle_timeout_s: float = 60.0,
    ack_timeout_s: float = 10.0,
    trace: bool = False,
) -> RankStats:
    """Run ``plan`` (rank ``plan.rank`` of ``schedule``) on ``buffer``, in place.

    ``slices``: each chunk's element range (:func:`~resilientcc.runtime.plan.chunk_slices`);
    ``failures``: this rank's channel failures; ``ack_timeout_s``: how long a channel
    with sends waiting may go without an acknowledgement before it is given up;
    ``trace``: record a :class:`RunEvent` for everything the rank does
    (:attr:`RankStats.events`).

    Raises:
        RunError: no message for ``idle_timeout_s`` while waiting, or every channel of
            this rank dead.
    """
    me = plan.rank
    by_id = schedule.by_id
    stats = RankStats(me)
    channels = list(schedule.channels)
    dead: set[int] = set()
    silent: set[int] = set()  # failed silently, not noticed yet
    silent_since: dict[int, float] = {}
    fail_at = {f.channel: f for f in failures if f.rank == me}
    sent_on: dict[int, int] = {}  # channel -> transfers sent on it so far
    known: set[int] = set()  # completed transfers this rank knows of
    committed: set[int] = set()
    # id -> (channel it was last sent on, the data read when it was issued): kept until
    # acknowledged, for re-sending
    unacked: dict[int, tuple[int, np.ndarray]] = {}
    # per channel, (time sent, id) in the order sent: the front is the oldest send on it
    # that may still wait for its acknowledgement (stale entries are skipped)
    watch: dict[int, deque[tuple[float, int]]] = {c: deque() for c in channels}
    last_ack: dict[int, float] = {}  # channel -> when an acknowledgement last came for it
    queues = {k: list(ids) for k, ids in plan.connections.items()}
    heads = {k: 0 for k in queues}
    waiting = set(queues)  # connections with transfers left to issue
    # connections to look at, and those parked on a completion they wait for (each
    # connection is in one of the two, or done)
    ready: deque[tuple[int, int]] = deque(queues)
    parked: dict[int, list[tuple[int, int]]] = {}
    ends = 0
    end_sent = False
    last_heard = time.monotonic()
    next_check = last_heard  # no channel's timeout can fall before this

    def payload_of(t: Transfer) -> np.ndarray:
        parts = [buffer[a:b] for a, b in transfer_slices(t, slices)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def surviving(c: int) -> int:
        for k in range(1, len(channels) + 1):
            alt = channels[(channels.index(c) + k) % len(channels)]
            if alt not in dead:
                return alt
        raise RunError(
            f"rank {me}: every channel is dead ({sorted(dead)}): nothing left to send on"
        )

    def record(
        kind: str, transfer: int = -1, channel: int = -1, peer: int = -1, detail: str = ""
    ) -> None:
        if trace:
            stats.events.append(
                RunEvent(me, time.monotonic(), kind, transfer, channel, peer, detail)
            )

    def transmit(t: Transfer, channel: int, data: np.ndarray, again: bool = False) -> None:
        if channel in silent:
            stats.dropped += 1  # swallowed; the sender cannot tell
            record("swallowed", t.id, channel, t.dst)
        else:
            transport.send(t.dst, _header(DATA, me, t.id, data.size, channel), data)
            record("resend" if again else "send", t.id, channel, t.dst)
        stats.sent += 1
        stats.payload_elements += data.size
        unacked[t.id] = (channel, data)
        now = time.monotonic()
        watch[channel].append((now, t.id))

    def give_up(c: int, why: str, skip: int = -1) -> int:
        """Channel ``c`` is known dead: re-send what it may have lost; the channel now used."""
        dead.add(c)
        silent.discard(c)
        alt = surviving(c)
        stats.migrated[c] = alt
        record("give_up", channel=c, detail=f"{why}; now channel {alt}")
        # everything on c not acknowledged: maybe delivered, maybe not; send it again
        for tid, (ch, sent) in sorted(unacked.items()):
            if ch == c and tid != skip:
                transmit(by_id[tid], alt, sent, again=True)
                stats.resent += 1
        return alt

    def issue(t: Transfer) -> None:
        data = payload_of(t)  # read when issued
        c = t.channel
        if c in dead:
            c = surviving(c)
        elif c in fail_at and c not in silent and sent_on.get(c, 0) == fail_at[c].after:
            f = fail_at[c]
            record("fail", t.id, c, t.dst, f.outcome)
            if f.outcome == "silent":  # from now on c swallows what it is given
                silent.add(c)
                silent_since[c] = time.monotonic()
            else:
                if f.outcome == "delivered":  # it arrives, but the sender cannot tell
                    transmit(t, c, data)
                    stats.resent += 1
                c = give_up(c, "send error", skip=t.id)
                sent_on[t.channel] = sent_on.get(t.channel, 0) + 1
                transmit(t, c, data, again=f.outcome == "delivered")
                return
        sent_on[t.channel] = sent_on.get(t.channel, 0) + 1
        transmit(t, c, data)

    def waiting_since(c: int) -> float | None:
        """Since when channel ``c`` has waited for an acknowledgement (``None``: it is
        not waiting): its oldest unacknowledged send, or its latest acknowledgement."""
        q = watch[c]
        while q and not (q[0][1] in unacked and unacked[q[0][1]][0] == c):
            q.popleft()
        return max(q[0][0], last_ack.get(c, 0.0)) if q else None

    def next_timeout() -> tuple[float, int] | None:
        """(when, channel): the first live channel to be given up if no acknowledgement
        comes for it, from its oldest send still waiting or its latest acknowledgement."""
        first: tuple[float, int] | None = None
        if len(dead) >= len(channels) - 1:
            return None  # the last live channel is never given up on a timeout alone
        for c in watch:
            since = waiting_since(c)
            if since is not None and c not in dead:
                at = since + ack_timeout_s
                if first is None or at < first[0]:
                    first = (at, c)
        return first

    def commit(tid: int, payload: np.ndarray, channel: int) -> None:
        t = by_id[tid]
        again = tid in committed
        record("duplicate" if again else "commit", tid, channel, t.src)
        if again:
            stats.duplicates += 1
            if dedup:
                return
        pos = 0
        for a, b in transfer_slices(t, slices):
            part = payload[pos : pos + b - a]
            pos += b - a
            if t.op == COPY:
                buffer[a:b] = part
            else:
                buffer[a:b] += part
        if again:  # acknowledged and announced at the first commit already
            return
        committed.add(tid)
        learn(tid)
        transport.send(t.src, _header(ACK, me, tid))
        for r in plan.notify.get(tid, ()):
            transport.send(r, _header(DONE, me, tid))
        stats.control_messages += 1 + len(plan.notify.get(tid, ()))

    def advance(key: tuple[int, int]) -> None:
        """Issue connection ``key``'s transfers up to the first whose deps are not all
        known, and park the connection on one dep it waits for."""
        ids = queues[key]
        i = heads[key]
        while i < len(ids):
            missing = next((d for d in by_id[ids[i]].deps if d not in known), None)
            if missing is not None:
                parked.setdefault(missing, []).append(key)
                break
            issue(by_id[ids[i]])
            i += 1
        heads[key] = i
        if i == len(ids):
            waiting.discard(key)

    def learn(tid: int) -> None:
        """Transfer ``tid`` completed: the connections parked on it may go on."""
        known.add(tid)
        ready.extend(parked.pop(tid, ()))

    while True:
        while ready:
            advance(ready.popleft())
        done = not waiting and not unacked and len(committed) == plan.receives
        if done and not end_sent:
            for r in range(transport.world):
                if r != me:
                    transport.send(r, _header(END, me, -1))
            end_sent = True
        if end_sent and ends == transport.world - 1:
            return stats
        now = time.monotonic()
        if now >= next_check:  # deadlines only move later, and new ones are >= now + T
            due = next_timeout()
            if due is not None and now >= due[0]:
                if due[1] in silent:
                    stats.detect_s = max(stats.detect_s, now - silent_since[due[1]])
                # nothing acknowledged on it for too long: given up
                give_up(due[1], f"no acknowledgement for {ack_timeout_s:g} s")
                continue
            next_check = due[0] if due is not None else now + ack_timeout_s
        wait = min(idle_timeout_s - (now - last_heard), next_check - now)
        msg = transport.receive(max(wait, 1e-3))
        now = time.monotonic()
        if msg is None and now - last_heard < idle_timeout_s:
            continue
        last_heard = now
        if msg is None:
            blocked = [by_id[queues[k][heads[k]]] for k in sorted(waiting)][:3]
            what = "; ".join(
                f"transfer {t.id} waits for {[d for d in t.deps if d not in known]}"
                for t in blocked
            )
            raise RunError(
                f"rank {me}: no message for {idle_timeout_s:g} s "
                f"({len(committed)} of {plan.receives} received, {len(unacked)} not acknowledged"
                + (f"; {what}" if what else "")
                + ")"
            )
        header, payload = msg
        kind, tid = int(header[0]), int(header[2])
        if kind == DATA:
            assert payload is not None
            commit(tid, payload, int(header[4]))
        elif kind == ACK:
            if tid in unacked:
                c = unacked[tid][0]
                since = waiting_since(c)
                if since is not None:
                    stats.max_ack_gap_s = max(stats.max_ack_gap_s, now - since)
                last_ack[c] = now
                del unacked[tid]
            learn(tid)
        elif kind == DONE:
            learn(tid)
        elif kind == END:
            ends += 1
