"""The runtime: schedules executed on real buffers, channel failures, lossless migration.

Known answers on hand-made schedules, every generator on degraded clusters (hypothesis
over buffer lengths and seeds, including buffers shorter than the chunk count), every
failure point of a rank's channel (each outcome, a silent one found by the
acknowledgement timeout) ending exact, live channels given up too early ending exact,
and mutants the run must
catch: a receiver without its duplicate check, a schedule with a copy for a reduce, a
lost message (no progress), a deadlocking schedule. The gloo tests run where torch is
installed and skip elsewhere.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import subprocess
import sys
import threading
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from resilientcc.cli.app import app
from resilientcc.errors import InputError, ScheduleError
from resilientcc.runtime import (
    ChannelFailure,
    RunAborted,
    RunError,
    chunk_slices,
    gloo_available,
    launched_rank,
    make_transports,
    nic_failures,
    rank_plans,
    run_distributed,
    run_rank,
    run_schedule,
    write_run_trace,
)
from resilientcc.runtime.transport import DATA, LocalTransport
from resilientcc.schedules.generators import GENERATORS, generate
from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
from resilientcc.schedules.serialize import save_schedule
from resilientcc.topology import apply_fail_specs, hierarchical

runner = CliRunner()


needs_gloo = pytest.mark.skipif(not gloo_available(), reason="torch with gloo is not installed")


def pair_schedule() -> Schedule:
    """Two ranks, two chunks: chunk 0 reduced on rank 1 over channel 0, chunk 1 on rank 0
    over channel 1, each copied back."""
    ts = (
        Transfer(0, 0, 1, 0, "reduce", channel=0),
        Transfer(1, 1, 0, 1, "reduce", channel=1),
        Transfer(2, 1, 0, 0, "copy", deps=(0,), channel=0),
        Transfer(3, 0, 1, 1, "copy", deps=(1,), channel=1),
    )
    return Schedule("pair", 2, Fraction(16), uniform_chunks(2), ts)


def degraded(n: int, g: int, *fails: str):  # type: ignore[no-untyped-def]
    return apply_fail_specs(hierarchical(n, g), list(fails))


# -- known answers -------------------------------------------------------------------


def test_pair_schedule_is_exact_and_counts_its_messages() -> None:
    r = run_schedule(pair_schedule(), elements=10)
    assert r.exact and r.wrong_ranks == () and r.max_error == 0
    assert (r.sent, r.resent, r.duplicates, r.failed) == (4, 0, 0, 0)
    assert r.payload_elements == 20  # four transfers of one 5-element chunk each
    assert r.control_messages == 4  # one acknowledgement each, no third rank to tell


def test_chunk_slices_partition_the_buffer_whatever_the_sizes() -> None:
    s = Schedule("x", 1, Fraction(8), uniform_chunks(7), ())
    for n in (1, 3, 7, 50):
        sl = chunk_slices(s, n)
        assert sl[0][0] == 0 and sl[-1][1] == n
        assert all(a[1] == b[0] for a, b in itertools.pairwise(sl))


def test_notices_go_to_the_senders_of_dependent_transfers() -> None:
    # rank 2 sends transfer 1 only after transfer 0 (rank 0 -> rank 1) completed: rank 1
    # must tell rank 2, and nobody else
    ts = (
        Transfer(0, 0, 1, 0, "reduce"),
        Transfer(1, 2, 1, 0, "reduce", deps=(0,)),
        Transfer(2, 1, 0, 0, "copy", deps=(1,)),
        Transfer(3, 1, 2, 0, "copy", deps=(1,)),
    )
    s = Schedule("three", 3, Fraction(8), uniform_chunks(1), ts)
    plans = rank_plans(s)
    assert plans[1].notify[0] == (2,)
    assert plans[1].notify[1] == ()  # its sender, rank 2, gets the acknowledgement
    assert run_schedule(s, elements=5).exact


# -- every generator ---------------------------------------------------------------------

CLUSTERS = [
    (hierarchical(2, 2), ()),
    (degraded(2, 4, "0:1"), ()),
    (degraded(3, 2, "0:x1/2"), ()),
    (degraded(2, 4, "0:2"), ()),
]


@pytest.mark.parametrize("algo", sorted(GENERATORS))
@pytest.mark.parametrize("cluster", range(len(CLUSTERS)))
def test_every_generator_runs_exact(algo: str, cluster: int) -> None:
    topo, _ = CLUSTERS[cluster]
    try:
        s = generate(algo, topo, Fraction(2**20))
    except InputError:
        pytest.skip(f"{algo} does not apply to this cluster")
    r = run_schedule(s, elements=257, seed=cluster)
    assert r.exact, r
    assert r.sent == len(s.transfers)


@settings(max_examples=25, deadline=None)
@given(
    elements=st.integers(1, 200),
    seed=st.integers(0, 2**16),
    algo=st.sampled_from(["ring", "optcc", "balance", "hierarchical"]),
)
def test_any_buffer_length_is_exact(elements: int, seed: int, algo: str) -> None:
    # buffers shorter than the chunk count leave chunks empty; the run must not care
    s = generate(algo, degraded(2, 4, "0:1"), Fraction(2**20))
    assert run_schedule(s, elements=elements, seed=seed).exact


# -- failures and migration ----------------------------------------------------------


@pytest.mark.parametrize("algo", ["ring", "optcc", "r2cc_allreduce"])
@pytest.mark.parametrize("outcome", ["lost", "delivered"])
def test_every_failure_point_of_a_channel_ends_exact(algo: str, outcome: str) -> None:
    s = generate(algo, degraded(2, 4, "0:1"), Fraction(2**20))
    plan = rank_plans(s)[0]
    channel = max(s.channels, key=plan.sends_on)
    sends = plan.sends_on(channel)
    for after in sorted({0, 1, sends // 2, sends - 1}):
        f = ChannelFailure(0, channel, after, outcome)
        r = run_schedule(s, elements=100, failures=[f], seed=after)
        assert r.exact, (after, r)
        assert r.failed == 1 and r.migrations[0][:2] == (0, channel)
        assert r.migrations[0][2] != channel
        assert r.sent == len(s.transfers) + r.resent
        if outcome == "delivered":
            assert r.resent >= 1 and r.duplicates >= 1  # the in-flight one arrived twice


@settings(max_examples=30, deadline=None)
@given(
    algo=st.sampled_from(sorted(GENERATORS)),
    cluster=st.integers(0, len(CLUSTERS) - 1),
    data=st.data(),
)
def test_any_single_channel_failure_ends_exact(algo: str, cluster: int, data) -> None:  # type: ignore[no-untyped-def]
    # failover-lossless at run time: any rank, any channel it sends on, any send, either
    # outcome
    topo, _ = CLUSTERS[cluster]
    try:
        s = generate(algo, topo, Fraction(2**20))
    except InputError:
        return
    plans = rank_plans(s)
    rank = data.draw(st.sampled_from([p.rank for p in plans if p.sends]))
    if len(s.channels) < 2:
        return
    channel = data.draw(st.sampled_from([c for c in s.channels if plans[rank].sends_on(c)]))
    after = data.draw(st.integers(0, plans[rank].sends_on(channel) - 1))
    outcome = data.draw(st.sampled_from(["lost", "delivered"]))
    r = run_schedule(s, elements=50, failures=[ChannelFailure(rank, channel, after, outcome)])
    assert r.exact and r.failed == 1 and r.duplicates == r.resent


@pytest.mark.parametrize("algo", ["ring", "optcc", "r2cc_allreduce"])
def test_a_silent_failure_is_found_by_its_timeout_and_ends_exact(algo: str) -> None:
    # the channel swallows everything from its AFTER-th send on, with no error; the
    # sender finds out only from the missing acknowledgements
    s = generate(algo, degraded(2, 4, "0:1"), Fraction(2**20))
    plan = rank_plans(s)[0]
    channel = max(s.channels, key=plan.sends_on)
    sends = plan.sends_on(channel)
    for after in sorted({0, sends // 2, sends - 1}):
        f = ChannelFailure(0, channel, after, "silent")
        r = run_schedule(s, elements=100, failures=[f], seed=after, ack_timeout_s=0.4)
        assert r.exact, (after, r)
        assert (0, channel) in {m[:2] for m in r.migrations}
        assert r.dropped >= 1 and r.detect_s >= 0.4
        # every swallowed message is sent again once; the other re-sends (delivered, not
        # acknowledged yet) are the duplicates the receivers drop
        assert r.resent == r.dropped + r.duplicates
        assert r.sent == len(s.transfers) + r.resent


def test_giving_up_live_channels_too_early_costs_re_sends_not_correctness() -> None:
    # a timeout far below the acknowledgements' round trip gives up healthy channels:
    # their unacknowledged transfers are re-sent and the receivers drop the copies
    s = generate("optcc", degraded(2, 4, "0:1"), Fraction(2**20))
    # (and never a rank's last live channel: that would end in "every channel to rank R
    # is dead")
    r = run_schedule(s, elements=64, ack_timeout_s=1e-5)
    assert r.exact and r.failed == 0 and r.migrations and r.dropped == 0
    assert r.resent == r.duplicates >= 1


def test_a_silent_failure_of_the_last_live_channel_stops_with_an_error() -> None:
    # channel 0 dies at once, channel 1 (the last) silently: never given up on the
    # timeout, so the rank waits for its acknowledgement until --timeout
    fs = [ChannelFailure(0, 0, 0), ChannelFailure(0, 1, 0, "silent")]
    with pytest.raises(RunError, match="no message for 1 s"):
        run_schedule(pair_schedule(), elements=4, failures=fs, idle_timeout_s=1, ack_timeout_s=0.1)


def first_times(events, kind: str) -> dict[int, float]:  # type: ignore[no-untyped-def]
    out: dict[int, float] = {}
    for e in events:
        if e.kind == kind:
            out.setdefault(e.transfer, e.time_s)
    return out


@pytest.mark.parametrize("algo", ["ring", "optcc", "r2cc_allreduce"])
def test_the_trace_shows_the_schedule_s_order_and_the_failover(algo: str) -> None:
    s = generate(algo, degraded(2, 4, "0:1"), Fraction(2**20))
    plans = rank_plans(s)
    channel = max(s.channels, key=plans[4].sends_on)
    f = ChannelFailure(4, channel, plans[4].sends_on(channel) // 2, "silent")
    r = run_schedule(s, elements=64, failures=[f], ack_timeout_s=0.3, trace=True)
    assert r.exact
    kinds = [e.kind for e in r.events]
    assert [e.time_s for e in r.events] == sorted(e.time_s for e in r.events)
    assert kinds.count("commit") == len(s.transfers)  # each committed once
    # every data message is one of send / resend / swallowed (a re-send can be swallowed
    # too, if it went to the silent channel before the timeout found it)
    sends = kinds.count("send") + kinds.count("resend") + kinds.count("swallowed")
    assert sends == r.sent and kinds.count("swallowed") == r.dropped >= 1
    assert kinds.count("resend") <= r.resent and kinds.count("duplicate") == r.duplicates
    give_ups = [e for e in r.events if e.kind == "give_up"]
    assert (4, channel) in {(e.rank, e.channel) for e in give_ups}
    assert all(re.match(r"no acknowledgement from rank \d+ for 0.3 s", e.detail) for e in give_ups)
    # happens-before at run time: a transfer leaves after its deps were committed, and a
    # connection's transfers leave in their FIFO order (one clock: every rank a thread)
    sent, done = first_times(r.events, "send"), first_times(r.events, "commit")
    for k, v in first_times(r.events, "swallowed").items():
        sent[k] = min(sent.get(k, v), v)
    for t in s.transfers:
        assert all(done[d] <= sent[t.id] for d in t.deps), t
    for plan in plans:
        for ids in plan.connections.values():
            assert [sent[i] for i in ids] == sorted(sent[i] for i in ids)


def test_the_trace_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    s = generate("ring", hierarchical(2, 2), Fraction(2**20))
    r = run_schedule(s, elements=16, failures=[ChannelFailure(0, 0, 1, "delivered")], trace=True)
    assert write_run_trace(r, s, tmp_path / "t.json") == "chrome"
    doc = json.loads((tmp_path / "t.json").read_text())
    bars = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert sorted(b["args"]["id"] for b in bars) == [t.id for t in s.transfers]
    assert all(b["dur"] >= 0 and b["tid"] == s.by_id[b["args"]["id"]].src for b in bars)
    marks = {e["cat"] for e in doc["traceEvents"] if e["ph"] == "i"}
    assert {"fail", "give_up", "duplicate"} <= marks
    assert write_run_trace(r, s, tmp_path / "t.csv") == "csv"
    rows = (tmp_path / "t.csv").read_text().splitlines()
    assert rows[0] == "rank,time_s,kind,transfer,channel,peer,detail"
    assert len(rows) == len(r.events) + 1 and rows[1].split(",")[1] == "0.0"
    with pytest.raises(InputError, match=r"must end in \.csv or \.json"):
        write_run_trace(r, s, tmp_path / "t.txt")
    # the CLI: the file, the summary without the events, a bad path before the run
    out = tmp_path / "cli.json"
    res = runner.invoke(app, ["run", "ring", "--backend", "local", "--trace", str(out), "--json"])
    assert res.exit_code == 0 and out.exists() and "events" not in json.loads(res.output)
    res = runner.invoke(
        app, ["run", "ring", "--backend", "local", "--trace", str(tmp_path / "x.png")]
    )
    assert res.exit_code == 2 and "--trace" in res.output and not (tmp_path / "x.png").exists()


def test_a_nic_of_a_server_fails_both_ways() -> None:
    topo = degraded(2, 4, "0:1")
    s = generate("optcc", topo, Fraction(2**20))
    fs = nic_failures(s, topo, 1, 2, after=1, outcome="delivered")
    out = [f for f in fs if not f.peers]  # server 1's GPUs: every send on channel 2
    into = [f for f in fs if f.peers]  # the others' sends on channel 2 into server 1
    assert out and {f.rank for f in out} <= {4, 5, 6, 7}
    assert into and {f.rank for f in into} <= {0, 1, 2, 3}
    assert all(f.peers == (4, 5, 6, 7) for f in into)
    assert all((f.channel, f.after, f.outcome) == (2, 1, "delivered") for f in fs)
    r = run_schedule(s, elements=64, failures=fs)
    assert r.exact and r.failed == len(fs) and r.duplicates == r.resent >= len(fs)
    only_out = nic_failures(s, topo, 1, 2, after=1, inbound=False)
    assert only_out == [dataclasses.replace(f, outcome="lost") for f in out]
    with pytest.raises(InputError, match="servers 0, 1"):
        nic_failures(s, topo, 2, 0)
    with pytest.raises(InputError, match="never be noticed"):
        nic_failures(s, topo, 1, 2, after=10**6)


def test_a_channel_dead_for_some_peers_still_carries_the_others() -> None:
    s = generate("optcc", degraded(2, 4, "0:1"), Fraction(2**20))
    plans = rank_plans(s)
    rank, channel, p, q = next(
        (pl.rank, c, dsts[0], dsts[1])
        for pl in plans
        for c in s.channels
        if len(dsts := sorted({d for d, ch in pl.connections if ch == c})) >= 2
    )
    f = ChannelFailure(rank, channel, 0, "lost", peers=(p,))
    r = run_schedule(s, elements=64, failures=[f], trace=True)
    assert r.exact and r.failed == 1
    mine = [e for e in r.events if e.rank == rank and e.kind == "send"]
    # nothing more to p on the channel, everything to q still on it
    assert not [e for e in mine if e.peer == p and e.channel == channel]
    assert sum(e.peer == q and e.channel == channel for e in mine) == len(
        plans[rank].connections[(q, channel)]
    )
    (gave,) = [e for e in r.events if e.kind == "give_up"]
    assert gave.rank == rank and gave.detail.startswith(
        f"send error; channel {channel} to rank {p} now"
    )
    with pytest.raises(InputError, match="for the same ranks"):
        run_schedule(s, failures=[f, ChannelFailure(rank, channel, 0, "silent")])
    with pytest.raises(InputError, match=r"peers \[99\]"):
        run_schedule(s, failures=[ChannelFailure(rank, channel, 0, peers=(99,))])
    with pytest.raises(ScheduleError, match="cannot include itself"):
        ChannelFailure(rank, channel, 0, peers=(rank,))


def test_two_channels_of_two_ranks_fail() -> None:
    s = generate("ring", hierarchical(2, 4), Fraction(2**20))
    fs = [ChannelFailure(0, 0, 2, "delivered"), ChannelFailure(0, 1, 1), ChannelFailure(5, 3, 0)]
    r = run_schedule(s, elements=64, failures=fs)
    assert r.exact and r.failed == 3
    # rank 0's channel 0 moved to 1, which then died too: its traffic ends on channel 2
    assert {(rk, c) for rk, c, _ in r.migrations} == {(0, 0), (0, 1), (5, 3)}


def test_without_dedup_a_resent_reduce_is_counted_twice() -> None:
    # the mutant the protocol's duplicate check exists for (DESIGN.md §6.4)
    f = [ChannelFailure(0, 0, 0, "delivered")]
    bad = run_schedule(pair_schedule(), elements=8, failures=f, dedup=False)
    assert not bad.exact and bad.wrong_ranks == (1,) and bad.duplicates == 1
    good = run_schedule(pair_schedule(), elements=8, failures=f)
    assert good.exact and good.duplicates == 1 and good.resent == 1


def test_a_rank_with_every_channel_dead_is_an_error() -> None:
    s = pair_schedule()
    fs = [ChannelFailure(0, 0, 0), ChannelFailure(0, 1, 0)]
    with pytest.raises(RunError, match="every channel to rank 1 is dead"):
        run_schedule(s, elements=4, failures=fs, idle_timeout_s=5)


def _one_channel_ring() -> Schedule:
    """NCCL's ring on one server of 4 GPUs with one NIC: channel 0 is every connection."""
    s = generate("ring", hierarchical(1, 4, nics_per_server=1), Fraction(4096))
    assert s.channels == (0,)
    return s


def test_a_rank_that_cannot_go_on_stops_the_others() -> None:
    # rank 1 loses its only channel: it raises, and tells the others, which stop at once
    # (RunAborted) instead of each waiting out its idle timeout (a RunError of its own)
    s = _one_channel_ring()
    plans = rank_plans(s)
    transports = make_transports("local", s.ranks)
    slices = chunk_slices(s, 8)
    raised: dict[int, BaseException] = {}

    def work(r: int) -> None:
        fails = [ChannelFailure(1, 0, 0)] if r == 1 else []
        try:
            run_rank(
                s, plans[r], transports[r], np.zeros(8), slices, failures=fails, idle_timeout_s=60
            )
        except RunError as exc:
            raised[r] = exc

    threads = [threading.Thread(target=work, args=(r,)) for r in range(s.ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(raised) == [0, 1, 2, 3]
    assert not isinstance(raised[1], RunAborted)
    assert "rank 1: every channel to rank 0 is dead" in str(raised[1])
    for r in (0, 2, 3):
        assert isinstance(raised[r], RunAborted)
        assert str(raised[r]) == f"rank {r}: stopped: rank 1 could not go on"
    # run_schedule reports the rank that could not go on, not those it stopped
    with pytest.raises(RunError, match="rank 1: every channel to rank 0 is dead"):
        run_schedule(s, elements=8, failures=[ChannelFailure(1, 0, 0)], idle_timeout_s=60)


def test_failures_that_could_never_fire_are_refused() -> None:
    s = pair_schedule()
    with pytest.raises(InputError, match="never fire"):
        run_schedule(s, failures=[ChannelFailure(0, 0, 1)])
    with pytest.raises(InputError, match="channels are 0, 1"):
        run_schedule(s, failures=[ChannelFailure(0, 7, 0)])
    with pytest.raises(InputError, match=r"ranks 0\.\.1"):
        run_schedule(s, failures=[ChannelFailure(2, 0, 0)])
    with pytest.raises(ScheduleError, match="outcome"):
        ChannelFailure(0, 0, 0, "maybe")
    with pytest.raises(InputError, match="two failures of channel 1 of rank 0"):
        run_schedule(s, failures=[ChannelFailure(0, 1, 0), ChannelFailure(0, 1, 0, "silent")])


# -- mutants the run must catch -----------------------------------------------------


def test_a_copy_for_a_reduce_is_caught() -> None:
    s = pair_schedule()
    wrong = dataclasses.replace(
        s, transfers=(dataclasses.replace(s.transfers[0], op="copy"), *s.transfers[1:])
    )
    r = run_schedule(wrong, elements=6)
    assert not r.exact and r.max_error > 0


def test_a_deadlocking_schedule_is_refused_before_it_runs() -> None:
    ts = (Transfer(0, 0, 1, 0, "reduce", deps=(1,)), Transfer(1, 1, 0, 0, "copy", deps=(0,)))
    s = Schedule("cycle", 2, Fraction(8), uniform_chunks(1), ts)
    with pytest.raises(ScheduleError, match="deadlock"):
        run_schedule(s)


class _Lossy(LocalTransport):
    """Drops the first data message it sends."""

    dropped = False

    def send(self, dst, header, payload=None):  # type: ignore[no-untyped-def]
        if header[0] == DATA and not _Lossy.dropped:
            _Lossy.dropped = True
            return
        super().send(dst, header, payload)


def test_a_lost_message_stops_progress_with_a_clear_error() -> None:
    s = pair_schedule()
    plans = rank_plans(s)
    inboxes = [t._inboxes[t.rank] for t in make_transports("local", 2)]  # type: ignore[attr-defined]
    tr = _Lossy(0, inboxes)
    buf = np.zeros(4)
    with pytest.raises(RunError, match=r"no message for 0\.3 s"):
        run_rank(s, plans[0], tr, buf, chunk_slices(s, 4), idle_timeout_s=0.3)


# -- gloo --------------------------------------------------------------------------


@needs_gloo
@pytest.mark.parametrize("algo", ["ring", "optcc"])
@pytest.mark.parametrize("outcome", ["delivered", "silent"])
def test_gloo_runs_exact_with_a_failure(algo: str, outcome: str) -> None:
    s = generate(algo, degraded(2, 4, "0:1"), Fraction(2**20))
    f = [ChannelFailure(0, s.channels[0], 1, outcome)]
    r = run_schedule(
        s, elements=300, backend="gloo", failures=f, idle_timeout_s=30, ack_timeout_s=1.0
    )
    assert r.backend == "gloo" and r.exact
    assert (0, s.channels[0]) in {m[:2] for m in r.migrations}
    assert (r.dropped >= 1) == (outcome == "silent")


@needs_gloo
def test_gloo_catches_the_dedup_mutant() -> None:
    f = [ChannelFailure(0, 0, 0, "delivered")]
    r = run_schedule(pair_schedule(), elements=8, backend="gloo", failures=f, dedup=False)
    assert not r.exact and r.wrong_ranks == (1,)


@needs_gloo
def test_processes_run_exact_and_catch_the_dedup_mutant() -> None:
    # every rank a process in torch.distributed's default gloo group
    # (one failure announced, one silent on another rank, found by its timeout)
    s = generate("ring", degraded(2, 2, "0:1"), Fraction(2**20))
    quiet = max(s.channels, key=rank_plans(s)[1].sends_on)
    kill = [ChannelFailure(0, 0, 2, "delivered"), ChannelFailure(1, quiet, 1, "silent")]
    ok = run_schedule(
        s, elements=64, backend="gloo", processes=True, failures=kill, ack_timeout_s=2.0, trace=True
    )
    assert ok.processes and ok.exact and ok.dropped >= 1
    kinds = [e.kind for e in ok.events]  # recorded in each process, sent back as JSON
    assert kinds.count("commit") == len(s.transfers) and kinds.count("swallowed") == ok.dropped
    assert {(0, 0), (1, quiet)} <= {m[:2] for m in ok.migrations}
    assert ok.resent == ok.dropped + ok.duplicates and ok.duplicates >= 1
    f = [ChannelFailure(0, 0, 0, "delivered")]
    bad = run_schedule(
        pair_schedule(), elements=8, backend="gloo", processes=True, failures=f, dedup=False
    )
    assert not bad.exact and bad.wrong_ranks == (1,)


@needs_gloo
def test_processes_report_a_rank_error() -> None:
    fs = [ChannelFailure(0, 0, 0), ChannelFailure(0, 1, 0)]
    with pytest.raises(RunError, match="every channel to rank 1 is dead"):
        run_schedule(
            pair_schedule(),
            elements=4,
            backend="gloo",
            processes=True,
            failures=fs,
            idle_timeout_s=3,
        )


@needs_gloo
def test_processes_report_the_rank_that_could_not_go_on() -> None:
    # the others are stopped by its ABORT, or see their gloo connections to it reset
    # when it exits: neither is what the run reports
    with pytest.raises(RunError, match=r"^rank 1: every channel to rank 0 is dead"):
        run_schedule(
            _one_channel_ring(),
            elements=8,
            backend="gloo",
            processes=True,
            failures=[ChannelFailure(1, 0, 0)],
            idle_timeout_s=60,
        )


def test_processes_need_gloo() -> None:
    with pytest.raises(InputError, match="processes run over gloo"):
        run_schedule(pair_schedule(), backend="local", processes=True)


# -- ranks started by a launcher (torchrun) -----------------------------------------


def torchrun(tmp_path, procs: int, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    """``torchrun --standalone --nproc-per-node PROCS -m resilientcc run ARGS --distributed``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += ["--nproc-per-node", str(procs), "-m", "resilientcc", "run", *args, "--distributed"]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)


@needs_gloo
def test_torchrun_ranks_run_exact_and_rank_0_reports_the_whole_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # four processes started by torchrun; NIC 0 of server 1 dies silently on its GPUs
    args = ["ring", "-n", "2", "-g", "2", "--fail-nic", "1:0:1:silent", "--ack-timeout", "1"]
    res = torchrun(tmp_path, 4, *args, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1  # rank 0 alone prints
    r = json.loads(lines[0])
    assert r["distributed"] and r["ranks"] == 4 and r["exact"] and r["dropped"] >= 1
    assert {(2, 0), (3, 0)} <= {(m[0], m[1]) for m in r["migrations"]}
    assert r["resent"] == r["dropped"] + r["duplicates"]


@needs_gloo
def test_torchrun_ranks_catch_the_dedup_mutant(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "pair.json"
    save_schedule(pair_schedule(), path)
    args = [str(path), "--fail-channel", "0:0:0:delivered", "--no-dedup"]
    res = torchrun(tmp_path, 2, *args)
    assert res.returncode != 0  # every rank exits 1
    assert "result: WRONG on 1 of 2 ranks (1)" in res.stdout, res.stdout + res.stderr


def test_distributed_needs_a_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(v, raising=False)
    res = runner.invoke(app, ["run", "ring", "--distributed"])
    assert res.exit_code == 2 and "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set" in res.output
    env = {"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    with pytest.raises(InputError, match="RANK 4 is not a rank of WORLD_SIZE 4"):
        launched_rank(env)
    with pytest.raises(InputError, match="whole numbers"):
        launched_rank({**env, "RANK": "x"})
    for k, v in {**env, "RANK": "0", "WORLD_SIZE": "3"}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(InputError, match="the schedule's channels are 0, 1"):
        run_distributed(pair_schedule(), failures=[ChannelFailure(0, 7, 0)])
    with pytest.raises(InputError, match="started 3 processes, the schedule has 4 ranks"):
        run_distributed(generate("ring", hierarchical(2, 2), Fraction(2**20)))
    res = runner.invoke(app, ["run", "ring", "--distributed", "--processes"])
    assert res.exit_code == 2 and "drop --processes" in res.output


def test_unknown_backend() -> None:
    with pytest.raises(InputError, match="unknown backend"):
        make_transports("mpi", 2)


# -- rcc run -----------------------------------------------------------------------------


def test_cli_run_prints_an_exact_result() -> None:
    res = runner.invoke(
        app,
        [
            "run",
            "optcc",
            "--fail",
            "0:1",
            "--backend",
            "local",
            "--fail-channel",
            "0:0:3:delivered",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "result: exact on all 8 ranks" in res.output
    assert "rank 0 channel 0 -> 1" in res.output and "dropped" in res.output


def test_cli_run_json_and_wrong_result_exit_code(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "pair.json"
    save_schedule(pair_schedule(), path)
    args = ["run", str(path), "--backend", "local", "--elements", "8", "--json"]
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.output)
    assert data["exact"] is True and data["ranks"] == 2 and data["sent"] == 4
    bad = runner.invoke(app, [*args[:-1], "--fail-channel", "0:0:0:delivered", "--no-dedup"])
    assert bad.exit_code == 1
    assert "WRONG on 1 of 2 ranks (1)" in bad.output and "committed again" in bad.output


def test_cli_run_fail_nic() -> None:
    res = runner.invoke(app, ["run", "ring", "--backend", "local", "--fail-nic", "1:3:2:lost"])
    assert res.exit_code == 0, res.output
    # server 1's GPUs, and rank 2's sends into server 1 on that rail
    assert (
        "channel failures: 5 (given up: rank 2 channel 3 -> 0, rank 4 channel 3 -> 0" in res.output
    )
    assert "exact on all 8 ranks" in res.output
    silent = ["run", "ring", "--backend", "local", "--fail-nic", "1:3:2:silent"]
    res = runner.invoke(app, [*silent, "--ack-timeout", "0.3"])
    assert res.exit_code == 0, res.output
    # each of the 4 GPUs swallows at least one message before its timeout
    swallowed = re.search(r"silent failures: (\d+) messages swallowed", res.output)
    assert swallowed and int(swallowed.group(1)) >= 4, res.output
    assert "acknowledgement timeout 0.3 s" in res.output and "exact on all 8" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fail-nic", "7:0"], "NIC failure on server 7"),
        (["--fail-nic", "0:1:x"], "--fail-nic '0:1:x': SERVER, NIC and AFTER"),
        (["--fail-channel", "0:x"], "must be whole numbers"),
        (["--fail-channel", "0"], "RANK:CHANNEL"),
        (["--fail-channel", "0:0:0:maybe"], "OUTCOME must be one of"),
        (["--fail-channel", "0:9"], "the schedule's channels are"),
        (["--fail-channel", "0:0:999"], "would never fire"),
        (["--elements", "0"], "--elements: must be at least 1"),
        (["--backend", "mpi"], "--backend"),
        (["--timeout", "0"], "--timeout"),
        (["--ack-timeout", "-1"], "--ack-timeout: must be positive"),
    ],
)
def test_cli_run_bad_input(args: list[str], message: str) -> None:
    res = runner.invoke(app, ["run", "ring", "--backend", "local", *args])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


def test_cli_run_bad_schedule_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "bad.json"
    p.write_text("{not json", encoding="utf-8")
    res = runner.invoke(app, ["run", str(p)])
    assert res.exit_code == 2 and "not valid JSON" in res.output
    res = runner.invoke(app, ["run", str(tmp_path / "missing.json")])
    assert res.exit_code == 2 and "no such schedule file" in res.output


# -- the docs' example -----------------------------------------------------------------


def test_docs_example_prints_what_the_page_shows(capsys: pytest.CaptureFixture[str]) -> None:
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    runpy.run_path(str(root / "docs_src" / "runtime" / "example.py"), run_name="__main__")
    shown = (root / "docs_src" / "runtime" / "example.txt").read_text(encoding="utf-8")
    assert capsys.readouterr().out == shown
    page = (root / "docs" / "runtime.md").read_text(encoding="utf-8")
    assert '--8<-- "docs_src/runtime/example.py"' in page
    assert '--8<-- "docs_src/runtime/example.txt"' in page


def _racy() -> Schedule:
    """Ranks 0 and 2 both reduce into rank 1's chunk with nothing ordering them: exact in
    every order the executor tries (adds commute), but a race the verifier reports."""
    ts = (
        Transfer(0, 0, 1, 0, "reduce"),
        Transfer(1, 2, 1, 0, "reduce"),
        Transfer(2, 1, 0, 0, "copy", deps=(0, 1)),
        Transfer(3, 1, 2, 0, "copy", deps=(0, 1)),
    )
    return Schedule("racy", 3, Fraction(8), uniform_chunks(1), ts)


def test_cli_run_verify_runs_only_what_is_proved(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ok = runner.invoke(
        app, ["run", "ring", "--backend", "local", "--verify", "--fail-channel", "0:0:1"]
    )
    assert ok.exit_code == 0, ok.output
    assert "verified: deadlock_free, race_free, lossless, failover_lossless proved" in ok.output
    path = tmp_path / "racy.json"
    save_schedule(_racy(), path)
    plain = runner.invoke(app, ["run", str(path), "--backend", "local"])
    assert plain.exit_code == 0 and "exact on all 3 ranks" in plain.output
    refused = runner.invoke(app, ["run", str(path), "--backend", "local", "--verify"])
    assert refused.exit_code == 2
    assert "--verify: race_free violated" in refused.output and "ran " not in refused.output


def _most_open_sends(r) -> int:  # type: ignore[no-untyped-def]
    """The most sends of one rank not yet committed by their receivers when it sent
    another (from the run's trace)."""
    committed = {e.transfer: e.time_s for e in r.events if e.kind == "commit"}
    sends: dict[int, list[tuple[float, int]]] = {}
    for e in r.events:
        if e.kind == "send":
            sends.setdefault(e.rank, []).append((e.time_s, e.transfer))
    return max(
        sum(1 for _t0, tid0 in mine[:k] if committed[tid0] > t)
        for mine in sends.values()
        for k, (t, _tid) in enumerate(mine)
    )


@pytest.mark.parametrize("window", [1, 3])
def test_the_send_window_bounds_each_rank_s_unacknowledged_sends(window: int) -> None:
    # a rank sends again only once a send falls out of the window: at each send, at most
    # window - 1 of the rank's earlier sends are not committed yet (a commit comes before
    # its acknowledgement); with a window too wide to matter the ranks send more at once
    s = generate("optcc", degraded(2, 4, "0:1"), Fraction(2**20))
    r = run_schedule(s, elements=64, trace=True, send_window=window)
    assert r.exact and r.resent == 0
    assert sum(e.kind == "send" for e in r.events) == len(s.transfers)
    assert _most_open_sends(r) <= window - 1
    wide = run_schedule(s, elements=64, trace=True, send_window=10**6)
    assert wide.exact and _most_open_sends(wide) > window - 1


def test_a_send_window_below_one_is_refused() -> None:
    s = generate("ring", hierarchical(1, 2), Fraction(64))
    with pytest.raises(InputError, match="send window must be at least 1"):
        run_schedule(s, elements=8, send_window=0)


def test_cli_run_says_a_long_run_takes_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    import resilientcc.cli.run as cli_run

    args = ["run", "ring", "-n", "1", "-g", "4", "--backend", "local"]
    quiet = runner.invoke(app, args)
    assert quiet.exit_code == 0 and "this can take a while" not in quiet.stderr
    monkeypatch.setattr(cli_run, "LONG_RUN_TRANSFERS", 10)
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    said = re.search(
        r"running ring: ([\d,]+) transfers, one message each, this can take", res.stderr
    )
    assert said and f"{said.group(1)} transfers" in res.stdout  # the count the run reports
    assert "this can take a while" not in res.stdout
    as_json = runner.invoke(app, [*args, "--json"])
    assert as_json.exit_code == 0 and "this can take a while" not in as_json.stderr
    json.loads(as_json.stdout)
