"""MSCCL XML export/import: exact round trip for ring and optcc on 16 GPUs, limits enforced."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from msccl_interp import run_msccl

from resilientcc.errors import ExportError, ScheduleError, TooFineError
from resilientcc.schedules.ir import Schedule, Transfer, chunks_from_sizes, uniform_chunks
from resilientcc.schedules.msccl import (
    MscclLimits,
    exact_units,
    fit_msccl,
    from_msccl_xml,
    load_msccl,
    round_chunks,
    round_for_msccl,
    save_msccl,
    to_msccl_xml,
)
from resilientcc.schedules.optcc import optcc
from resilientcc.schedules.ring import ring
from resilientcc.topology import fail_nics, hierarchical

M = Fraction(2**30)


def at(el: ET.Element | None, key: str) -> str:
    assert el is not None
    v = el.get(key)
    assert v is not None, key
    return v


@pytest.fixture(scope="module")
def schedules() -> dict[str, Schedule]:
    topo = fail_nics(hierarchical(2, 8), 0, 4)
    return {
        "ring": ring(topo, M),
        "optcc": optcc(topo, M, pieces=2, pipeline=False),
        "optcc_pipelined": optcc(topo, M, pieces=2),
    }


@pytest.mark.parametrize("name", ["ring", "optcc", "optcc_pipelined"])
def test_round_trip_16_gpus(schedules, name, tmp_path):
    s = schedules[name]
    assert s.ranks == 16
    path = tmp_path / f"{name}.xml"
    save_msccl(s, path)
    back = load_msccl(path)
    assert back == s


@pytest.mark.parametrize("name", ["ring", "optcc", "optcc_pipelined"])
def test_xml_is_valid_msccl(schedules, name):
    s = schedules[name]
    lim = MscclLimits()
    root = ET.fromstring(to_msccl_xml(s))
    assert root.tag == "algo" and root.get("coll") == "allreduce"
    assert root.get("proto") == "Simple" and root.get("inplace") == "1"
    assert int(at(root, "ngpus")) == 16
    nchunks = int(at(root, "nchunksperloop"))
    assert len(root.attrib) <= lim.max_attrs
    sends = recvs = 0
    for gpu in root.findall("gpu"):
        assert {"id", "i_chunks", "o_chunks", "s_chunks"} <= set(gpu.attrib)
        per_chan: dict[str, int] = {}
        for tb in gpu.findall("tb"):
            per_chan[at(tb, "chan")] = per_chan.get(at(tb, "chan"), 0) + 1
            steps = tb.findall("step")
            assert len(steps) <= lim.max_steps_per_tb
            for i, st in enumerate(steps):
                assert int(at(st, "s")) == i
                assert st.get("type") in ("s", "r", "rrc", "nop")
                assert len(st.attrib) <= lim.max_attrs
                if st.get("type") == "nop":
                    assert st.get("depid") != "-1"
                    continue
                cnt, off = int(at(st, "cnt")), int(at(st, "srcoff"))
                assert 1 <= cnt <= lim.max_count and off >= 0 and off + cnt <= nchunks
                if st.get("depid") != "-1":
                    dep_tb = gpu.find(f"tb[@id='{st.get('depid')}']")
                    assert dep_tb is not None
                    dep = dep_tb.findall("step")[int(at(st, "deps"))]
                    assert dep.get("hasdep") == "1"
                if st.get("type") == "s":
                    assert tb.get("send") != "-1"
                    sends += 1
                else:
                    assert tb.get("recv") != "-1"
                    recvs += 1
        assert max(per_chan.values()) <= lim.max_tbs_per_channel
    assert sends == recvs >= len(s.transfers)


def test_non_uniform_split_maps_to_integer_chunks():
    chunks = chunks_from_sizes([Fraction(1, 3), Fraction(1, 2), Fraction(1, 6)])
    ts = tuple(Transfer(i, 0, 1, i, "reduce") for i in range(3)) + tuple(
        Transfer(3 + i, 1, 0, i, "copy", deps=(i,)) for i in range(3)
    )
    s = Schedule("odd", 2, Fraction(600), chunks, ts)
    root = ET.fromstring(to_msccl_xml(s))
    assert root.get("nchunksperloop") == "6"
    assert from_msccl_xml(to_msccl_xml(s)) == s


def test_limits_are_enforced(schedules):
    s = schedules["ring"]
    with pytest.raises(ExportError, match="steps"):
        to_msccl_xml(s, limits=MscclLimits(max_steps_per_tb=10))
    with pytest.raises(ExportError, match="channels"):
        to_msccl_xml(s, limits=MscclLimits(max_channels=4))
    with pytest.raises(ExportError, match="threadblocks"):
        to_msccl_xml(schedules["optcc"], limits=MscclLimits(max_tbs_per_channel=1))
    odd = Schedule(
        "lcm",
        2,
        Fraction(1),
        chunks_from_sizes([Fraction(1, 7919), Fraction(7918, 7919)]),
        (Transfer(0, 0, 1, 0, "reduce"),),
    )
    with pytest.raises(ExportError, match="least common multiple"):
        to_msccl_xml(odd, limits=MscclLimits(max_chunks_per_loop=1000))


def test_large_chunks_are_split_into_steps_under_max_count():
    chunks = chunks_from_sizes([Fraction(1, 200), Fraction(199, 200)])
    ts = (
        Transfer(0, 0, 1, 1, "reduce"),
        Transfer(1, 1, 0, 1, "copy", deps=(0,)),
        Transfer(2, 0, 1, 0, "reduce"),
        Transfer(3, 1, 0, 0, "copy", deps=(2,)),
    )
    s = Schedule("big", 2, Fraction(200), chunks, ts)
    xml = to_msccl_xml(s)
    root = ET.fromstring(xml)
    assert all(int(at(st, "cnt")) <= 72 for st in root.iter("step") if st.get("type") != "nop")
    assert from_msccl_xml(xml) == s


def test_import_errors_and_foreign_files():
    with pytest.raises(ScheduleError, match="not valid XML"):
        from_msccl_xml("<algo")
    with pytest.raises(ScheduleError, match="expected <algo>"):
        from_msccl_xml("<foo/>")
    ts = (Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "copy", deps=(0,)))
    s = Schedule("pair", 2, Fraction(8), uniform_chunks(1), ts)
    plain = to_msccl_xml(s, roundtrip=False)
    back = from_msccl_xml(plain)
    assert [(t.src, t.dst, t.op) for t in back.transfers] == [(0, 1, "reduce"), (1, 0, "copy")]
    assert back.transfers[1].deps == (0,)


def test_hand_edited_offsets_are_not_silently_ignored():
    """With rcc_ attributes the import rebuilds the exact schedule from them; a step whose
    MSCCL offset was edited to disagree is refused, naming the step; without the rcc_
    attributes the edited program imports as written where a transfer can express it."""
    s = Schedule(
        "two",
        2,
        Fraction(8),
        uniform_chunks(2),
        (Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "copy", deps=(0,))),
    )
    xml = to_msccl_xml(s)
    assert from_msccl_xml(xml).transfers == s.transfers
    root = ET.fromstring(xml)
    step = root.find("gpu/tb/step[@type='s']")
    assert step is not None and step.get("srcoff") == "0"
    step.set("srcoff", "1")
    with pytest.raises(ScheduleError, match="srcoff 1 disagrees with rcc_c 0"):
        from_msccl_xml(ET.tostring(root, encoding="unicode"))
    for el in root.iter():
        for key in [k for k in el.attrib if k.startswith("rcc_")]:
            del el.attrib[key]
    # as written, the program moves GPU 0's chunk 1 into GPU 1's chunk 0: no transfer can
    with pytest.raises(ScheduleError, match="gpu 0 tb 0 step 0 sends 1 chunks from 1"):
        from_msccl_xml(ET.tostring(root, encoding="unicode"))
    # edited on both sides, it imports as written
    recv = next(st for st in root.iter("step") if st.get("type") == "rrc")
    recv.set("srcoff", "1")
    recv.set("dstoff", "1")
    back = from_msccl_xml(ET.tostring(root, encoding="unicode"))
    assert [t.chunk for t in back.transfers if t.src == 0] == [1]


@pytest.fixture(scope="module")
def forward_deps() -> Schedule:
    """OptCC's hierarchical ring in 2 pieces on 4 × 8 GPUs with a credit window of one
    piece: the straggler's partials of piece 1 wait for its results of piece 0, which
    come later in id order."""
    s = optcc(fail_nics(hierarchical(4, 8), 0, 4), M, pieces=2, net_window=1)
    assert any(d > t.id for t in s.transfers for d in t.deps)
    return s


@pytest.mark.parametrize("name", ["ring", "optcc", "optcc_pipelined", "forward"])
def test_exported_programs_run_as_allreduce(schedules, forward_deps, name):
    """An independent interpreter of the XML (threadblocks in step order, one-slot
    connections, MSCCL's dependencies) ends with every contribution exactly once on
    every GPU, without deadlock; dependencies on later ids included."""
    s = forward_deps if name == "forward" else schedules[name]
    xml = to_msccl_xml(s)
    out = run_msccl(xml)
    assert not out.deadlocked and out.allreduce
    assert from_msccl_xml(xml) == s


def _mutate(xml: str, how: str) -> str:
    root = ET.fromstring(xml)
    tbs = [tb for gpu in root.findall("gpu") for tb in gpu.findall("tb")]
    if how == "rrc as r":
        step = next(st for tb in tbs for st in tb.findall("step") if st.get("type") == "rrc")
        step.set("type", "r")
    elif how == "steps reversed":
        tb = max(tbs, key=lambda tb: len(tb.findall("step")))
        steps = tb.findall("step")
        for st in steps:
            tb.remove(st)
        for i, st in enumerate(reversed(steps)):
            st.set("s", str(i))
            tb.append(st)
    elif how == "send dropped":
        tb = next(tb for tb in tbs if any(st.get("type") == "s" for st in tb.findall("step")))
        send = next(st for st in tb.findall("step") if st.get("type") == "s")
        send.set("type", "nop")
        send.set("depid", "-1")
    return ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("how", ["rrc as r", "steps reversed", "send dropped"])
def test_interpreter_rejects_mutants(schedules, how):
    """The interpreter is not vacuous: a reduction turned into a copy loses contributions,
    a threadblock run backwards or a send left out stops the program or breaks it."""
    out = run_msccl(_mutate(to_msccl_xml(schedules["optcc"]), how))
    assert out.deadlocked or not out.allreduce


def test_fit_takes_the_most_pieces_that_fit():
    """OptCC's default depth is too fine for the executor on 2 × 8 GPUs; the fit is the
    deepest pipeline that exports, runs as an AllReduce, and one piece more does not fit."""
    topo = fail_nics(hierarchical(2, 8), 0, 4)
    heard: list[str] = []
    fit = fit_msccl(lambda k: optcc(topo, M, pieces=k), progress=heard.append)
    assert fit.default_pieces is not None and fit.pieces is not None
    assert 1 <= fit.pieces < fit.default_pieces
    assert fit.schedule.meta_get("pieces") == str(fit.pieces)
    said = [h.split(" (")[0] for h in heard]
    assert said[0] == f"{fit.default_pieces} pieces: does not fit"
    assert "a threadblock needs about" in heard[0] and "the executor runs 256" in heard[0]
    assert f"{fit.pieces} pieces: does not fit" not in said
    assert f"{fit.pieces + 1} pieces: does not fit" in said
    with pytest.raises(TooFineError, match="steps"):
        to_msccl_xml(optcc(topo, M, pieces=fit.pieces + 1))
    out = run_msccl(fit.xml)
    assert not out.deadlocked and out.allreduce
    assert from_msccl_xml(fit.xml) == fit.schedule


def test_fit_guesses_the_depth_from_the_steps():
    """The search scales each next depth by how far the last export's busiest threadblock
    was over or under the executor's limit: a handful of generations instead of halving
    from the default and bisecting (2 × 8 GPUs, 4 NICs lost: 64 → 16 pieces)."""
    topo = fail_nics(hierarchical(2, 8), 0, 4)
    made: list[int | None] = []

    def make(k: int | None) -> Schedule:
        made.append(k)
        return optcc(topo, M, pieces=k)

    fit = fit_msccl(make)
    assert fit.pieces is not None and made[0] is None
    assert len(made) <= 4, made  # halving and bisecting took 7
    with pytest.raises(TooFineError) as info:
        to_msccl_xml(optcc(topo, M))
    assert info.value.excess is not None and info.value.excess > 1


def test_fit_keeps_what_fits_and_refuses_what_has_no_depth(schedules):
    ring_fit = fit_msccl(lambda k: schedules["ring"])
    assert ring_fit.pieces is None and ring_fit.schedule is schedules["ring"]
    with pytest.raises(TooFineError, match="steps"):  # the ring has no pieces to take away
        fit_msccl(lambda k: schedules["ring"], limits=MscclLimits(max_steps_per_tb=10))


def test_fit_falls_back_where_no_depth_can_be_written():
    """A schedule the executor cannot take at any depth (the tree packing: a channel per
    lane) is replaced by the fallback's, with the reason; without a fallback the error
    is raised; a schedule that fits never calls the fallback."""
    topo = hierarchical(2, 4, nics_per_server=2)
    size = Fraction(2**24)
    calls: list[int | None] = []

    def without(k: int | None) -> Schedule:
        calls.append(k)
        return optcc(topo, size, trees=False, pieces=k)

    fit = fit_msccl(lambda k: optcc(topo, size, trees=True, pieces=k), fallback=without)
    assert fit.replaced is not None and "exceed the executor's 32 channels" in fit.replaced
    assert fit.schedule.meta_get("variant") != "tree packing" and calls == [None]
    assert from_msccl_xml(fit.xml) == fit.schedule
    with pytest.raises(ExportError, match="32 channels"):
        fit_msccl(lambda k: optcc(topo, size, trees=True, pieces=k))
    kept = fit_msccl(lambda k: optcc(topo, size, trees=False, pieces=k), fallback=without)
    assert kept.replaced is None and calls == [None]


def test_chunks_that_merged_runs_hide_round_trip():
    """Random audit, seed 38: OptCC's small-buffer schedule on 5 × 4 GPUs (4 NICs each,
    three lost on one server), 4 KiB, has 128 chunks of 3 and 7 MSCCL chunks, some of
    them only ever sent inside runs of several. Their starts, once written as a list too
    long for one attribute and then left out, were guessed from the steps and came
    back shifted; the run-length coded sizes fit in one."""
    topo = fail_nics(hierarchical(5, 4, nics_per_server=4), 3, [1, 2, 3])
    s = optcc(topo, Fraction(4096))
    xml = to_msccl_xml(s)
    assert 'rcc_sizes="3x4,7x12,' in xml
    assert from_msccl_xml(xml) == s


def test_chunk_sizes_too_long_for_one_attribute_go_on_the_gpus():
    """100 chunks of alternating sizes (no runs to code): their sizes need more than 255
    characters, so they are written in pieces on the <gpu> elements and read back."""
    sizes = [Fraction(10, 1050), Fraction(11, 1050)] * 50
    chunks = chunks_from_sizes(sizes)
    transfers = []
    for c in range(len(chunks)):
        transfers.append(Transfer(2 * c, 0, 1, c, "reduce"))
        transfers.append(Transfer(2 * c + 1, 1, 0, c, "copy", (2 * c,)))
    s = Schedule("alternating", 2, Fraction(1050), chunks, tuple(transfers)).check_structure()
    xml = to_msccl_xml(s)
    root = ET.fromstring(xml)
    assert root.get("rcc_sizes") is None
    parts = [g.get("rcc_sizes") for g in root.findall("gpu")]
    assert all(parts) and len("".join(p or "" for p in parts)) > 255
    assert from_msccl_xml(xml) == s
    broken = xml.replace('rcc_sizes="', 'rcc_sizes="1', 1)
    with pytest.raises(ScheduleError, match="rcc_sizes add up to"):
        from_msccl_xml(broken)


def test_metadata_with_any_characters_round_trips():
    """OptCC on a healthy cluster records the variant 'ring (no degraded server)': the
    parentheses, and '=', ';', '+' or non-ASCII text, are escaped in rcc_meta."""
    s = optcc(hierarchical(3, 2), M, pipeline=False)
    assert "(" in (s.meta_get("variant") or "")
    assert from_msccl_xml(to_msccl_xml(s)) == s
    odd = dataclasses.replace(s, meta=(("a=b;c", "x+y (é) = 1; 2"), ("k", "")))
    assert from_msccl_xml(to_msccl_xml(odd)) == odd
    # a '+' that is no escape (files written before the escapes) is read as it is
    old = to_msccl_xml(s).replace("+28", "+ (", 1).replace("+29", ")", 1)
    assert from_msccl_xml(old).meta_get("variant") == "ring + (no degraded server)"


@pytest.mark.parametrize("name", ["ring", "optcc", "optcc_pipelined"])
def test_program_alone_is_proved_correct(schedules, name):
    """Read without its rcc_ attributes, as the executor has it (connections in FIFO
    order, each step after the one before it in its threadblock and after its
    depid/deps step, through nops), the exported program proves race-free, lossless and
    deadlock-free: the dependencies the export drops (between transfers on disjoint GPUs)
    are implied by the ones it keeps."""
    from resilientcc.verify import verify

    xml = to_msccl_xml(schedules[name], roundtrip=False)
    assert 'type="nop"' in xml or name == "ring"
    program = from_msccl_xml(xml)
    assert len(program.transfers) == len(schedules[name].transfers)
    report = verify(program)
    assert report.verdict == "proved", report.counterexample


@pytest.mark.parametrize(("servers", "gpus", "fail"), [(2, 4, "1:3"), (3, 4, "2:x1/2")])
def test_program_alone_keeps_every_earlier_conflict(servers, gpus, fail):
    """R2CC-AllReduce's programs, read as the executor runs them, prove. A receive must
    follow a send of the same chunks that comes before it only through other steps (a
    nop, a send of other chunks, a receive of other chunks): two earlier versions of the
    import, stopping at the first send or the first receive on the way back, found these
    racy (a random sweep)."""
    from resilientcc.schedules.r2cc import r2cc_allreduce
    from resilientcc.topology import apply_fail_specs
    from resilientcc.verify import verify

    topo = apply_fail_specs(hierarchical(servers, gpus), [fail])
    s = r2cc_allreduce(topo, Fraction(2**20), pieces=2)
    big = MscclLimits(max_steps_per_tb=10**6)
    report = verify(from_msccl_xml(to_msccl_xml(s, roundtrip=False, limits=big)))
    assert report.verdict == "proved", report.counterexample


def test_program_alone_without_its_waits_is_racy(schedules):
    """The check above is not vacuous: with its depid/deps removed the same program races."""
    from resilientcc.verify import verify

    root = ET.fromstring(to_msccl_xml(schedules["optcc"], roundtrip=False))
    for st in root.iter("step"):
        st.set("depid", "-1")
        st.set("deps", "-1")
    report = verify(from_msccl_xml(ET.tostring(root, encoding="unicode")))
    assert report.verdict == "violated"


def test_splits_too_fine_are_rounded_and_still_run_as_allreduce(schedules):
    """Where the exact splits need more equal chunks than the executor runs per loop, the
    export rounds every chunk to whole units (at least one each, none moved by a unit or
    more) and the program still runs as an AllReduce; the exact export refuses (3 × 4
    GPUs, 1 NIC lost: the straggler owns a smaller share)."""
    s = optcc(fail_nics(hierarchical(3, 4), 0, 1), M, pieces=2)
    exact = exact_units(s)
    limits = MscclLimits(max_chunks_per_loop=exact - 1)
    assert len(s.chunks) < exact - 1
    with pytest.raises(TooFineError, match="equal MSCCL chunks"):
        to_msccl_xml(s, limits=limits)
    rounded, how = round_for_msccl(s, limits)
    assert how is not None and how.exact_units == exact and how.units < exact
    assert rounded.transfers == s.transfers
    assert rounded.meta_get("chunks_rounded_to") == str(how.units)
    for old, new in zip(s.chunks, rounded.chunks, strict=True):
        assert (new.size * how.units).denominator == 1 and new.size * how.units >= 1
        assert abs(new.size - old.size) < Fraction(1, how.units)
        assert abs(new.size - old.size) <= how.max_change * old.size
    xml = to_msccl_xml(rounded, limits=limits)
    out = run_msccl(xml)
    assert not out.deadlocked and out.allreduce
    assert from_msccl_xml(xml) == rounded
    fit = fit_msccl(lambda k: s, limits=limits)
    assert fit.rounding == how and fit.schedule == rounded
    # exact splits that fit are left alone
    assert round_for_msccl(s) == (s, None)


@settings(max_examples=60, deadline=None)
@given(
    weights=hs.lists(hs.integers(1, 1000), min_size=1, max_size=40),
    extra=hs.integers(0, 200),
)
def test_rounded_chunks_tile_the_buffer(weights, extra):
    """Any exact splits, rounded to ``units``: whole units, at least one per chunk,
    contiguous from 0 to 1, and within one unit of the exact size where that is at
    least one unit."""
    total = sum(weights)
    sizes = [Fraction(w, total) for w in weights]
    n = len(sizes)
    ts = tuple(Transfer(i, 0, 1, i, "reduce") for i in range(n)) + tuple(
        Transfer(n + i, 1, 0, i, "copy", deps=(i,)) for i in range(n)
    )
    s = Schedule("x", 2, Fraction(2**20), chunks_from_sizes(sizes), ts)
    units = n + extra
    r = round_chunks(s, units)
    at = Fraction(0)
    for old, new in sorted(zip(s.chunks, r.chunks, strict=True), key=lambda p: p[0].offset):
        assert new.offset == at and (new.size * units).denominator == 1
        assert new.size >= Fraction(1, units)
        if old.size * units >= 1 and all(c.size * units >= 1 for c in s.chunks):
            assert abs(new.size - old.size) < Fraction(1, units)
        at += new.size
    assert at == 1
    with pytest.raises(ExportError, match="do not fit"):
        round_chunks(s, n - 1) if n > 1 else round_chunks(s, 0)


def test_one_wait_per_threadblock():
    """A step waits for the latest step of each other threadblock it depends on (earlier
    ones of that threadblock come first in it): 4 × 8 GPUs with 1 NIC lost exports in one
    piece (before, every dependency had its own nop step and no depth fitted), and runs as
    an AllReduce."""
    topo = fail_nics(hierarchical(4, 8), 0, 1)
    s = optcc(topo, M, pieces=1)
    xml = to_msccl_xml(s)
    root = ET.fromstring(xml)
    for gpu in root.findall("gpu"):
        for tb in gpu.findall("tb"):
            steps = tb.findall("step")
            # consecutive nops and the step after them wait on distinct threadblocks
            run: list[str] = []
            for st_el in steps:
                if st_el.get("depid", "-1") != "-1":
                    run.append(st_el.get("depid", ""))
                    assert len(run) == len(set(run)), "two waits on one threadblock"
                if st_el.get("type") != "nop":
                    run = []
    out = run_msccl(xml)
    assert not out.deadlocked and out.allreduce


def test_interpreter_tells_chunks_with_equal_contributions_apart():
    """Two chunks holding the same contributions, sent in swapped order: the multiplicities
    match but the data land in each other's place, which the interpreter reports."""
    ts = (
        Transfer(0, 0, 1, 0, "reduce"),
        Transfer(1, 0, 1, 1, "reduce"),
        Transfer(2, 1, 0, 0, "copy", deps=(0,)),
        Transfer(3, 1, 0, 1, "copy", deps=(1,)),
    )
    xml = to_msccl_xml(Schedule("pair", 2, Fraction(8), uniform_chunks(2), ts))
    assert run_msccl(xml).allreduce
    root = ET.fromstring(xml)
    tb = next(
        tb for tb in root.iter("tb") if sum(st.get("type") == "s" for st in tb.iter("step")) == 2
    )
    sends = [st for st in tb.iter("step") if st.get("type") == "s"]
    a, b = sends[0].get("srcoff"), sends[1].get("srcoff")
    sends[0].set("srcoff", b or "")
    sends[1].set("srcoff", a or "")
    out = run_msccl(ET.tostring(root, encoding="unicode"))
    assert not out.deadlocked and not out.allreduce


def _ancestors(deps: list[set[int]]) -> list[set[int]]:
    """Each node's ancestors by a search from it (deps point to earlier indices)."""
    out = []
    for i in range(len(deps)):
        seen: set[int] = set()
        todo = list(deps[i])
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(deps[d])
        out.append(seen)
    return out


@settings(max_examples=150, deadline=None)
@given(hs.data())
def test_implied_dependencies_dropped_keep_the_order(data):
    """The foreign import's transitive reduction keeps what happens before what, and
    leaves no dependency that another one implies."""
    from resilientcc.schedules.msccl import _drop_implied

    n = data.draw(hs.integers(1, 14))
    deps = [data.draw(hs.sets(hs.integers(0, i - 1), max_size=i)) if i else set() for i in range(n)]
    # a topological order other than the identity: by depth, later indices first
    depth = [0] * n
    for i in range(n):
        depth[i] = 1 + max((depth[d] for d in deps[i]), default=0)
    order = sorted(range(n), key=lambda i: (depth[i], -i))
    reduced = [set(d) for d in deps]
    _drop_implied(reduced, order)
    assert _ancestors(reduced) == _ancestors(deps)
    for i, ds in enumerate(reduced):
        assert ds <= deps[i]
        anc = _ancestors(reduced)
        for d in ds:
            assert not any(d in anc[e] for e in ds if e != d), (i, d, ds)


def test_foreign_import_keeps_only_direct_dependencies(schedules):
    """On an exported OptCC program the imported dependencies are transitively reduced
    (none implied by another), and the program still proves (test above)."""
    program = from_msccl_xml(to_msccl_xml(schedules["optcc"], roundtrip=False))
    deps = [set(t.deps) for t in program.transfers]
    anc = _ancestors(deps)
    for ds in deps:
        for d in ds:
            assert not any(d in anc[e] for e in ds if e != d)
