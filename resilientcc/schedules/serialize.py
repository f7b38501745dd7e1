"""JSON serialisation of schedules (versioned, round-trips exactly).

Format (version 1)::

    {"format": "resilientcc-schedule", "version": 1, "name": "ring",
     "collective": "allreduce", "ranks": 4, "size": "1073741824",
     "topology": "3fa2…", "meta": {"channels": "8"},
     "chunks": [["0", "1/4"], ["1/4", "1/4"], …],          # [offset, size] fractions of the buffer
     "transfers": [[id, src, dst, chunk, "reduce"|"copy", [deps…], channel, route|null], …]}

A transfer of several consecutive chunks has a ninth entry, their number (``count``);
it is left out when it is 1, so files of one-chunk transfers are unchanged.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction
from typing import Any

from resilientcc._gc import gc_paused
from resilientcc.errors import ScheduleError
from resilientcc.schedules.ir import Chunk, Schedule, Transfer
from resilientcc.topology.io import atomic_write_text, read_json

__all__ = ["load_schedule", "save_schedule", "schedule_from_dict", "schedule_to_dict"]

FORMAT = "resilientcc-schedule"
VERSION = 1


def schedule_to_dict(s: Schedule) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "name": s.name,
        "collective": s.collective,
        "ranks": s.ranks,
        "size": str(s.size),
        "topology": s.topology,
        "meta": dict(s.meta),
        "chunks": [[str(c.offset), str(c.size)] for c in s.chunks],
        "transfers": [
            [
                t.id,
                t.src,
                t.dst,
                t.chunk,
                t.op,
                list(t.deps),
                t.channel,
                list(t.route) if t.route is not None else None,
            ]
            + ([t.count] if t.count != 1 else [])
            for t in s.transfers
        ],
    }


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ScheduleError(f"{where}: expected an integer, got {v!r}")
    return v


def _frac(v: Any, where: str) -> Fraction:
    try:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise ValueError
        return Fraction(v)
    except (ValueError, ZeroDivisionError):
        raise ScheduleError(f'{where}: expected an exact number (e.g. "1/4"), got {v!r}') from None


def schedule_from_dict(data: Any, where: str = "schedule") -> Schedule:
    """Build a schedule from its dictionary form and check its structure."""
    if not isinstance(data, dict):
        raise ScheduleError(f"{where}: expected a JSON object at the top level")
    if "format" not in data:
        raise ScheduleError(
            f"{where}: no 'format' entry (a schedule file has 'format': {FORMAT!r})"
        )
    if data["format"] != FORMAT:
        raise ScheduleError(f"{where}: 'format' is {data['format']!r}, expected {FORMAT!r}")
    if data.get("version") != VERSION:
        raise ScheduleError(f"{where}: unsupported version {data.get('version')!r}")
    for key in ("name", "ranks", "size", "chunks", "transfers"):
        if key not in data:
            raise ScheduleError(f"{where}: missing {key!r}")
    chunks = []
    if not isinstance(data["chunks"], list):
        raise ScheduleError(f"{where}: 'chunks' must be a list")
    for i, c in enumerate(data["chunks"]):
        if not isinstance(c, list) or len(c) != 2:
            raise ScheduleError(f"{where}: chunks[{i}] must be [offset, size]")
        chunks.append(
            Chunk(i, _frac(c[0], f"{where}: chunks[{i}]"), _frac(c[1], f"{where}: chunks[{i}]"))
        )
    transfers = []
    if not isinstance(data["transfers"], list):
        raise ScheduleError(f"{where}: 'transfers' must be a list")
    for i, t in enumerate(data["transfers"]):
        w = f"{where}: transfers[{i}]"
        if not isinstance(t, list) or len(t) not in (8, 9):
            raise ScheduleError(
                f"{w}: must be [id, src, dst, chunk, op, deps, channel, route] (+ count)"
            )
        if not isinstance(t[5], list):
            raise ScheduleError(f"{w}: deps must be a list")
        route = t[7]
        if route is not None and (
            not isinstance(route, list) or not all(isinstance(x, str) for x in route)
        ):
            raise ScheduleError(f"{w}: route must be null or a list of node names")
        if not isinstance(t[4], str):
            raise ScheduleError(f"{w}: op must be a string")
        transfers.append(
            Transfer(
                _int(t[0], w),
                _int(t[1], w),
                _int(t[2], w),
                _int(t[3], w),
                t[4],
                tuple(_int(d, w) for d in t[5]),
                _int(t[6], w),
                tuple(route) if route is not None else None,
                _int(t[8], w) if len(t) == 9 else 1,
            )
        )
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise ScheduleError(f"{where}: 'meta' must be an object")
    topo = data.get("topology")
    s = Schedule(
        name=str(data["name"]),
        ranks=_int(data["ranks"], f"{where}: ranks"),
        size=_frac(data["size"], f"{where}: size"),
        chunks=tuple(chunks),
        transfers=tuple(transfers),
        collective=str(data.get("collective", "allreduce")),
        topology=str(topo) if topo is not None else None,
        meta=tuple((str(k), str(v)) for k, v in meta.items()),
    )
    try:
        return s.check_structure()
    except ScheduleError as e:
        raise ScheduleError(f"{where}: {e}") from None


@gc_paused
def load_schedule(path: str | os.PathLike[str]) -> Schedule:
    """Read a schedule JSON file; errors name the file and the entry."""
    return schedule_from_dict(read_json(path, ScheduleError), str(path))


@gc_paused
def save_schedule(s: Schedule, path: str | os.PathLike[str]) -> None:
    """Write a schedule as JSON, atomically."""
    atomic_write_text(path, json.dumps(schedule_to_dict(s), separators=(",", ":")) + "\n")
