"""Export schedules to MSCCL XML (as NCCL's MSCCL executor reads it) and import them back.

Format written (one ``<algo>``, in-place AllReduce on the input buffer ``i``)::

    <algo name="optcc" proto="Simple" nchannels="8" nchunksperloop="48" ngpus="16"
          coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0" ...>
      <gpu id="0" i_chunks="48" o_chunks="48" s_chunks="0">
        <tb id="0" send="1" recv="7" chan="0">
          <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="6"
                depid="-1" deps="-1" hasdep="0" .../>

Mapping:

* **Chunks.** MSCCL cuts the buffer into ``nchunksperloop`` equal chunks. A schedule's
  exact :class:`~fractions.Fraction` chunks become whole runs of those: ``L`` = the least
  common multiple of the denominators of every chunk offset and size, so chunk ``c``
  covers ``[offset·L, (offset+size)·L)``; where ``L`` exceeds the executor's chunks per
  loop, :func:`round_for_msccl` rounds the splits first. A run longer than the
  executor's ``count`` limit is sent as several consecutive steps.
* **Transfers.** Each transfer becomes a send step (``type="s"``) on its source GPU and a
  receive step on its destination GPU: ``"r"`` for a copy, ``"rrc"`` (receive, reduce,
  copy) for a reduction.
* **Threadblocks.** A threadblock has at most one send peer and one receive peer and one
  channel; connections ``(src, dst, channel)`` map to one threadblock queue each, so the
  FIFO order of the IR is the step order. Steps are written in a topological order of
  the dependencies and the FIFO order (the id order where that is one), so the
  threadblocks cannot deadlock.
* **Dependencies.** MSCCL steps depend on one step of another threadblock of the same
  GPU (``depid``/``deps``); a dependency is kept when the two transfers share a GPU,
  only the latest step of each threadblock waited for (a threadblock runs its steps in
  order), and the extra ones become ``nop`` steps. Dependencies between transfers on
  disjoint GPUs are implied transitively in the schedules resilientcc generates.
* **Round trip.** Attributes prefixed ``rcc_`` (ignored by the executor) carry what MSCCL
  cannot express (transfer ids, all deps, the exact size, the chunks' sizes, the
  topology fingerprint and the metadata), so :func:`from_msccl_xml` rebuilds an
  identical :class:`Schedule`. The chunks' sizes (run-length coded) sit on ``<algo>``,
  or in pieces on the ``<gpu>`` elements where one attribute cannot hold them.

Limits (NCCL-MSCCL ``msccl_struct.h`` / ``msccl_parser.h``): at most
``MSCCL_MAX_NUM_STEPS`` = 256 steps per threadblock, 32 threadblocks per channel,
``MAXCHANNELS`` = 32 channels, ``MSCCL_MAX_COUNT`` = 72 chunks per step, attribute
values of at most 255 characters and 16 attributes per element. :class:`MscclLimits`
holds them; violating one raises :class:`~resilientcc.errors.ExportError`.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn

from resilientcc.errors import ExportError, ScheduleError, TooFineError
from resilientcc.schedules.ir import COPY, REDUCE, Chunk, Schedule, Transfer
from resilientcc.topology.io import atomic_write_text, read_text

__all__ = [
    "ChunkRounding",
    "MscclFit",
    "MscclLimits",
    "exact_units",
    "fit_msccl",
    "from_msccl_xml",
    "load_msccl",
    "round_chunks",
    "round_for_msccl",
    "save_msccl",
    "to_msccl_xml",
]


@dataclass(frozen=True)
class MscclLimits:
    """The MSCCL executor's limits (defaults: NCCL-MSCCL's ``msccl_struct.h``)."""

    max_steps_per_tb: int = 256
    max_tbs_per_channel: int = 32
    max_channels: int = 32
    max_count: int = 72
    max_chunks_per_loop: int = 1 << 16
    max_attr_len: int = 255
    max_attrs: int = 16


_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:;/=+ ")


def _attr(value: str, what: str, limits: MscclLimits) -> str:
    if len(value) > limits.max_attr_len:
        raise ExportError(
            f"MSCCL export: {what} needs {len(value)} characters, the parser allows "
            f"{limits.max_attr_len}"
        )
    bad = sorted({ch for ch in value if ch not in _SAFE})
    if bad:
        raise ExportError(f"MSCCL export: {what} contains characters MSCCL cannot hold: {bad}")
    return value


#: written as themselves in the metadata; any other character as ``+XX`` per UTF-8 byte
_META_PLAIN = _SAFE - set("+;=")


def _escape(text: str) -> str:
    """The metadata's keys and values in MSCCL-safe characters (``;`` and ``=`` separate them).

    >>> _escape("ring (no degraded server)"), _unescape(_escape("a=b;c+d (é)"))
    ('ring +28no degraded server+29', 'a=b;c+d (é)')
    """
    return "".join(
        ch if ch in _META_PLAIN else "".join(f"+{b:02X}" for b in ch.encode()) for ch in text
    )


def _unescape(text: str) -> str:
    """The inverse of :func:`_escape`. A ``+`` not followed by two hex digits is kept as
    it is, as files written before the escapes have it (``rings + decoupled direct``).

    >>> _unescape("rings + decoupled direct"), _unescape("+28x+29+2")
    ('rings + decoupled direct', '(x)+2')
    """
    if "+" not in text:
        return text
    out = bytearray()
    i = 0
    while i < len(text):
        hex2 = text[i + 1 : i + 3]
        if text[i] == "+" and len(hex2) == 2 and all(c in _HEX for c in hex2):
            out.append(int(hex2, 16))
            i += 3
        else:
            out.extend(text[i].encode())
            i += 1
    return out.decode(errors="replace")


_HEX = frozenset("0123456789ABCDEFabcdef")


@dataclass(frozen=True)
class ChunkRounding:
    """How :func:`round_for_msccl` rounded a schedule's chunks.

    Attributes:
        units: MSCCL chunks per loop of the export (``nchunksperloop``).
        exact_units: what the exact splits would need (the least common multiple of the
            chunks' denominators).
        max_change: the largest change of a chunk's size, as a fraction of that size.
        limit: the executor's chunks per loop it was rounded for
            (:attr:`MscclLimits.max_chunks_per_loop`).
    """

    units: int
    exact_units: int
    max_change: Fraction
    limit: int


def exact_units(schedule: Schedule) -> int:
    """Equal MSCCL chunks the exact splits need: the least common multiple of the
    denominators of every chunk offset and size."""
    den = 1
    for c in schedule.chunks:
        den = math.lcm(den, c.offset.denominator, c.size.denominator)
    return den


def round_chunks(schedule: Schedule, units: int) -> Schedule:
    """``schedule`` with every chunk a whole number of ``1/units`` of the buffer.

    Each chunk gets at least one unit and, in offset order, the nearest whole number of
    units (largest remainders first, so the units add up); the transfers are unchanged,
    so the result is an AllReduce exactly when ``schedule`` is (checked before it is
    returned), only with slightly different splits. Its metadata records
    ``chunks_rounded_to``.

    Raises:
        ExportError: fewer units than chunks.

    >>> from resilientcc.schedules.ir import chunks_from_sizes, Transfer
    >>> ts = (Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 0, 1, 1, "reduce"),
    ...       Transfer(2, 1, 0, 0, "copy", deps=(0,)), Transfer(3, 1, 0, 1, "copy", deps=(1,)))
    >>> s = Schedule("x", 2, Fraction(6), chunks_from_sizes([Fraction(1, 3), Fraction(2, 3)]), ts)
    >>> tuple(str(c.size) for c in round_chunks(s, 4).chunks)
    ('1/4', '3/4')
    """
    from resilientcc.schedules import executor

    chunks = sorted(schedule.chunks, key=lambda c: c.offset)
    if units < len(chunks):
        raise ExportError(
            f"MSCCL export: {len(chunks)} chunks do not fit in {units} equal MSCCL chunks"
        )
    ideal = [c.size * units for c in chunks]
    whole = [max(1, math.floor(x)) for x in ideal]
    spare = units - sum(whole)
    # hand out the spare units by largest remainder, or take back the most rounded-up ones
    if spare >= 0:
        for i in sorted(range(len(chunks)), key=lambda i: whole[i] - ideal[i])[:spare]:
            whole[i] += 1
    else:
        for i in sorted(
            (i for i in range(len(chunks)) if whole[i] > 1), key=lambda i: ideal[i] - whole[i]
        ):
            if spare == 0:
                break
            take = min(whole[i] - 1, -spare)
            whole[i] -= take
            spare += take
    out: list[Chunk] = []
    at = 0
    for c, w in zip(chunks, whole, strict=True):
        out.append(Chunk(c.index, Fraction(at, units), Fraction(w, units)))
        at += w
    out.sort(key=lambda c: c.index)
    rounded = replace(
        schedule,
        chunks=tuple(out),
        meta=(
            *(kv for kv in schedule.meta if kv[0] != "chunks_rounded_to"),
            ("chunks_rounded_to", str(units)),
        ),
    )
    executor.check(rounded)
    return rounded


def round_for_msccl(
    schedule: Schedule, limits: MscclLimits | None = None
) -> tuple[Schedule, ChunkRounding | None]:
    """``schedule`` as :func:`to_msccl_xml` can export it: unchanged where its exact splits
    fit the executor's chunks per loop, else rounded (:func:`round_chunks`) to as many
    units as keep its largest chunk within one step's count (``max_count``), at least one
    per chunk and at most the executor's chunks per loop. Returns the schedule and how
    it was rounded (``None``: not at all).

    Raises:
        TooFineError: more chunks than the executor's chunks per loop.
    """
    lim = limits or MscclLimits()
    exact = exact_units(schedule)
    if exact <= lim.max_chunks_per_loop:
        return schedule, None
    n = len(schedule.chunks)
    if n > lim.max_chunks_per_loop:
        raise TooFineError(
            f"MSCCL export: {n} chunks, more than the executor's {lim.max_chunks_per_loop} per loop"
        )
    biggest = max(c.size for c in schedule.chunks)
    units = min(lim.max_chunks_per_loop, max(n, math.floor(lim.max_count / biggest)))
    rounded = round_chunks(schedule, units)
    change = max(
        abs(new.size - old.size) / old.size
        for old, new in zip(schedule.chunks, rounded.chunks, strict=True)
    )
    return rounded, ChunkRounding(units, exact, change, lim.max_chunks_per_loop)


def _too_many_steps(g: int, tb: int, needed: float, lim: MscclLimits) -> NoReturn:
    raise TooFineError(
        f"MSCCL export: GPU {g} threadblock {tb} needs about {math.ceil(needed)} steps, more "
        f"than {lim.max_steps_per_tb} (the executor's limit): the schedule has too many "
        "transfers on one connection",
        excess=needed / lim.max_steps_per_tb,
    )


def _units(schedule: Schedule, limits: MscclLimits) -> int:
    den = exact_units(schedule)
    if den > limits.max_chunks_per_loop:
        raise TooFineError(
            f"MSCCL export: the chunk sizes need more than {limits.max_chunks_per_loop} "
            "equal MSCCL chunks (least common multiple of their denominators); round "
            "them first (round_for_msccl; rcc synth does)"
        )
    return den


def _attr_pieces(text: str, lim: MscclLimits) -> list[str]:
    """``text`` cut into attribute values of at most ``lim.max_attr_len`` characters."""
    return [text[i : i + lim.max_attr_len] for i in range(0, len(text), lim.max_attr_len)]


def _sizes_code(schedule: Schedule, big_l: int) -> str:
    """The chunks' sizes in MSCCL chunks, run-length coded: ``SIZExCOUNT`` or ``SIZE``,
    comma-separated, in chunk order (the chunks tile the buffer in that order).

    >>> from resilientcc.schedules.ir import chunks_from_sizes
    >>> sizes = [Fraction(1, 8)] * 6 + [Fraction(1, 4)]
    >>> _sizes_code(Schedule("x", 2, Fraction(8), chunks_from_sizes(sizes), ()), 8)
    '1x6,2'
    """
    sizes = [int(c.size * big_l) for c in schedule.chunks]
    return ",".join(
        f"{size}x{n}" if n > 1 else str(size)
        for size, n in ((k, len(list(g))) for k, g in itertools.groupby(sizes))
    )


def _chunk_starts(code: str, big_l: int, where: str) -> list[int]:
    """The chunks' starts from :func:`_sizes_code`'s text, checked to tile ``big_l``."""
    starts, pos = [], 0
    try:
        for token in code.split(","):
            size, _, n = token.partition("x")
            for _ in range(int(n) if n else 1):
                starts.append(pos)
                pos += int(size)
    except ValueError:
        raise ScheduleError(f"{where}: bad rcc_sizes {code[:40]!r}") from None
    if pos != big_l:
        raise ScheduleError(f"{where}: rcc_sizes add up to {pos}, not nchunksperloop {big_l}")
    return starts


def _place_sizes(algo: ET.Element, gpus: Sequence[ET.Element], code: str, lim: MscclLimits) -> None:
    """Write :func:`_sizes_code`'s text on ``<algo>`` where it fits one attribute, else
    in pieces on the ``<gpu>`` elements in order (left out where there are too few: the
    import then reads the chunks from the steps)."""
    if len(code) <= lim.max_attr_len:
        algo.set("rcc_sizes", code)
        return
    parts = _attr_pieces(code, lim)
    if len(parts) <= len(gpus):
        for gpu, part in zip(gpus, parts, strict=False):
            gpu.set("rcc_sizes", part)


def to_msccl_xml(
    schedule: Schedule,
    *,
    limits: MscclLimits | None = None,
    proto: str = "Simple",
    roundtrip: bool = True,
) -> str:
    """The MSCCL XML of ``schedule`` (see the module docs).

    Args:
        schedule: an AllReduce schedule.
        limits: executor limits to enforce.
        proto: MSCCL protocol attribute (``Simple``, ``LL128`` or ``LL``).
        roundtrip: add the ``rcc_*`` attributes that make :func:`from_msccl_xml` exact.

    Raises:
        ExportError: a limit of the executor is exceeded.

    Examples:
        >>> from resilientcc.schedules.ir import Transfer, uniform_chunks
        >>> ts = (Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "copy", deps=(0,)))
        >>> xml = to_msccl_xml(Schedule("pair", 2, Fraction(8), uniform_chunks(1), ts))
        >>> xml.splitlines()[0][:40]
        '<algo name="pair" proto="Simple" nchanne'
    """
    return _export_xml(schedule, limits, proto, roundtrip)[0]


def _export_xml(
    schedule: Schedule, limits: MscclLimits | None, proto: str, roundtrip: bool
) -> tuple[str, int]:
    """:func:`to_msccl_xml`, and the steps of its busiest threadblock."""
    lim = limits or MscclLimits()
    if schedule.collective != "allreduce":
        raise ExportError(f"MSCCL export: only allreduce is supported, not {schedule.collective!r}")
    schedule.check_structure()
    big_l = _units(schedule, lim)
    channels = sorted({t.channel for t in schedule.transfers}) or [0]
    if len(channels) > lim.max_channels or channels[-1] >= lim.max_channels:
        raise ExportError(
            f"MSCCL export: channels {channels[0]}..{channels[-1]} exceed the executor's "
            f"{lim.max_channels} channels"
        )
    by_id = schedule.by_id
    # queues: (gpu, channel, "send"|"recv", peer) -> transfer ids in id order
    send_q: dict[tuple[int, int], dict[int, list[int]]] = {}
    recv_q: dict[tuple[int, int], dict[int, list[int]]] = {}
    written = _step_order(schedule)
    for t in written:
        send_q.setdefault((t.src, t.channel), {}).setdefault(t.dst, []).append(t.id)
        recv_q.setdefault((t.dst, t.channel), {}).setdefault(t.src, []).append(t.id)
    # threadblocks: pair one send peer with one recv peer per (gpu, channel)
    tbs: dict[int, list[tuple[int, int, int]]] = {g: [] for g in range(schedule.ranks)}
    step_owner: dict[tuple[int, str], tuple[int, int]] = {}  # (tid, "s"/"r") -> (gpu, tb)
    tb_meta: dict[tuple[int, int], tuple[int, int, int]] = {}
    for g in range(schedule.ranks):
        for ch in channels:
            sends = sorted(send_q.get((g, ch), {}).items())
            recvs = sorted(recv_q.get((g, ch), {}).items())
            n = max(len(sends), len(recvs))
            if n > lim.max_tbs_per_channel:
                raise ExportError(
                    f"MSCCL export: GPU {g} needs {n} threadblocks on channel {ch}, the "
                    f"executor allows {lim.max_tbs_per_channel}"
                )
            for i in range(n):
                sp, sids = sends[i] if i < len(sends) else (-1, [])
                rp, rids = recvs[i] if i < len(recvs) else (-1, [])
                tb = len(tbs[g])
                tbs[g].append((sp, rp, ch))
                tb_meta[(g, tb)] = (sp, rp, ch)
                for tid in sids:
                    step_owner[(tid, "s")] = (g, tb)
                for tid in rids:
                    step_owner[(tid, "r")] = (g, tb)

    def units_of(t: Transfer) -> tuple[int, int]:
        first, last = schedule.chunks[t.chunk], schedule.chunks[t.chunk + t.count - 1]
        return int(first.offset * big_l), int((last.offset + last.size - first.offset) * big_l)

    # build the step lists per (gpu, tb) in id order, with deps resolved to steps
    steps: dict[tuple[int, int], list[dict[str, str]]] = {k: [] for k in tb_meta}
    first_step: dict[tuple[int, str], tuple[int, int, int]] = {}  # -> (gpu, tb, index)
    last_step: dict[tuple[int, str], tuple[int, int, int]] = {}
    hasdep: set[tuple[int, int, int]] = set()
    # transfer sides (a send or a receive: one step or more each) per threadblock, and
    # how many of them are written so far
    sides = {key: 0 for key in tb_meta}
    for key in step_owner.values():
        sides[key] += 1
    seen = dict.fromkeys(tb_meta, 0)
    g, tb = max(sides, key=sides.__getitem__, default=(0, 0))
    if sides.get((g, tb), 0) > lim.max_steps_per_tb:
        _too_many_steps(g, tb, sides[(g, tb)], lim)
    for tid, side in ((t.id, side) for t in written for side in (0, 1)):
        t = by_id[tid]
        kind = "s" if side == 0 else "r"
        g, tb = step_owner[(tid, kind)]
        off, cnt = units_of(t)
        # local dependencies of this step
        local: list[tuple[int, int, int]] = []
        for d in t.deps:
            dt = by_id[d]
            for dk, dg in (("r", dt.dst), ("s", dt.src)):
                if dg == g:
                    pos = last_step[(d, dk)]
                    if pos[1] != tb:
                        local.append(pos)
                    break
        # a threadblock runs its steps in order: waiting for its latest step is enough
        latest: dict[int, tuple[int, int, int]] = {}
        for pos in local:
            if pos[1] not in latest or pos[2] > latest[pos[1]][2]:
                latest[pos[1]] = pos
        local = sorted(latest.values(), key=lambda pos: (pos[1], pos[2]))
        lst = steps[(g, tb)]
        for pos in local[:-1] if local else []:
            lst.append({"type": "nop", "depid": str(pos[1]), "deps": str(pos[2])})
            hasdep.add(pos)
        dep = local[-1] if local else None
        if dep is not None:
            hasdep.add(dep)
        pieces = max(1, -(-cnt // lim.max_count))
        for k in range(pieces):
            lo = off + cnt * k // pieces
            hi = off + cnt * (k + 1) // pieces
            st: dict[str, str] = {
                "type": ("s" if kind == "s" else ("rrc" if t.op == REDUCE else "r")),
                "srcbuf": "i",
                "srcoff": str(lo),
                "dstbuf": "i",
                "dstoff": str(lo),
                "cnt": str(hi - lo),
                "depid": str(dep[1]) if (dep is not None and k == 0) else "-1",
                "deps": str(dep[2]) if (dep is not None and k == 0) else "-1",
            }
            if roundtrip:
                st["rcc_t"] = str(tid)
                st["rcc_c"] = str(t.chunk)
                if t.count != 1:
                    st["rcc_n"] = str(t.count)
                if kind == "r":
                    st["rcc_d"] = _attr(",".join(map(str, t.deps)), f"deps of transfer {tid}", lim)
                if kind == "s" and t.route is not None:
                    st["rcc_r"] = _attr(" ".join(t.route), f"route of transfer {tid}", lim)
            lst.append(st)
            if k == 0:
                first_step[(tid, kind)] = (g, tb, len(lst) - 1)
        last_step[(tid, kind)] = (g, tb, len(lst) - 1)
        seen[(g, tb)] += 1
        if len(lst) > lim.max_steps_per_tb:
            # its steps so far, scaled to all its transfers: about what it would need
            _too_many_steps(g, tb, len(lst) * sides[(g, tb)] / seen[(g, tb)], lim)
    algo = ET.Element(
        "algo",
        {
            "name": _attr(schedule.name, "name", lim),
            "proto": proto,
            "nchannels": str(channels[-1] + 1),
            "nchunksperloop": str(big_l),
            "ngpus": str(schedule.ranks),
            "coll": "allreduce",
            "inplace": "1",
            "outofplace": "0",
            "minBytes": "0",
            "maxBytes": "0",
        },
    )
    if roundtrip:
        algo.set("rcc_size", _attr(str(schedule.size), "size", lim))
        if schedule.topology is not None:
            algo.set("rcc_topology", _attr(schedule.topology, "topology", lim))
        meta = ";".join(f"{_escape(k)}={_escape(v)}" for k, v in schedule.meta)
        for i, part in enumerate(_attr_pieces(meta, lim)):
            algo.set(f"rcc_meta{i}", _attr(part, "metadata", lim))
        if len(algo.attrib) > lim.max_attrs:
            raise ExportError(
                f"MSCCL export: the metadata needs {len(algo.attrib)} attributes on <algo>, "
                f"the parser allows {lim.max_attrs}; export with roundtrip=False"
            )
    gpus = [
        ET.SubElement(
            algo,
            "gpu",
            {"id": str(g), "i_chunks": str(big_l), "o_chunks": str(big_l), "s_chunks": "0"},
        )
        for g in range(schedule.ranks)
    ]
    if roundtrip:
        _place_sizes(algo, gpus, _sizes_code(schedule, big_l), lim)
    for g, gpu in enumerate(gpus):
        for tb, (sp, rp, ch) in enumerate(tbs[g]):
            tbe = ET.SubElement(
                gpu, "tb", {"id": str(tb), "send": str(sp), "recv": str(rp), "chan": str(ch)}
            )
            for i, st in enumerate(steps[(g, tb)]):
                attrs = {"s": str(i), **st}
                attrs.setdefault("srcbuf", "i")
                attrs.setdefault("srcoff", "-1")
                attrs.setdefault("dstbuf", "i")
                attrs.setdefault("dstoff", "-1")
                attrs.setdefault("cnt", "0")
                attrs["hasdep"] = "1" if (g, tb, i) in hasdep else "0"
                order = [
                    "s",
                    "type",
                    "srcbuf",
                    "srcoff",
                    "dstbuf",
                    "dstoff",
                    "cnt",
                    "depid",
                    "deps",
                    "hasdep",
                ]
                ordered = {k: attrs[k] for k in order}
                ordered.update({k: v for k, v in attrs.items() if k not in ordered})
                ET.SubElement(tbe, "step", ordered)
    ET.indent(algo, space="  ")
    busiest = max((len(lst) for lst in steps.values()), default=0)
    return ET.tostring(algo, encoding="unicode") + "\n", busiest


def _fifo_topological(
    items: Sequence[tuple[Hashable, Iterable[int]]], priority: Sequence[Any]
) -> list[int]:
    """A topological order of ``items`` (each ``(connection, deps)``, deps by index) and
    of each connection's order of appearance, least ``priority`` first among those ready;
    shorter than ``items`` where the two orders form a cycle."""
    succ: list[list[int]] = [[] for _ in items]
    unmet = [0] * len(items)
    last_on: dict[Hashable, int] = {}
    for i, (conn, deps) in enumerate(items):
        before = set(deps)
        if conn in last_on:
            before.add(last_on[conn])
        last_on[conn] = i
        for d in before:
            succ[d].append(i)
        unmet[i] = len(before)
    ready = [(priority[i], i) for i in range(len(items)) if unmet[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _p, i = heapq.heappop(ready)
        order.append(i)
        for j in succ[i]:
            unmet[j] -= 1
            if unmet[j] == 0:
                heapq.heappush(ready, (priority[j], j))
    return order


def _step_order(schedule: Schedule) -> list[Transfer]:
    """The transfers in the order their steps are written: the least-id-first topological
    order of the dependencies and of each connection's FIFO order (the id order where that
    is one already, as in most generated schedules).

    A dependency may name a later id (a generator gating a piece on an earlier piece's
    results), and a threadblock runs its steps in the order written, so writing them in id
    order could make a step wait for one written after it. In a topological order, the
    first unfinished step always has its dependencies done and its peer step at the head
    of the peer's threadblock, so the program cannot deadlock.
    """
    ts = sorted(schedule.transfers, key=lambda t: t.id)
    index = {t.id: i for i, t in enumerate(ts)}
    items = [((t.src, t.dst, t.channel), [index[d] for d in t.deps]) for t in ts]
    order = _fifo_topological(items, [t.id for t in ts])
    if len(order) != len(ts):
        raise ExportError(
            "MSCCL export: the dependencies and the connections' FIFO order form a cycle"
        )
    return [ts[i] for i in order]


def _int(el: ET.Element, key: str, where: str) -> int:
    v = el.get(key)
    try:
        return int(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ScheduleError(f"{where}: attribute {key!r} must be an integer, got {v!r}") from None


def _threadblocks(
    algo: ET.Element, where: str
) -> Iterator[tuple[int, int, int, int, int, ET.Element]]:
    """``(gpu, tb, send peer, recv peer, channel, element)`` of every threadblock."""
    for gpu in algo.findall("gpu"):
        g = _int(gpu, "id", where)
        for tb in gpu.findall("tb"):
            tbid = _int(tb, "id", f"{where}: gpu {g}")
            sp = _int(tb, "send", f"{where}: gpu {g} tb {tbid}")
            rp = _int(tb, "recv", f"{where}: gpu {g} tb {tbid}")
            ch = _int(tb, "chan", f"{where}: gpu {g} tb {tbid}")
            yield g, tbid, sp, rp, ch, tb


def from_msccl_xml(text: str, where: str = "MSCCL XML") -> Schedule:
    """Parse MSCCL XML back into a :class:`Schedule`.

    Files written by :func:`to_msccl_xml` come back identical. Other MSCCL files (and
    these without their ``rcc_`` attributes) are read as the executor runs them
    (:func:`_foreign`): sends and receives matched in FIFO order per connection,
    dependencies from each threadblock's step order and ``depid``/``deps`` (through
    ``nop`` steps), chunks the ``nchunksperloop`` equal chunks. A program that moves a
    chunk to another place, or exchanges one both ways at once, has no transfers to
    express it and is refused.

    Raises:
        ScheduleError: malformed XML or an inconsistent program.
    """
    try:
        algo = ET.fromstring(text)
    except ET.ParseError as e:
        raise ScheduleError(f"{where}: not valid XML ({e})") from None
    if algo.tag != "algo":
        raise ScheduleError(f"{where}: top element is <{algo.tag}>, expected <algo>")
    if algo.get("coll", "allreduce") != "allreduce":
        raise ScheduleError(f"{where}: only allreduce is supported, not {algo.get('coll')!r}")
    ngpus = _int(algo, "ngpus", where)
    big_l = _int(algo, "nchunksperloop", where)
    if big_l < 1:
        raise ScheduleError(f"{where}: nchunksperloop must be positive")
    # tid -> (src, dst, channel, chunk, count, route) / (src, dst, channel, op, deps)
    sends: dict[int, tuple[int, int, int, int, int, tuple[str, ...] | None]] = {}
    recvs: dict[int, tuple[int, int, int, str, tuple[int, ...]]] = {}
    ranges: set[int] = {0, big_l}
    if algo.get("rcc_size") is None:
        return _foreign(algo, ngpus, big_l, where)
    first_off: dict[int, tuple[int, str]] = {}  # a send's first step: srcoff, where
    for g, tbid, sp, rp, ch, tb in _threadblocks(algo, where):
        for st in tb.findall("step"):
            w = f"{where}: gpu {g} tb {tbid} step {st.get('s')}"
            kind = st.get("type", "")
            if kind == "nop":
                continue
            if kind not in ("s", "r", "rrc"):
                raise ScheduleError(f"{w}: step type {kind!r} is not supported on import")
            off, cnt = _int(st, "srcoff", w), _int(st, "cnt", w)
            ranges.update((off, off + cnt))
            tid = _int(st, "rcc_t", w)
            if tid in (sends if kind == "s" else recvs):  # a later piece of a split transfer
                continue
            if kind == "s":
                route = st.get("rcc_r")
                first_off[tid] = (off, w)
                sends[tid] = (
                    g,
                    sp,
                    ch,
                    _int(st, "rcc_c", w),
                    _int(st, "rcc_n", w) if st.get("rcc_n") is not None else 1,
                    tuple(route.split(" ")) if route else None,
                )
            else:
                d = st.get("rcc_d", "")
                try:
                    deps = tuple(int(x) for x in d.split(",") if x != "")
                except ValueError:
                    raise ScheduleError(f"{w}: bad rcc_d {d!r}") from None
                recvs[tid] = (rp, g, ch, COPY if kind == "r" else REDUCE, deps)
    size = Fraction(algo.get("rcc_size", "0"))
    sizes_code = algo.get("rcc_sizes") or "".join(
        gpu.get("rcc_sizes", "") for gpu in algo.findall("gpu")
    )
    bounds_attr = algo.get("rcc_chunks")  # the starts, as files before rcc_sizes have them
    if sizes_code:
        cuts = [*_chunk_starts(sizes_code, big_l, where), big_l]
    elif bounds_attr:
        starts = [int(x) for x in bounds_attr.split(",")]
        cuts = [*starts, big_l]
    else:
        cuts = sorted(ranges)
    chunks = tuple(
        Chunk(i, Fraction(a, big_l), Fraction(b - a, big_l))
        for i, (a, b) in enumerate(itertools.pairwise(cuts))
    )
    for tid, (off, w) in first_off.items():
        c = sends[tid][3]
        if 0 <= c < len(chunks) and cuts[c] != off:
            raise ScheduleError(
                f"{w}: srcoff {off} disagrees with rcc_c {c} (chunk {c} starts at {cuts[c]}); "
                "a file edited by hand imports as written once its rcc_ attributes are removed"
            )
    if set(sends) != set(recvs):
        raise ScheduleError(
            f"{where}: sends and receives do not match (transfers {sorted(set(sends) ^ set(recvs))[:5]})"
        )
    transfers = []
    for tid in sorted(sends):
        src, dst, ch, chunk, count, path = sends[tid]
        rsrc, rdst, _, op, deps = recvs[tid]
        if (src, dst) != (rsrc, rdst):
            raise ScheduleError(f"{where}: transfer {tid}: send and receive peers disagree")
        transfers.append(Transfer(tid, src, dst, chunk, op, deps, ch, path, count))
    meta_text = "".join(algo.get(f"rcc_meta{i}", "") for i in range(16))
    meta = tuple(
        (_unescape(kv.split("=", 1)[0]), _unescape(kv.split("=", 1)[1]))
        for kv in meta_text.split(";")
        if "=" in kv
    )
    sched = Schedule(
        name=algo.get("name", "msccl"),
        ranks=ngpus,
        size=size,
        chunks=chunks,
        transfers=tuple(transfers),
        topology=algo.get("rcc_topology"),
        meta=meta,
    )
    try:
        return sched.check_structure()
    except ScheduleError as e:
        raise ScheduleError(f"{where}: {e}") from None


def _foreign(algo: ET.Element, ngpus: int, big_l: int, where: str) -> Schedule:
    """Import an MSCCL program without resilientcc's attributes, as the executor runs it.

    Sends and receives are matched in FIFO order per connection ``(src, dst, channel)``
    into transfers of ``cnt`` equal chunks from ``srcoff``. A step waits for the step
    before it in its threadblock and for its ``depid``/``deps`` step, and so for
    everything those wait for. A transfer depends on every transfer with an earlier step
    on the same GPU that touches the same chunks in an order that matters: before its
    send, a receive of them; before its receive, a send (a read) or a receive (a write)
    of them; a dependency another one implies is dropped. Ids follow a topological order
    of the dependencies and the connections' order.
    """
    from resilientcc.schedules.ir import uniform_chunks

    Key = tuple[int, int, int]  # (gpu, tb, step)
    kinds: dict[Key, str] = {}
    span: dict[Key, tuple[int, int]] = {}
    waits: dict[Key, list[Key]] = {}  # the steps each step waits for
    sends: dict[tuple[int, int, int], list[Key]] = {}  # connection -> send steps in order
    recvs: dict[tuple[int, int, int], list[Key]] = {}
    for g, tbid, sp, rp, ch, tb in _threadblocks(algo, where):
        prev: Key | None = None
        for st in tb.findall("step"):
            w = f"{where}: gpu {g} tb {tbid} step {st.get('s')}"
            kind = st.get("type", "")
            if kind not in ("s", "r", "rrc", "nop"):
                raise ScheduleError(f"{w}: step type {kind!r} is not supported on import")
            key = (g, tbid, _int(st, "s", w))
            kinds[key] = kind
            waits[key] = [prev] if prev is not None else []
            depid = st.get("depid", "-1")
            if depid not in ("-1", None):
                waits[key].append((g, _int(st, "depid", w), _int(st, "deps", w)))
            prev = key
            if kind == "nop":
                continue
            off, cnt = _int(st, "srcoff", w), _int(st, "cnt", w)
            if kind != "s":
                off = _int(st, "dstoff", w)
            if cnt < 1 or off < 0 or off + cnt > big_l:
                raise ScheduleError(f"{w}: chunks {off}..{off + cnt - 1} of {big_l}")
            span[key] = (off, cnt)
            if kind == "s":
                sends.setdefault((g, sp, ch), []).append(key)
            else:
                recvs.setdefault((rp, g, ch), []).append(key)
    # transfers: the i-th send on a connection meets its i-th receive
    pairs: list[tuple[Key, Key, tuple[int, int, int]]] = []
    transfer_of: dict[Key, int] = {}  # each send or receive step's transfer
    for conn in sorted(set(sends) | set(recvs)):
        ss, rr = sends.get(conn, []), recvs.get(conn, [])
        if len(ss) != len(rr):
            raise ScheduleError(
                f"{where}: connection {conn}: {len(ss)} sends but {len(rr)} receives"
            )
        for a, b in zip(ss, rr, strict=True):
            if span[a] != span[b]:
                raise ScheduleError(
                    f"{where}: gpu {a[0]} tb {a[1]} step {a[2]} sends {span[a][1]} chunks from "
                    f"{span[a][0]}, its receive writes {span[b][1]} from {span[b][0]}: "
                    "resilientcc's transfers keep a chunk's place"
                )
            transfer_of[a] = transfer_of[b] = len(pairs)
            pairs.append((a, b, conn))
    for key, ws in waits.items():
        for wk in ws:
            if wk not in kinds:
                raise ScheduleError(
                    f"{where}: gpu {key[0]} tb {key[1]} step {key[2]} waits for a step that does not exist ({wk[1]}, {wk[2]})"
                )

    # each GPU's steps in an order that respects their waits, with every step's earlier
    # steps (those it waits for, directly or not) as a bit set over that order
    by_gpu: dict[int, list[Key]] = {}
    for key in kinds:
        by_gpu.setdefault(key[0], []).append(key)
    earlier: dict[Key, int] = {}
    pos: dict[Key, int] = {}
    order_of: dict[int, list[Key]] = {}
    for g, keys in by_gpu.items():
        index = {k: i for i, k in enumerate(keys)}
        # every step its own "connection": the order of the waits alone
        topo = _fifo_topological(
            [(k, [index[wk] for wk in waits[k]]) for k in keys], range(len(keys))
        )
        if len(topo) != len(keys):
            raise ScheduleError(f"{where}: gpu {g}: its steps wait for each other in a cycle")
        seq = [keys[i] for i in topo]
        order_of[g] = seq
        for i, k in enumerate(seq):
            pos[k] = i
            bits = 0
            for wk in waits[k]:
                bits |= earlier[wk] | (1 << pos[wk])
            earlier[k] = bits

    def follows(key: Key, write: bool) -> set[int]:
        """The transfers whose earlier steps on ``key``'s GPU touch its chunks in a way
        that orders them: a receive after an earlier send of those chunks (it read them)
        or receive (it wrote them), a send after an earlier receive of them."""
        lo, n = span[key]
        seq = order_of[key[0]]
        out: set[int] = set()
        bits = earlier[key]
        while bits:
            low = bits & -bits
            k = seq[low.bit_length() - 1]
            bits ^= low
            kind = kinds[k]
            if kind == "nop" or (kind == "s" and not write):
                continue
            klo, kn = span[k]
            if klo < lo + n and lo < klo + kn:
                out.add(transfer_of[k])
        return out

    deps: list[set[int]] = []
    for i, (a, b, _conn) in enumerate(pairs):
        deps.append((follows(a, False) | follows(b, True)) - {i})
    # ids: a topological order of deps and each connection's order
    order = _fifo_topological(
        [(conn, deps[i]) for i, (_a, _b, conn) in enumerate(pairs)],
        [a[2] for a, _b, _conn in pairs],
    )
    if len(order) != len(pairs):
        raise ScheduleError(
            f"{where}: the steps' waits and the connections' order form a cycle (a chunk "
            "exchanged both ways at once cannot be expressed as whole transfers)"
        )
    _drop_implied(deps, order)
    new_id = {old: new for new, old in enumerate(order)}
    out = []
    for i in order:
        a, b, (src, dst, ch) = pairs[i]
        op = COPY if kinds[b] == "r" else REDUCE
        out.append(
            Transfer(
                new_id[i],
                src,
                dst,
                span[a][0],
                op,
                tuple(sorted(new_id[d] for d in deps[i])),
                ch,
                count=span[a][1],
            )
        )
    sched = Schedule(
        algo.get("name", "msccl"), ngpus, Fraction(big_l), uniform_chunks(big_l), tuple(out)
    )
    try:
        return sched.check_structure()
    except ScheduleError as e:
        raise ScheduleError(f"{where}: {e}") from None


def _drop_implied(deps: list[set[int]], order: Sequence[int]) -> None:
    """Remove, in place, each dependency that another dependency of the same transfer
    already implies (a transitive reduction; ``order`` is a topological order of ``deps``).
    What happens before what is unchanged, and checks of the program need fewer edges.

    Each transfer's ancestors are kept as a bit set only until its last dependent has
    been reduced, so memory grows with the program's width (the transfers whose
    dependents are still ahead, about one per threadblock) times its length, not with
    the square of its length."""
    before: dict[int, int] = {}  # the ancestors of transfers still depended on, as bit sets
    waiting = [0] * len(deps)  # dependents not reduced yet
    for ds in deps:
        for d in ds:
            waiting[d] += 1
    for i in order:
        mine = deps[i]
        implied = 0
        for d in mine:
            implied |= before[d]
        if implied:
            deps[i] = {d for d in mine if not (implied >> d) & 1}
        bits = implied
        for d in deps[i]:
            bits |= 1 << d
        if waiting[i]:
            before[i] = bits
        for d in mine:
            waiting[d] -= 1
            if not waiting[d]:
                del before[d]


@dataclass(frozen=True)
class MscclFit:
    """What :func:`fit_msccl` exported: the schedule, its XML, the pieces it took
    (``None``: the generator's default, which fitted), how its chunks were rounded
    (``None``: exact; see :func:`round_for_msccl`), and why the first generator's
    schedule was not written where a fallback's was (``None``: it was)."""

    schedule: Schedule
    xml: str
    pieces: int | None
    default_pieces: int | None
    rounding: ChunkRounding | None = None
    #: why ``make``'s schedule was not exported, where ``fallback``'s was instead
    replaced: str | None = None


def fit_msccl(
    make: Callable[[int | None], Schedule],
    *,
    limits: MscclLimits | None = None,
    progress: Callable[[str], None] | None = None,
    fallback: Callable[[int | None], Schedule] | None = None,
) -> MscclFit:
    """Export ``make(None)`` (a generator at its default pipeline depth); where that is
    cut too fine for the executor (a threadblock with more steps than it runs, or more
    equal chunks per loop), export ``make(k)`` for the most pieces ``k`` below the
    default that fit.

    ``k`` is searched between the deepest depth found to fit and the shallowest found
    not to: each next depth is scaled from the last one tried by how far its busiest
    threadblock was over the limit (:attr:`~resilientcc.errors.TooFineError.excess`) or
    under it (a threadblock's steps grow about linearly with the pieces), the midpoint
    where the last export says nothing of it (in the search any
    :class:`~resilientcc.errors.ExportError` counts as not fitting). The
    default depth is read from the schedule's ``pieces`` metadata; a schedule without it
    is exported as it is, or its :class:`~resilientcc.errors.TooFineError` raised.
    Each candidate is exported whole, so the one returned honours every limit. Splits
    finer than the executor's chunks per loop are rounded (:func:`round_for_msccl`,
    recorded in :attr:`MscclFit.rounding`). ``progress`` hears of each depth that did
    not fit.

    Where ``make``'s schedule cannot be written at any depth (more channels than the
    executor has, say) and ``fallback`` is given, ``fallback`` (called like ``make``)
    is fitted the same way instead and :attr:`MscclFit.replaced` says why; ``rcc synth
    optcc -f msccl-xml`` passes OptCC without its tree packing, whose lanes are
    connections of their own.

    Examples:
        >>> from fractions import Fraction
        >>> from resilientcc.topology import hierarchical, fail_nics
        >>> from resilientcc.schedules.optcc import optcc
        >>> topo = fail_nics(hierarchical(2, 8), 0, 4)
        >>> fit = fit_msccl(lambda k: optcc(topo, Fraction(2**30), pieces=k))
        >>> fit.default_pieces, fit.pieces
        (64, 18)
    """
    lim = limits or MscclLimits()
    try:
        return _fit_depth(make, lim, progress)
    except ExportError as e:
        if fallback is None:
            raise
        return replace(_fit_depth(fallback, lim, progress), replaced=str(e))


def _fit_depth(
    make: Callable[[int | None], Schedule],
    lim: MscclLimits,
    progress: Callable[[str], None] | None,
) -> MscclFit:
    """:func:`fit_msccl` for one generator: its default depth, else the deepest that fits."""
    fill = 0.0  # the last export's busiest threadblock, over the limit

    def export(sched: Schedule, k: int | None, default: int | None) -> MscclFit:
        nonlocal fill
        sched, rounding = round_for_msccl(sched, lim)
        xml, busiest = _export_xml(sched, lim, "Simple", True)
        fill = busiest / lim.max_steps_per_tb
        return MscclFit(sched, xml, k, default, rounding)

    first = make(None)
    try:
        return export(first, None, None)
    except TooFineError as e:
        error: ExportError = e
    default = first.meta_get("pieces")
    if default is None or not default.isdigit():
        raise error

    def say(k: int) -> None:
        if progress is not None:
            why = ""
            if isinstance(error, TooFineError) and error.excess is not None:
                steps = math.ceil(error.excess * lim.max_steps_per_tb)
                why = f" (a threadblock needs about {steps} steps, the executor runs {lim.max_steps_per_tb})"
            progress(f"{k} piece{'s' if k > 1 else ''}: does not fit{why}")

    say(int(default))

    def attempt(k: int) -> MscclFit | None:
        nonlocal error
        try:
            return export(make(k), k, int(default))
        except ExportError as e:  # any limit: a shallower pipeline may still fit
            error = e
            say(k)
            return None

    # the deepest k that fits lies in (good, bad): guess it from the last export (steps
    # grow about linearly with the pieces, plus a part that does not), else bisect; a
    # guess is kept strictly inside, so no depth is tried twice
    good, bad = 0, int(default)
    best: MscclFit | None = None
    guess = bad // 2
    while bad - good > 1:
        k = min(bad - 1, max(good + 1, guess))
        found = attempt(k)
        if found is None:
            bad = k
            excess = error.excess if isinstance(error, TooFineError) else None
            guess = math.floor(k / excess) if excess else (good + bad) // 2
        else:
            best, good = found, k
            guess = math.floor(k / fill) if fill > 0 else bad - 1
    if best is None:
        raise type(error)(f"{error} (with 1 piece)") from None
    return best


def save_msccl(schedule: Schedule, path: str | os.PathLike[str], **kwargs: object) -> None:
    """Write ``schedule`` as MSCCL XML, atomically."""
    atomic_write_text(path, to_msccl_xml(schedule, **kwargs))  # type: ignore[arg-type]


def load_msccl(path: str | os.PathLike[str]) -> Schedule:
    """Read an MSCCL XML file (see :func:`from_msccl_xml`)."""
    p = Path(path)
    text = read_text(p, ScheduleError)
    return from_msccl_xml(text, str(p))
