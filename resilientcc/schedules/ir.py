"""The Schedule IR (DESIGN.md §5): the contract between schedules, verify, sim and runtime.

A :class:`Schedule` is immutable data: the collective, the number of ranks, the
message size ``size`` (bytes, exact), a partition of the buffer into chunks (exact
fractions of the buffer), and a tuple of :class:`Transfer`.

Semantics (shared by the executor, the verifier, the simulator and the runtime):

* Initial state: for every chunk, rank ``r``'s buffer holds contribution ``{r}`` once.
* A transfer ``t`` may start once every transfer in ``t.deps`` has completed. It reads
  ``src``'s buffer for its chunks (``t.count`` consecutive chunks from ``t.chunk``, one
  unless said otherwise) when it starts and, when it completes, either adds what it read
  into ``dst``'s buffer (``op="reduce"``) or overwrites it (``op="copy"``), chunk by
  chunk. A transfer of several chunks is one message: it moves their bytes together, as
  MSCCL's ``cnt`` does, and is equivalent to one transfer per chunk with the same deps
  that all complete together.
* Connections: transfers with the same ``(src, dst, channel)`` form one connection,
  which is FIFO in increasing ``id`` order: a transfer is issued only after every
  earlier transfer of its connection has been issued (NCCL-like send/recv matching).
* ``channel`` names the NIC / connection that carries the transfer (index into the
  source server's NICs; the simulator maps it, failover remaps it). ``route``
  optionally pins the exact path as node names from the src GPU to the dst GPU.
* Final state for AllReduce: every rank holds every contribution exactly once, for
  every chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

from resilientcc.errors import ScheduleError
from resilientcc.topology.model import MAX_GPUS
from resilientcc.units import MAX_SIZE

__all__ = [
    "COPY",
    "MAX_CHANNEL",
    "OPS",
    "REDUCE",
    "Chunk",
    "Schedule",
    "Transfer",
    "uniform_chunks",
]

#: the largest channel index (the simulator and the exporters keep channels in C ints)
MAX_CHANNEL = 2**20 - 1

REDUCE = "reduce"
COPY = "copy"
OPS = (REDUCE, COPY)


@dataclass(frozen=True)
class Chunk:
    """A piece of the buffer: ``[offset, offset + size)`` as exact fractions of the buffer."""

    index: int
    offset: Fraction
    size: Fraction


@dataclass(frozen=True)
class Transfer:
    """One point-to-point transfer of one chunk, or of a run of consecutive chunks.

    Attributes:
        id: unique id within the schedule (also the FIFO order on a connection).
        src, dst: ranks.
        chunk: chunk index (the first one when ``count`` > 1).
        op: ``"reduce"`` (dst += data) or ``"copy"`` (dst = data).
        deps: ids of transfers that must complete before this one starts.
        channel: NIC / connection index (see module docs).
        route: optional pinned path (node names, src GPU first, dst GPU last).
        count: how many consecutive chunks it carries, ``chunk`` to ``chunk + count − 1``.

    >>> Transfer(0, 0, 1, 4, "copy", count=3).chunk_ids
    range(4, 7)
    """

    id: int
    src: int
    dst: int
    chunk: int
    op: str
    deps: tuple[int, ...] = ()
    channel: int = 0
    route: tuple[str, ...] | None = None
    count: int = 1

    @property
    def chunk_ids(self) -> range:
        """The chunks it carries."""
        return range(self.chunk, self.chunk + self.count)


@dataclass(frozen=True)
class Schedule:
    """An immutable collective schedule; see the module docs for its semantics.

    Attributes:
        name: algorithm name, e.g. ``"ring"``.
        ranks: number of ranks ``p``.
        size: message size in bytes (exact).
        chunks: the buffer partition (sizes sum to 1).
        transfers: the transfers, ids unique.
        collective: ``"allreduce"``.
        topology: fingerprint of the GPU layout the schedule was made for
            (:attr:`Topology.shape_fingerprint`), or ``None``.
        meta: free-form ``(key, value)`` string pairs (generator parameters, stages).
    """

    name: str
    ranks: int
    size: Fraction
    chunks: tuple[Chunk, ...]
    transfers: tuple[Transfer, ...]
    collective: str = "allreduce"
    topology: str | None = None
    meta: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @cached_property
    def by_id(self) -> dict[int, Transfer]:
        return {t.id: t for t in self.transfers}

    def chunk_bytes(self, chunk: int) -> Fraction:
        """Exact size in bytes of a chunk."""
        return self.chunks[chunk].size * self.size

    def transfer_bytes(self, t: Transfer) -> Fraction:
        """Exact size in bytes of a transfer (all its chunks)."""
        return sum((self.chunks[c].size for c in t.chunk_ids), Fraction(0)) * self.size

    def meta_get(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.meta:
            if k == key:
                return v
        return default

    @cached_property
    def channels(self) -> tuple[int, ...]:
        return tuple(sorted({t.channel for t in self.transfers}))

    def check_structure(self) -> Schedule:
        """Check ids, ranks, chunks, ops, deps and the chunk partition; raise ScheduleError.

        Returns the schedule, so it can be chained.
        """
        if self.ranks < 1:
            raise ScheduleError(f"schedule {self.name!r}: needs at least one rank")
        if self.ranks > MAX_GPUS:  # the executor and the verifier allocate per rank
            raise ScheduleError(
                f"schedule {self.name!r}: {self.ranks} ranks, more than {MAX_GPUS:,} (2**17)"
            )
        if self.collective != "allreduce":
            raise ScheduleError(
                f"schedule {self.name!r}: collective {self.collective!r} is not supported "
                "(only allreduce)"
            )
        if self.size <= 0:
            raise ScheduleError(f"schedule {self.name!r}: size must be positive")
        if self.size > MAX_SIZE:
            raise ScheduleError(f"schedule {self.name!r}: size above 2**60 bytes (1 EiB)")
        pos = Fraction(0)
        for i, c in enumerate(self.chunks):
            if c.index != i:
                raise ScheduleError(f"schedule {self.name!r}: chunk {i} has index {c.index}")
            if c.size <= 0:
                raise ScheduleError(f"schedule {self.name!r}: chunk {i} has size {c.size}")
            if c.offset != pos:
                raise ScheduleError(
                    f"schedule {self.name!r}: chunk {i} starts at {c.offset}, expected {pos}"
                )
            pos += c.size
        if pos != 1:
            raise ScheduleError(f"schedule {self.name!r}: chunk sizes sum to {pos}, not 1")
        ids = set()
        for t in self.transfers:
            if t.id in ids:
                raise ScheduleError(f"schedule {self.name!r}: duplicate transfer id {t.id}")
            ids.add(t.id)
        nchunks = len(self.chunks)
        for t in self.transfers:
            w = f"schedule {self.name!r}: transfer {t.id}"
            if not (0 <= t.src < self.ranks and 0 <= t.dst < self.ranks):
                raise ScheduleError(f"{w}: rank out of range ({t.src} -> {t.dst}, p={self.ranks})")
            if t.src == t.dst:
                raise ScheduleError(f"{w}: src and dst are both rank {t.src}")
            if not 0 <= t.chunk < nchunks:
                raise ScheduleError(f"{w}: unknown chunk {t.chunk} ({nchunks} chunks)")
            if t.count < 1 or t.chunk + t.count > nchunks:
                raise ScheduleError(
                    f"{w}: {t.count} chunks from chunk {t.chunk} do not fit ({nchunks} chunks)"
                )
            if t.op not in OPS:
                raise ScheduleError(f"{w}: unknown op {t.op!r} (use reduce or copy)")
            for d in t.deps:
                if d not in ids:
                    raise ScheduleError(f"{w}: depends on unknown transfer {d}")
                if d == t.id:
                    raise ScheduleError(f"{w}: depends on itself")
            if t.channel < 0:
                raise ScheduleError(f"{w}: negative channel {t.channel}")
            if t.channel > MAX_CHANNEL:
                raise ScheduleError(f"{w}: channel {t.channel} above {MAX_CHANNEL:,}")
        return self


def uniform_chunks(n: int) -> tuple[Chunk, ...]:
    """``n`` equal chunks covering the buffer."""
    return tuple(Chunk(i, Fraction(i, n), Fraction(1, n)) for i in range(n))


def chunks_from_sizes(sizes: Iterable[Fraction]) -> tuple[Chunk, ...]:
    """Chunks with the given exact sizes (must be positive and sum to 1)."""
    out = []
    pos = Fraction(0)
    for i, s in enumerate(sizes):
        out.append(Chunk(i, pos, Fraction(s)))
        pos += Fraction(s)
    if pos != 1:
        raise ScheduleError(f"chunk sizes sum to {pos}, not 1")
    return tuple(out)


def renumber(transfers: Iterable[Transfer], mapping: Mapping[int, int]) -> tuple[Transfer, ...]:
    """Rename transfer ids (and their deps) through ``mapping``."""
    import dataclasses

    return tuple(
        dataclasses.replace(t, id=mapping[t.id], deps=tuple(mapping[d] for d in t.deps))
        for t in transfers
    )


__all__ += ["chunks_from_sizes", "renumber"]
