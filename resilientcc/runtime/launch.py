"""Run a schedule on real buffers and check the result.

:func:`run_schedule` gives every rank a buffer of ``elements`` float64 numbers (whole
numbers drawn from ``seed``, so every sum is exact in any order), runs
:func:`~resilientcc.runtime.engine.run_rank` for each rank in a thread of its own over
the chosen transport (``local`` queues or torch.distributed's ``gloo``), or in a process
of its own over gloo (``processes``, :mod:`resilientcc.runtime.processes`), and compares
every rank's final buffer with the sum of all the inputs, element by element.

Examples:
    >>> from resilientcc.schedules.generators import generate
    >>> from resilientcc.topology import hierarchical
    >>> s = generate("ring", hierarchical(2, 2), 2**20)
    >>> r = run_schedule(s, elements=64, failures=[ChannelFailure(0, 0, after=1)])
    >>> r.exact, r.failed, r.resent >= 0
    (True, 1, True)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from resilientcc.errors import InputError
from resilientcc.runtime.engine import (
    ChannelFailure,
    RankStats,
    RunAborted,
    RunError,
    RunEvent,
    run_rank,
)
from resilientcc.runtime.plan import RankPlan, chunk_slices, rank_plans
from resilientcc.runtime.processes import make_inputs, run_processes
from resilientcc.runtime.transport import make_transports
from resilientcc.schedules.ir import Schedule
from resilientcc.topology.model import Topology

__all__ = ["RunResult", "check_run", "nic_failures", "run_schedule", "summarize"]


@dataclass(frozen=True)
class RunResult:
    """The outcome of :func:`run_schedule`.

    Attributes:
        schedule: the schedule's name; ``ranks``, ``transfers``: its size.
        backend: ``"local"`` or ``"gloo"``; ``processes``: every rank a process (else
            a thread); ``elements``: numbers per buffer.
        wall_s: wall-clock time of the run (threads started to threads joined).
        exact: every rank ends with the exact sum of all inputs.
        wrong_ranks: the ranks that do not (empty when ``exact``).
        max_error: the largest absolute difference from the sum, over all ranks.
        sent: data messages sent (re-sends included); ``resent``: re-sends;
            ``duplicates``: copies a receiver dropped (or, without dedup, committed
            again); ``control_messages``: acknowledgements and notices.
        payload_elements: numbers carried by the data messages.
        failed: channel failures that struck; ``migrations``: ``(rank, channel given
            up, channel used instead)`` each time a rank gave a channel up, for every
            receiver or for some (a silent failure is found receiver by receiver, and a
            timeout can give up a live channel too).
        dedup: receivers dropped duplicates (the protocol); ``False`` committed them.
        dropped: messages swallowed by silently dead channels; ``detect_s``: the
            longest time from a silent failure until its sender gave the channel up
            (``ack_timeout_s`` and a little more); ``max_ack_gap_s``: the longest a connection
            (channel, receiver) with sends waiting went without an acknowledgement,
            where one then came (how close the run came to giving a live one up).
        ack_timeout_s: how long a connection could wait for an acknowledgement.
        distributed: every rank a process of a torch.distributed job started by its
            launcher (torchrun; :mod:`resilientcc.runtime.distributed`).
        events: with ``trace``, what every rank did, in time order
            (:func:`~resilientcc.runtime.trace.write_run_trace` writes them to a file).
    """

    schedule: str
    ranks: int
    transfers: int
    backend: str
    elements: int
    wall_s: float
    exact: bool
    wrong_ranks: tuple[int, ...]
    max_error: float
    sent: int
    resent: int
    duplicates: int
    control_messages: int
    payload_elements: int
    failed: int
    migrations: tuple[tuple[int, int, int], ...]
    dedup: bool = True
    processes: bool = False
    dropped: int = 0
    detect_s: float = 0.0
    max_ack_gap_s: float = 0.0
    ack_timeout_s: float = 10.0
    distributed: bool = False
    events: tuple[RunEvent, ...] = ()


def nic_failures(
    schedule: Schedule,
    topology: Topology,
    server: int,
    nic: int,
    after: int = 0,
    outcome: str = "lost",
    inbound: bool = True,
) -> list[ChannelFailure]:
    """NIC ``nic`` of ``server`` dying, both ways: channel ``nic`` fails on every GPU of
    the server that sends on it, and (``inbound``) for every other GPU's sends on channel
    ``nic`` to the server's GPUs (they arrive through that NIC, on its rail), each as the
    sender sends its ``after``-th transfer there.

    Each GPU finds the NIC dead at its own send (there is no shared clock across ranks);
    GPUs that send ``after`` transfers or fewer there never notice and are left out.

    Raises:
        InputError: unknown server, or no GPU of it would notice.

    >>> from fractions import Fraction
    >>> from resilientcc.schedules.generators import generate
    >>> from resilientcc.topology import hierarchical
    >>> t = hierarchical(2, 2)
    >>> fs = nic_failures(generate("ring", t, Fraction(2**20)), t, 1, 0, after=2)
    >>> tuple((f.rank, f.peers) for f in fs)  # server 1's GPUs, and rank 1's sends into it
    ((2, ()), (3, ()), (1, (2, 3)))
    """
    gpus = topology.gpus_of_server.get(server)
    if gpus is None:
        raise InputError(
            f"NIC failure on server {server}: the cluster has servers "
            f"{', '.join(map(str, topology.servers))}"
        )
    plans = rank_plans(schedule)
    inside = tuple(g.rank for g in gpus if g.rank is not None)
    out = [ChannelFailure(r, nic, after, outcome) for r in inside if after < plans[r].sends_on(nic)]
    if inbound:
        out += [
            ChannelFailure(r, nic, after, outcome, peers=inside)
            for r in range(schedule.ranks)
            if r not in inside and after < plans[r].sends_on(nic, inside)
        ]
    if not out:
        raise InputError(
            f"NIC {nic} of server {server} after {after} sends: no GPU sends more than "
            f"{after} transfer{'s' if after != 1 else ''} on channel {nic} from or to the "
            "server, so it would never be noticed"
        )
    return out


def run_schedule(
    schedule: Schedule,
    *,
    elements: int = 4096,
    backend: str = "local",
    failures: Sequence[ChannelFailure] = (),
    dedup: bool = True,
    seed: int = 0,
    idle_timeout_s: float = 60.0,
    processes: bool = False,
    ack_timeout_s: float = 10.0,
    trace: bool = False,
    send_window: int | None = None,
) -> RunResult:
    """Run ``schedule`` on ``schedule.ranks`` buffers of ``elements`` numbers and check it.

    Every rank is a thread of this process, or with ``processes`` (gloo only) a process
    of its own that joins ``torch.distributed``'s default group
    (:mod:`resilientcc.runtime.processes`). A channel that has had no acknowledgement
    from a receiver for ``ack_timeout_s`` is given up for that receiver (how
    ``"silent"`` failures are found). With ``trace``, every rank records what it does
    (:attr:`RunResult.events`). ``send_window``: at most this many sends of a rank
    unacknowledged at a time (threads only; ``None``:
    :data:`~resilientcc.runtime.engine.SEND_WINDOW`, as in processes).

    Raises:
        InputError: bad arguments (:func:`check_run`), or an unknown backend.
        RunError: a rank made no progress for ``idle_timeout_s`` or lost every channel
            to some receiver.
    """
    if processes and backend != "gloo":
        raise InputError(f"processes run over gloo, not backend {backend!r}")
    plans = check_run(schedule, elements, failures, ack_timeout_s, send_window)
    inputs = make_inputs(schedule.ranks, elements, seed)
    expected = inputs.sum(axis=0)
    if processes:
        buffers, done, wall = run_processes(
            schedule,
            elements=elements,
            failures=failures,
            dedup=dedup,
            seed=seed,
            idle_timeout_s=idle_timeout_s,
            ack_timeout_s=ack_timeout_s,
            trace=trace,
        )
    else:
        buffers = inputs.copy()
        done, wall = _run_threads(
            schedule,
            plans,
            buffers,
            backend,
            failures,
            dedup,
            idle_timeout_s,
            ack_timeout_s,
            trace,
            send_window,
        )
    errors = np.abs(buffers - expected[None, :]).max(axis=1)
    return summarize(
        schedule,
        done,
        errors=[float(e) for e in errors],
        backend=backend,
        elements=elements,
        wall_s=wall,
        dedup=dedup,
        processes=processes,
        ack_timeout_s=ack_timeout_s,
    )


def check_run(
    schedule: Schedule,
    elements: int,
    failures: Sequence[ChannelFailure],
    ack_timeout_s: float,
    send_window: int | None = None,
) -> tuple[RankPlan, ...]:
    """Check a run's arguments before any rank starts; the schedule's rank plans.

    Raises:
        InputError: ``elements`` below 1, a timeout that is not positive, a send
            window below 1, or a failure on a rank or channel the schedule does not
            have, twice on one channel, or at a send that never comes.
    """
    if elements < 1:
        raise InputError(f"elements must be at least 1, got {elements}")
    if not ack_timeout_s > 0:
        raise InputError(f"the acknowledgement timeout must be positive, got {ack_timeout_s:g} s")
    if send_window is not None and send_window < 1:
        raise InputError(f"the send window must be at least 1, got {send_window}")
    hit: dict[tuple[int, int], set[int]] = {}  # (rank, channel) -> the ranks cut off
    for f in failures:
        if not 0 <= f.rank < schedule.ranks:
            raise InputError(
                f"failure on rank {f.rank}: the schedule has ranks 0..{schedule.ranks - 1}"
            )
        if f.channel not in schedule.channels:
            raise InputError(
                f"failure on channel {f.channel} of rank {f.rank}: the schedule's channels are "
                f"{', '.join(map(str, schedule.channels))}"
            )
        if any(not 0 <= p < schedule.ranks for p in f.peers):
            raise InputError(
                f"failure on channel {f.channel} of rank {f.rank}: peers {list(f.peers)} are "
                f"not all ranks of 0..{schedule.ranks - 1}"
            )
        scope = set(f.peers) or set(range(schedule.ranks)) - {f.rank}
        if scope & hit.get((f.rank, f.channel), set()):
            raise InputError(
                f"two failures of channel {f.channel} of rank {f.rank} for the same ranks: "
                "a channel dies once"
            )
        hit.setdefault((f.rank, f.channel), set()).update(scope)
    plans = rank_plans(schedule)
    for f in failures:
        on = plans[f.rank].sends_on(f.channel, f.peers)
        where = f"channel {f.channel} of rank {f.rank}" + (
            f" to ranks {', '.join(map(str, f.peers))}" if f.peers else ""
        )
        if f.after >= on:
            raise InputError(
                f"failure on {where} after {f.after} sends: it sends {on} "
                f"transfer{'s' if on != 1 else ''} there, so it would never fire "
                f"(use 0..{on - 1})"
                if on
                else f"failure on {where}: the rank sends nothing there"
            )
    return plans


def summarize(
    schedule: Schedule,
    done: Sequence[RankStats],
    *,
    errors: Sequence[float],
    backend: str,
    elements: int,
    wall_s: float,
    dedup: bool,
    processes: bool,
    ack_timeout_s: float,
    distributed: bool = False,
) -> RunResult:
    """The :class:`RunResult` of a run: every rank's counts and its largest error
    (``errors[r]``, 0 where rank ``r`` holds the exact sum)."""
    wrong = tuple(r for r, e in enumerate(errors) if e > 0)
    return RunResult(
        schedule=schedule.name,
        ranks=schedule.ranks,
        transfers=len(schedule.transfers),
        backend=backend,
        elements=elements,
        wall_s=wall_s,
        exact=not wrong,
        wrong_ranks=wrong,
        max_error=max(errors, default=0.0),
        sent=sum(s.sent for s in done),
        resent=sum(s.resent for s in done),
        duplicates=sum(s.duplicates for s in done),
        control_messages=sum(s.control_messages for s in done),
        payload_elements=sum(s.payload_elements for s in done),
        failed=sum(s.fired for s in done),
        migrations=tuple((s.rank, c, alt) for s in done for c, alt in s.migrated),
        dedup=dedup,
        processes=processes,
        dropped=sum(s.dropped for s in done),
        detect_s=max((s.detect_s for s in done), default=0.0),
        max_ack_gap_s=max((s.max_ack_gap_s for s in done), default=0.0),
        ack_timeout_s=ack_timeout_s,
        distributed=distributed,
        events=tuple(sorted((e for s in done for e in s.events), key=lambda e: e.time_s)),
    )


def _run_threads(
    schedule: Schedule,
    plans: Sequence[RankPlan],
    buffers: np.ndarray,
    backend: str,
    failures: Sequence[ChannelFailure],
    dedup: bool,
    idle_timeout_s: float,
    ack_timeout_s: float,
    trace: bool,
    send_window: int | None = None,
) -> tuple[list[RankStats], float]:
    """Every rank a thread over ``backend``'s transports, on ``buffers`` in place."""
    slices = chunk_slices(schedule, buffers.shape[1])
    transports = make_transports(backend, schedule.ranks, timeout_s=max(idle_timeout_s, 30.0))
    stats: list[RankStats | None] = [None] * schedule.ranks
    errors: list[BaseException] = []

    def work(r: int) -> None:
        try:
            stats[r] = run_rank(
                schedule,
                plans[r],
                transports[r],
                buffers[r],
                slices,
                failures=[f for f in failures if f.rank == r],
                dedup=dedup,
                idle_timeout_s=idle_timeout_s,
                ack_timeout_s=ack_timeout_s,
                trace=trace,
                send_window=send_window,
            )
            transports[r].close()
        except BaseException as exc:
            errors.append(exc)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=work, args=(r,), daemon=True) for r in range(schedule.ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        # the rank that could not go on, not those it stopped
        first = next((e for e in errors if not isinstance(e, RunAborted)), errors[0])
        if isinstance(first, RunError | InputError):
            raise first
        raise RunError(f"a rank failed: {type(first).__name__}: {first}") from first
    return [s for s in stats if s is not None], wall
