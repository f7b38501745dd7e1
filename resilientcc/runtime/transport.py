"""How ranks exchange messages: in-process queues, or torch.distributed's gloo backend.

A message is a header of :data:`HEADER_LEN` integers ``(kind, sender, transfer id,
elements, channel)`` and, for data, a payload of ``elements`` float64 numbers. A
transport delivers the messages from one sender to one receiver in the order they were
sent (per pair; nothing is promised across pairs), and never drops one: lost messages are
the engine's business (:mod:`resilientcc.runtime.engine` injects the failures).

* :class:`LocalTransport`: one queue per rank, all ranks threads of one process. No
  dependency; what the tests run everywhere.
* :class:`GlooTransport`: one ``torch.distributed.ProcessGroupGloo`` per rank (CPU,
  TCP over the loopback). Headers travel on tag 0 and payloads on tag 1, so a receiver
  takes the next header from any sender (``recv_anysource``) and then that sender's
  payload; a thread per rank does the receiving. torch is imported only here, and only
  when a gloo transport is made.
"""

from __future__ import annotations

import datetime
import queue
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from resilientcc.errors import InputError

__all__ = [
    "ABORT",
    "ACK",
    "BACKENDS",
    "DATA",
    "DONE",
    "END",
    "HEADER_LEN",
    "GlooTransport",
    "LocalTransport",
    "Message",
    "Transport",
    "gloo_available",
    "make_transports",
]

#: message kinds
DATA, ACK, DONE, END, ABORT = 0, 1, 2, 3, 4
HEADER_LEN = 5
BACKENDS = ("local", "gloo")

Message = tuple[np.ndarray, np.ndarray | None]  # (header, payload)

#: a gloo transport looks for finished sends to let go of once this many are pending
PRUNE_EVERY = 256


class Transport(Protocol):
    """What the engine needs of a transport (one object per rank)."""

    rank: int
    world: int

    def send(self, dst: int, header: np.ndarray, payload: np.ndarray | None = None) -> None:
        """Send without waiting; ``payload`` must not be changed afterwards."""

    def receive(self, timeout_s: float) -> Message | None:
        """The next message to this rank, or ``None`` after ``timeout_s`` without one."""

    def close(self) -> None:
        """Wait until every message sent has left, and release what the transport holds."""


class LocalTransport:
    """Ranks as threads of one process, a FIFO queue each (``make_transports`` pairs them)."""

    def __init__(self, rank: int, inboxes: Sequence[queue.Queue[Message]]) -> None:
        self.rank = rank
        self.world = len(inboxes)
        self._inboxes = inboxes

    def send(self, dst: int, header: np.ndarray, payload: np.ndarray | None = None) -> None:
        self._inboxes[dst].put((header.copy(), None if payload is None else payload.copy()))

    def receive(self, timeout_s: float) -> Message | None:
        try:
            return self._inboxes[self.rank].get(timeout=timeout_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        return None


class GlooTransport:
    """One rank of a gloo process group (``make_transports`` builds the group)."""

    def __init__(self, rank: int, world: int, group: Any) -> None:
        self.rank = rank
        self.world = world
        self._pg = group
        # sends not known to have left, with their tensors (gloo reads them until then)
        self._pending: list[tuple[Any, Any]] = []
        self._prune_at = PRUNE_EVERY
        self._inbox: queue.Queue[Message | BaseException] = queue.Queue()
        self._thread = threading.Thread(target=self._receive_loop, daemon=True)
        self._thread.start()

    def _receive_loop(self) -> None:
        import torch

        ends = 0
        try:
            while ends < self.world - 1:
                h = torch.zeros(HEADER_LEN, dtype=torch.int64)
                self._pg.recv_anysource([h], 0).wait()
                header = h.numpy()
                payload = None
                if header[0] == DATA:
                    p = torch.zeros(int(header[3]), dtype=torch.float64)
                    self._pg.recv([p], int(header[1]), 1).wait()
                    payload = p.numpy()
                elif header[0] == END:
                    ends += 1
                self._inbox.put((header, payload))
                if header[0] == ABORT:  # that rank stopped: no END will come from it
                    return
        except BaseException as exc:  # handed to the engine's thread
            self._inbox.put(exc)

    def send(self, dst: int, header: np.ndarray, payload: np.ndarray | None = None) -> None:
        import torch

        h = torch.from_numpy(np.ascontiguousarray(header, dtype=np.int64))
        self._pending.append((self._pg.send([h], dst, 0), h))
        if payload is not None:
            p = torch.from_numpy(np.ascontiguousarray(payload, dtype=np.float64))
            self._pending.append((self._pg.send([p], dst, 1), p))
        if len(self._pending) >= self._prune_at:  # let go of what has left
            self._pending = [(w, t) for w, t in self._pending if not w.is_completed()]
            self._prune_at = max(PRUNE_EVERY, 2 * len(self._pending))

    def receive(self, timeout_s: float) -> Message | None:
        try:
            item = self._inbox.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        for work, _ in self._pending:
            work.wait()
        self._pending.clear()
        self._thread.join(timeout=10)


def gloo_available() -> bool:
    """Whether torch is installed with torch.distributed's gloo backend (imports torch)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return bool(dist.is_available() and dist.is_gloo_available())


def make_transports(backend: str, world: int, timeout_s: float = 60.0) -> list[Transport]:
    """One transport per rank of a ``world``-rank run, all in this process.

    Raises:
        InputError: unknown backend, or ``gloo`` without torch.
    """
    if backend == "local":
        inboxes: list[queue.Queue[Message]] = [queue.Queue() for _ in range(world)]
        return [LocalTransport(r, inboxes) for r in range(world)]
    if backend != "gloo":
        raise InputError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
    if not gloo_available():
        raise InputError(
            "backend 'gloo' needs torch with gloo: pip install 'resilientcc[runtime]' "
            "(or use --backend local)"
        )
    import torch.distributed as dist

    store = dist.HashStore()
    groups: list[Any] = [None] * world
    errors: list[BaseException] = []

    def make(r: int) -> None:
        try:
            opts = dist.ProcessGroupGloo._Options()  # type: ignore[attr-defined]
            opts._devices = [dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
            opts._timeout = datetime.timedelta(seconds=timeout_s)
            groups[r] = dist.ProcessGroupGloo(dist.PrefixStore("rcc", store), r, world, opts)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise InputError(f"backend 'gloo': could not make the process group: {errors[0]}")
    return [GlooTransport(r, world, groups[r]) for r in range(world)]
