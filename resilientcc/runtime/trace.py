"""A run's timeline as a file: CSV, or a Chrome trace for Perfetto (``rcc run --trace``).

:func:`write_run_trace` writes the :class:`~resilientcc.runtime.engine.RunEvent` list of
a traced run (``run_schedule(..., trace=True)``):

* ``.csv``: one row per event (``rank, time_s, kind, transfer, channel, peer,
  detail``), times in seconds from the first event;
* ``.json``: a Chrome trace (open it in https://ui.perfetto.dev or ``chrome://tracing``),
  one row per rank. Each transfer is a bar on its sender's row from its first send to
  its commit at the receiver, named ``op src->dst``, with the channels it went on and
  its re-sends in its arguments; failures, give-ups, swallowed sends and dropped
  duplicates are instant marks on the row of the rank they happened to.

Every rank's times come from ``time.monotonic``, one clock for threads and for processes
on one machine; ranks on several machines (``--distributed``) each have their own, so
their rows are not aligned.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import IO

from resilientcc.runtime.engine import RunEvent
from resilientcc.runtime.launch import RunResult
from resilientcc.schedules.ir import Schedule
from resilientcc.sim.trace import trace_format
from resilientcc.topology.io import atomic_file

__all__ = ["write_run_trace"]

#: instant marks in the Chrome trace
_MARKS = ("fail", "give_up", "swallowed", "duplicate")


def write_run_trace(result: RunResult, schedule: Schedule, path: str | os.PathLike[str]) -> str:
    """Write ``result``'s events to ``path``: ``.csv`` or ``.json`` (Chrome trace).

    Returns the format written (``"csv"`` or ``"chrome"``).

    Raises:
        InputError: another suffix, or a path that cannot be written.
    """
    fmt = trace_format(path)
    with atomic_file(path, "--trace") as f:
        if fmt == "csv":
            _write_csv(f, result.events)
        else:
            _write_chrome(f, result, schedule)
    return fmt


def _write_csv(f: IO[str], events: Sequence[RunEvent]) -> None:
    t0 = events[0].time_s if events else 0.0
    f.write("rank,time_s,kind,transfer,channel,peer,detail\n")
    for e in events:
        detail = e.detail.replace('"', "'")
        f.write(
            f'{e.rank},{e.time_s - t0!r},{e.kind},{e.transfer},{e.channel},{e.peer},"{detail}"\n'
        )


def _write_chrome(f: IO[str], result: RunResult, schedule: Schedule) -> None:
    events = result.events
    t0 = events[0].time_s if events else 0.0

    def us(t: float) -> float:
        return round((t - t0) * 1e6, 3)

    first_send: dict[int, RunEvent] = {}
    commit: dict[int, RunEvent] = {}
    channels: dict[int, list[int]] = {}
    resends: dict[int, int] = {}
    for e in events:
        if e.kind in ("send", "resend", "swallowed"):
            first_send.setdefault(e.transfer, e)
            channels.setdefault(e.transfer, []).append(e.channel)
            resends[e.transfer] = resends.get(e.transfer, 0) + (e.kind == "resend")
        elif e.kind == "commit":
            commit.setdefault(e.transfer, e)
    out: list[dict[str, object]] = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": result.schedule}}
    ]
    out += [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": r, "args": {"name": f"rank {r}"}}
        for r in range(result.ranks)
    ]
    for t in schedule.transfers:
        start, end = first_send.get(t.id), commit.get(t.id)
        if start is None or end is None:
            continue
        out.append(
            {
                "ph": "X",
                "name": f"{t.op} {t.src}->{t.dst}",
                "cat": t.op,
                "pid": 0,
                "tid": t.src,
                "ts": us(start.time_s),
                "dur": max(0.0, round(us(end.time_s) - us(start.time_s), 3)),
                "args": {
                    "id": t.id,
                    "chunk": t.chunk,
                    "channel": t.channel,
                    "sent on": channels[t.id],
                    "resends": resends[t.id],
                },
            }
        )
    for e in events:
        if e.kind in _MARKS:
            out.append(
                {
                    "ph": "i",
                    "s": "t",
                    "name": f"{e.kind} channel {e.channel}"
                    if e.transfer < 0
                    else f"{e.kind} {e.transfer}",
                    "cat": e.kind,
                    "pid": 0,
                    "tid": e.rank,
                    "ts": us(e.time_s),
                    "args": {
                        "transfer": e.transfer,
                        "channel": e.channel,
                        "peer": e.peer,
                        "detail": e.detail,
                    },
                }
            )
    meta = {
        "schedule": result.schedule,
        "ranks": result.ranks,
        "backend": result.backend,
        "wall_s": result.wall_s,
        "exact": result.exact,
    }
    f.write('{"displayTimeUnit": "ms", "otherData": ' + json.dumps(meta))
    f.write(', "traceEvents": [\n')
    f.write(",\n".join(json.dumps(x) for x in out))
    f.write("\n]}\n")
