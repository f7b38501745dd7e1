"""An independent interpreter of MSCCL XML programs, for the exporter's tests.

It reads only what NCCL's MSCCL executor reads (no ``rcc_*`` attribute): each threadblock
runs its steps in order; a step with ``depid``/``deps`` waits for that step of another
threadblock of its GPU; a send puts a snapshot of its chunks on the connection
``(gpu, send peer, channel)``, which holds at most ``slots`` messages, and the receiving
threadblock takes them in FIFO order (``r`` overwrites, ``rrc`` adds). Buffers hold
multiplicity vectors (how often each GPU's contribution is in each chunk) and the chunk
each place's data came from (data moved to another place, or added to another chunk's,
is marked wrong: two chunks with the same contributions are still told apart), so the
end state says whether the program is an AllReduce, and a state where no threadblock can
move is a deadlock.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Outcome:
    deadlocked: bool  # no threadblock could take its next step
    allreduce: bool  # every GPU holds every contribution exactly once in every chunk
    steps: int  # steps executed


def run_msccl(xml: str, *, slots: int = 1) -> Outcome:
    algo = ET.fromstring(xml)
    n = int(algo.get("ngpus", "0"))
    units = int(algo.get("nchunksperloop", "0"))
    buf = np.zeros((n, units, n), dtype=np.int64)
    for g in range(n):
        buf[g, :, g] = 1
    # the chunk whose data each place holds (-1: a mix of chunks)
    origin = np.tile(np.arange(units), (n, 1))
    tbs: list[tuple[int, int, int, int, list[dict[str, str]]]] = []  # gpu, tb, send, recv, steps
    for gpu in algo.findall("gpu"):
        g = int(gpu.get("id", "-1"))
        for tb in gpu.findall("tb"):
            steps = [dict(st.attrib) for st in tb.findall("step")]
            tbs.append(
                (
                    g,
                    int(tb.get("id", "-1")),
                    int(tb.get("send", "-1")),
                    int(tb.get("recv", "-1")),
                    steps,
                )
            )
    chan = {
        (g, t): int(tb_el.get("chan", "0"))
        for gpu in algo.findall("gpu")
        for tb_el in gpu.findall("tb")
        for g, t in [(int(gpu.get("id", "-1")), int(tb_el.get("id", "-1")))]
    }
    done = {(g, t): 0 for g, t, *_ in tbs}  # steps completed per threadblock
    wires: dict[tuple[int, int, int], deque[np.ndarray]] = {}
    executed = 0
    progress = True
    while progress:
        progress = False
        for g, t, send, recv, steps in tbs:
            while done[(g, t)] < len(steps):
                st = steps[done[(g, t)]]
                dep_tb, dep_step = int(st.get("depid", "-1")), int(st.get("deps", "-1"))
                if dep_tb >= 0 and done[(g, dep_tb)] <= dep_step:
                    break
                kind = st["type"]
                off, cnt = int(st.get("srcoff", "-1")), int(st.get("cnt", "0"))
                if kind == "s":
                    wire = wires.setdefault((g, send, chan[(g, t)]), deque())
                    if len(wire) >= slots:
                        break
                    wire.append((buf[g, off : off + cnt].copy(), origin[g, off : off + cnt].copy()))
                elif kind in ("r", "rrc"):
                    wire = wires.setdefault((recv, g, chan[(g, t)]), deque())
                    if not wire:
                        break
                    data, came = wire.popleft()
                    doff = int(st.get("dstoff", "-1"))
                    here = slice(doff, doff + cnt)
                    if kind == "r":
                        buf[g, here] = data
                        origin[g, here] = came
                    else:
                        buf[g, here] += data
                        origin[g, here] = np.where(origin[g, here] == came, came, -1)
                elif kind != "nop":
                    raise ValueError(f"unknown step type {kind!r}")
                done[(g, t)] += 1
                executed += 1
                progress = True
    finished = all(done[(g, t)] == len(steps) for g, t, _s, _r, steps in tbs)
    placed = bool(np.all(origin == np.arange(units)))
    return Outcome(not finished, finished and placed and bool(np.all(buf == 1)), executed)
