"""The outcome of a simulation: :class:`SimResult` (frozen)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["FloorWindow", "SimResult", "busiest_link_time"]


def busiest_link_time(
    loads: np.ndarray, capacity: np.ndarray, names: Sequence[str]
) -> tuple[float, str]:
    """``(bytes / capacity, name)`` of the link where that is largest (``(0.0, "")`` if none)."""
    if not len(loads) or not loads.any():
        return 0.0, ""
    times = np.divide(loads, capacity, out=np.zeros_like(loads), where=capacity > 0)
    i = int(np.argmax(times))
    return float(times[i]), names[i]


@dataclass(frozen=True)
class FloorWindow:
    """How the run spends its time around the byte floor's link (:meth:`SimResult.floor_window`).

    ``head_s + floor_s + idle_s + tail_s`` is the run's time: before the link's first
    byte, its bytes at full capacity, the rest of its busy window (from its first byte to
    its last: other work, or latency, it waited for), and after its last byte (latencies
    of what came after it, and the base latency). Against the lower bound, ``floor_s``
    says what the schedule's bytes cost and the other three what its dynamics cost.

    Attributes:
        link: the link (``"src->dst"``; ``""`` where no transfer ran).
        floor_s: its bytes over its capacity (:meth:`SimResult.byte_floor`).
        head_s: time before its first transfer started.
        idle_s: its busy window less ``floor_s``.
        tail_s: time after its last transfer finished transmitting.
    """

    link: str
    floor_s: float
    head_s: float
    idle_s: float
    tail_s: float


@dataclass(frozen=True, eq=False)
class SimResult:
    """What :func:`resilientcc.sim.simulate` measured.

    Times are float seconds. Per-transfer arrays are indexed like ``schedule.transfers``;
    per-link arrays like ``topology.links``. Arrays are read-only.

    Attributes:
        schedule: the schedule's name.
        topology: the topology's name.
        time_s: completion time of the collective, ``base_latency_s`` included.
        latency_s: the latency part of ``time_s`` (see ``latency_mode``).
        bandwidth_s: ``time_s − latency_s``.
        base_latency_s: the constant added once (NCCL's base latency).
        latency_mode: ``"critical_path"``: ``latency_s`` is the base latency plus the
            route latencies paid along the critical path (the chain of transfers whose
            completion or connection release started the next one, back from the last
            one), and ``bandwidth_s`` the transmission time along it; ``"rerun"``:
            ``bandwidth_s`` is the time of the same run with every latency zero,
            ``latency_s`` the difference.
        num_transfers: number of transfers.
        num_events: number of event times the simulator processed.
        transfer_ids: transfer ids (``schedule.transfers[i].id``).
        src, dst: ranks of each transfer.
        nbytes: bytes of each transfer.
        start_s: when each transfer started transmitting.
        tx_end_s: when its last byte left (its connection was released).
        end_s: when it completed (``tx_end_s`` + its route's latency).
        route_latency_s: latency of each transfer's route.
        link_names: ``"src->dst"`` of every topology link.
        link_capacity: bytes/s of every link.
        link_bytes: bytes every link carried.
        link_utilisation: ``link_bytes / (capacity · (time_s − base_latency_s))``:
            the average utilisation over the run.
        link_first_s, link_last_s: when the first transfer crossing each link started
            and the last one finished transmitting (NaN where none crosses it).
        critical_path: transfer ids on the critical path, first to last.
    """

    schedule: str
    topology: str
    time_s: float
    latency_s: float
    bandwidth_s: float
    base_latency_s: float
    latency_mode: str
    num_transfers: int
    num_events: int
    transfer_ids: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    start_s: np.ndarray
    tx_end_s: np.ndarray
    end_s: np.ndarray
    route_latency_s: np.ndarray
    link_names: tuple[str, ...]
    link_capacity: np.ndarray
    link_bytes: np.ndarray
    link_utilisation: np.ndarray
    critical_path: tuple[int, ...]
    link_first_s: np.ndarray
    link_last_s: np.ndarray

    def rank_timeline(self, rank: int) -> list[tuple[int, str, int, float, float]]:
        """Transfers a rank sends or receives: ``(id, "send"|"recv", peer, start_s, end_s)``.

        Sorted by start time.
        """
        out: list[tuple[int, str, int, float, float]] = []
        for i in np.flatnonzero((self.src == rank) | (self.dst == rank)):
            kind = "send" if self.src[i] == rank else "recv"
            peer = int(self.dst[i] if kind == "send" else self.src[i])
            out.append(
                (
                    int(self.transfer_ids[i]),
                    kind,
                    peer,
                    float(self.start_s[i]),
                    float(self.end_s[i]),
                )
            )
        out.sort(key=lambda r: (r[3], r[0]))
        return out

    def byte_floor(self) -> tuple[float, str]:
        """``(seconds, link)``: the busiest link's bytes over its capacity.

        No order or overlap of this schedule's transfers ends sooner (latencies aside);
        the same as :func:`resilientcc.sim.flow.byte_floor`, from this run's link bytes.
        """
        return busiest_link_time(self.link_bytes, self.link_capacity, self.link_names)

    def floor_window(self) -> FloorWindow:
        """Where the run's time goes around its byte floor's link: :class:`FloorWindow`.

        Examples:
            >>> from fractions import Fraction
            >>> from resilientcc.topology import hierarchical
            >>> from resilientcc.schedules.ring import ring
            >>> from resilientcc.sim import simulate
            >>> t = hierarchical(2, 8)
            >>> r = simulate(ring(t, Fraction(2**30)), t)
            >>> w = r.floor_window()
            >>> w.link, w.head_s, round((w.floor_s + w.idle_s + w.tail_s) / r.time_s, 12)
            ('s0.nic0->rail0', 0.0, 1.0)
        """
        secs, link = self.byte_floor()
        if not link:
            return FloorWindow("", 0.0, 0.0, 0.0, self.time_s)
        i = self.link_names.index(link)
        first, last = float(self.link_first_s[i]), float(self.link_last_s[i])
        return FloorWindow(link, secs, first, last - first - secs, self.time_s - last)

    def busiest_links(self, k: int = 5) -> list[tuple[str, float, float]]:
        """The ``k`` links with the highest utilisation: ``(name, bytes, utilisation)``."""
        order = np.argsort(-self.link_utilisation, kind="stable")[:k]
        return [
            (self.link_names[i], float(self.link_bytes[i]), float(self.link_utilisation[i]))
            for i in order
        ]

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary (no per-transfer arrays)."""
        return {
            "schedule": self.schedule,
            "topology": self.topology,
            "time_s": self.time_s,
            "latency_s": self.latency_s,
            "bandwidth_s": self.bandwidth_s,
            "base_latency_s": self.base_latency_s,
            "latency_mode": self.latency_mode,
            "num_transfers": self.num_transfers,
            "num_events": self.num_events,
            "busiest_links": [
                {"link": n, "bytes": b, "utilisation": u} for n, b, u in self.busiest_links(5)
            ],
        }
