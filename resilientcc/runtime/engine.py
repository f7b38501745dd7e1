"""One rank's run of a schedule, with NIC-channel failures and lossless migration.

Each rank runs :func:`run_rank` on its own buffer (a float64 array; every rank's has the
same length). The loop alternates between issuing every send that is ready (its deps
known complete, its connection's earlier transfers issued: :mod:`resilientcc.runtime.plan`)
and handling one incoming message:

* ``DATA``: commit the transfer (``reduce`` adds the payload into the chunks, ``copy``
  overwrites them), acknowledge it to the sender, and tell the ranks in
  :attr:`~resilientcc.runtime.plan.RankPlan.notify`;
* ``ACK`` / ``DONE``: the transfer completed;
* ``END``: that rank has nothing more to send;
* ``ABORT``: that rank could not go on (:class:`RunError`), so this one stops too
  (:class:`RunAborted`) rather than wait out its idle timeout. A rank that raises
  :class:`RunError` tells every other rank so before it raises.

A sender reads its chunks when it issues a transfer (the payload is a copy), as the IR
says; the schedule's race-freedom (:mod:`resilientcc.verify.races`) makes every order the
loop may take give the same result.

**Failures** (:class:`ChannelFailure`, the model of :mod:`resilientcc.verify.failover`).
Channel ``c`` of rank ``r`` (one of its NICs) dies when ``r`` is about to send its
``after``-th transfer on it (counting from 0), for every receiver, or only for the
failure's ``peers`` (their NIC on that rail died). That transfer is in flight and is
``delivered`` (the receiver commits it, but the sender cannot tell) or ``lost`` (a
half-delivered transfer is never committed, so it counts as lost), and the sender knows
at once (a send error). Or it is ``silent``: ``c`` swallows that transfer and every
later one to those receivers, with no error, and the rank finds out when a connection
``(c, receiver)`` with sends waiting has had no acknowledgement for ``ack_timeout_s``
(counted from its oldest waiting send or its latest acknowledgement, whichever is
later); it then gives ``c`` up for that receiver. The timeout watches every connection
and cannot tell a dead one from one whose receiver is slow: a live one that stalls that
long is given up too, which costs re-sends and nothing else (the receiver drops the
duplicates), and a rank's last live channel to a receiver is never given up on a
timeout alone.

The migration protocol, once the sender knows: it re-sends, on a surviving channel of
its own (the next one of the schedule's channels that is alive for that receiver), the
in-flight transfer and every transfer it sent on ``c`` to the receivers cut off that is
not acknowledged yet (they may or may not have been delivered: it cannot tell), and
sends every later transfer of ``c`` to them there too, each connection still in its own
FIFO order.
The receiver commits a transfer id at most once and drops duplicates (``dedup``;
without it a re-sent reduce is added twice, which the run's check catches).
Acknowledgements and notices are not lost (they stand for a control path of their own).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from resilientcc.errors import InputError, ResilientCCError, ScheduleError
from resilientcc.runtime.plan import RankPlan, transfer_slices
from resilientcc.runtime.transport import (
    ABORT,
    ACK,
    DATA,
    DONE,
    END,
    HEADER_LEN,
    Transport,
)
from resilientcc.schedules.ir import COPY, Schedule, Transfer

__all__ = [
    "EVENT_KINDS",
    "OUTCOMES",
    "SEND_WINDOW",
    "ChannelFailure",
    "RankStats",
    "RunAborted",
    "RunError",
    "RunEvent",
    "run_rank",
]

OUTCOMES = ("delivered", "lost", "silent")
#: at most this many sends of a rank wait for their acknowledgements at a time
#: (:func:`run_rank`'s ``send_window``). Without a bound, a schedule with thousands of
#: transfers ready at once (the tree packing's lanes) filled the receivers' queues until
#: acknowledgements took longer than the timeout, and the re-sends of the channels given
#: up filled them further: one server of 8 GPUs, 16 MiB (57,344 transfers) over gloo
#: had not finished after 400 s; with 512 it took 57 s, none given up (128: 60 s, 2048:
#: 105 s)
SEND_WINDOW = 512


class RunError(ResilientCCError):
    """A run of a schedule could not finish (no progress, no surviving channel)."""


class RunAborted(RunError):
    """This rank stopped because another rank could not go on (it sent ``ABORT``)."""


@dataclass(frozen=True)
class ChannelFailure:
    """Channel ``channel`` of rank ``rank`` dies as it sends its ``after``-th transfer on it.

    ``outcome``: what happens to that transfer, ``"delivered"`` (committed by the
    receiver, unknown to the sender) or ``"lost"``; the sender knows the channel is dead
    at once. ``"silent"``: that transfer and every later one sent on the channel are
    lost without an error, and the sender finds out from a missing acknowledgement.
    ``peers``: the channel dies only for sends to these ranks (a NIC at the other end
    that died: :func:`~resilientcc.runtime.launch.nic_failures`); empty, for every rank.
    ``after`` then counts the sends on the channel to them.
    """

    rank: int
    channel: int
    after: int = 0
    outcome: str = "lost"
    peers: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "peers", tuple(sorted(set(self.peers))))
        if self.rank in self.peers:
            raise ScheduleError(f"failure on rank {self.rank}: its peers cannot include itself")
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
    """What one rank did (counts, bytes, the failures that struck, the channels it gave
    up, and with tracing its events)."""

    rank: int
    sent: int = 0
    resent: int = 0
    duplicates: int = 0
    payload_elements: int = 0
    control_messages: int = 0
    fired: int = 0  # failures of this rank that struck
    migrated: list[tuple[int, int]] = field(default_factory=list)  # (given up, used)
    dropped: int = 0  # messages a silently dead channel swallowed
    detect_s: float = 0.0  # longest wait from a silent failure to its timeout
    max_ack_gap_s: float = 0.0  # longest a waiting connection went without an acknowledgement
    events: list[RunEvent] = field(default_factory=list)  # with run_rank(trace=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RankStats:
        """Undo ``dataclasses.asdict`` (and a JSON round trip: string keys, lists)."""
        d = dict(d)
        d["migrated"] = [(int(c), int(alt)) for c, alt in d.get("migrated", [])]
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
    send_window: int | None = None,
) -> RankStats:
    """Run ``plan`` (rank ``plan.rank`` of ``schedule``) on ``buffer``, in place.

    ``slices``: each chunk's element range (:func:`~resilientcc.runtime.plan.chunk_slices`);
    ``failures``: this rank's channel failures; ``ack_timeout_s``: how long a
    connection (channel, receiver) with sends waiting may go without an acknowledgement
    before the channel is given up for that receiver;
    ``trace``: record a :class:`RunEvent` for everything the rank does
    (:attr:`RankStats.events`); ``send_window``: at most this many sends of this rank
    unacknowledged at a time (``None``: :data:`SEND_WINDOW`), so that a receiver's
    backlog, and the wait for its acknowledgements, stay bounded.

    Raises:
        RunError: no message for ``idle_timeout_s`` while waiting, or every channel of
            this rank to some receiver dead (the other ranks are sent ``ABORT`` first).
        RunAborted: another rank sent ``ABORT``.
    """
    me = plan.rank
    by_id = schedule.by_id
    stats = RankStats(me)
    channels = list(schedule.channels)
    others = frozenset(range(transport.world)) - {me}
    # per channel, the ranks it is known dead for, and those it is silently dead for (not
    # noticed yet); a NIC of this rank that died is dead for every rank
    dead: dict[int, set[int]] = {c: set() for c in channels}
    silent: dict[int, set[int]] = {c: set() for c in channels}
    # per receiver, how many channels are not known dead for it (kept with ``dead``, so
    # that the timeout scan need not count them for every connection: with the tree
    # packing's thousands of lanes that count made a run quadratic)
    alive_to = dict.fromkeys(others, len(channels))
    silent_since: dict[tuple[int, int], float] = {}
    mine = [f for f in failures if f.rank == me]
    scopes = [frozenset(f.peers) or others for f in mine]  # the ranks each failure hits
    counts = [0] * len(mine)  # sends so far on each failure's channel to its ranks
    fired = [False] * len(mine)
    known: set[int] = set()  # completed transfers this rank knows of
    committed: set[int] = set()
    # id -> (channel it was last sent on, the data read when it was issued): kept until
    # acknowledged, for re-sending
    unacked: dict[int, tuple[int, np.ndarray]] = {}
    # per (channel, receiver), (time sent, id) in the order sent: the front is the oldest
    # send there that may still wait for its acknowledgement (stale entries are skipped)
    watch: dict[tuple[int, int], deque[tuple[float, int]]] = {}
    last_ack: dict[tuple[int, int], float] = {}  # when an acknowledgement last came there
    queues = {k: list(ids) for k, ids in plan.connections.items()}
    heads = {k: 0 for k in queues}
    waiting = set(queues)  # connections with transfers left to issue
    # connections to look at, and those parked on a completion they wait for (each
    # connection is in one of the two, or done)
    ready: deque[tuple[int, int]] = deque(queues)
    # connections held back while the send window is full
    held: list[tuple[int, int]] = []
    window = SEND_WINDOW if send_window is None else send_window
    if window < 1:
        raise InputError(f"the send window must be at least 1, got {window}")
    parked: dict[int, list[tuple[int, int]]] = {}
    ends = 0
    end_sent = False
    last_heard = time.monotonic()
    next_check = last_heard  # no channel's timeout can fall before this

    def payload_of(t: Transfer) -> np.ndarray:
        parts = [buffer[a:b] for a, b in transfer_slices(t, slices)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def surviving(c: int, dst: int) -> int:
        """The channel to use for ``dst`` in place of ``c``: the next one alive for it."""
        at = channels.index(c)
        for k in range(1, len(channels) + 1):
            alt = channels[(at + k) % len(channels)]
            if dst not in dead[alt]:
                return alt
        raise RunError(f"rank {me}: every channel to rank {dst} is dead: nothing left to send on")

    def record(
        kind: str, transfer: int = -1, channel: int = -1, peer: int = -1, detail: str = ""
    ) -> None:
        if trace:
            stats.events.append(
                RunEvent(me, time.monotonic(), kind, transfer, channel, peer, detail)
            )

    def transmit(t: Transfer, channel: int, data: np.ndarray, again: bool = False) -> None:
        if t.dst in silent[channel]:
            stats.dropped += 1  # swallowed; the sender cannot tell
            record("swallowed", t.id, channel, t.dst)
        else:
            transport.send(t.dst, _header(DATA, me, t.id, data.size, channel), data)
            record("resend" if again else "send", t.id, channel, t.dst)
        stats.sent += 1
        stats.payload_elements += data.size
        unacked[t.id] = (channel, data)
        watch.setdefault((channel, t.dst), deque()).append((time.monotonic(), t.id))

    def give_up(c: int, ranks: frozenset[int] | set[int], why: str, skip: int = -1) -> None:
        """Channel ``c`` is known dead for ``ranks``: re-send to them, on the channel that
        each now uses, what ``c`` may have lost."""
        ranks = set(ranks) - dead[c]
        if not ranks:
            return
        dead[c] |= ranks
        for d in ranks:
            alive_to[d] = alive_to.get(d, len(channels)) - 1
        silent[c] -= ranks
        alt = surviving(c, min(ranks))
        stats.migrated.append((c, alt))
        to = (
            ""
            if ranks == others
            else f" to rank{'s' if len(ranks) > 1 else ''} " + ", ".join(map(str, sorted(ranks)))
        )
        record("give_up", channel=c, detail=f"{why}; channel {c}{to} now {alt}")
        # everything on c to them not acknowledged: maybe delivered, maybe not; again
        for tid, (ch, sent) in sorted(unacked.items()):
            t = by_id[tid]
            if ch == c and t.dst in ranks and tid != skip:
                transmit(t, surviving(c, t.dst), sent, again=True)
                stats.resent += 1

    def issue(t: Transfer) -> None:
        data = payload_of(t)  # read when issued
        c, dst = t.channel, t.dst
        hit = None
        for i, f in enumerate(mine):
            if f.channel == c and dst in scopes[i]:
                if not fired[i] and counts[i] == f.after:
                    hit = i
                counts[i] += 1
        if dst in dead[c]:
            transmit(t, surviving(c, dst), data)
            return
        if hit is not None:
            f, fired[hit] = mine[hit], True
            stats.fired += 1
            record("fail", t.id, c, dst, f.outcome)
            live = scopes[hit] - dead[c]
            if f.outcome == "silent":  # from now on c swallows what it is given for them
                silent[c] |= live
                now = time.monotonic()
                silent_since.update({(c, d): now for d in live})
            else:
                if f.outcome == "delivered":  # it arrives, but the sender cannot tell
                    transmit(t, c, data)
                    stats.resent += 1
                give_up(c, live, "send error", skip=t.id)
                transmit(t, surviving(c, dst), data, again=f.outcome == "delivered")
                return
        transmit(t, c, data)

    def waiting_since(key: tuple[int, int]) -> float | None:
        """Since when connection ``key`` = (channel, receiver) has waited for an
        acknowledgement (``None``: it is not waiting): its oldest unacknowledged send, or
        its latest acknowledgement."""
        q = watch[key]
        while q and not (q[0][1] in unacked and unacked[q[0][1]][0] == key[0]):
            q.popleft()
        return max(q[0][0], last_ack.get(key, 0.0)) if q else None

    def next_timeout() -> tuple[float, tuple[int, int]] | None:
        """(when, (channel, receiver)): the first to be given up if no acknowledgement
        comes from that receiver on that channel, counted from its oldest send still
        waiting or its latest acknowledgement."""
        first: tuple[float, tuple[int, int]] | None = None
        for key in watch:
            c, dst = key
            if dst in dead[c] or alive_to.get(dst, len(channels)) < 2:
                continue  # dead already, or the last live channel to dst: kept
            since = waiting_since(key)
            if since is not None and (first is None or since + ack_timeout_s < first[0]):
                first = (since + ack_timeout_s, key)
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
        tell = plan.notify.get(tid, ())
        for r in tell:
            transport.send(r, _header(DONE, me, tid))
        stats.control_messages += 1 + len(tell)

    def advance(key: tuple[int, int]) -> None:
        """Issue connection ``key``'s transfers up to the first whose deps are not all
        known, and park the connection on one dep it waits for."""
        ids = queues[key]
        i = heads[key]
        while i < len(ids):
            if len(unacked) >= window:
                held.append(key)
                break
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

    try:
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
                    c, dst = due[1]
                    if dst in silent[c]:
                        stats.detect_s = max(stats.detect_s, now - silent_since[(c, dst)])
                    # nothing acknowledged there for too long: given up for that receiver
                    give_up(c, {dst}, f"no acknowledgement from rank {dst} for {ack_timeout_s:g} s")
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
                    key = (unacked[tid][0], by_id[tid].dst)
                    since = waiting_since(key)
                    if since is not None:
                        stats.max_ack_gap_s = max(stats.max_ack_gap_s, now - since)
                    last_ack[key] = now
                    del unacked[tid]
                    if held and len(unacked) < window:
                        ready.extend(held)
                        held.clear()
                learn(tid)
            elif kind == DONE:
                learn(tid)
            elif kind == END:
                ends += 1
            elif kind == ABORT:
                raise RunAborted(f"rank {me}: stopped: rank {int(header[1])} could not go on")
    except RunAborted:
        raise
    except RunError:
        for r in sorted(others):  # the others stop rather than wait out their timeout
            with contextlib.suppress(Exception):  # best effort: a transport already broken
                transport.send(r, _header(ABORT, me, -1))
        raise
