"""Transfers by kind (NVLink / network, reduce / copy), their throughput series, and the
measured stages figure of docs/schedules.md."""

from __future__ import annotations

import dataclasses
import runpy
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.errors import InputError
from resilientcc.schedules.hierarchical import hierarchical as hier_schedule
from resilientcc.schedules.ring import ring
from resilientcc.sim import simulate
from resilientcc.sim.plot import KINDS, kind_series, plot, transfer_kinds, utilisation_series
from resilientcc.topology import fail_nics, hierarchical, uniform_switch

ROOT = Path(__file__).resolve().parents[1]
M = Fraction(2**22)


@pytest.mark.parametrize(("servers", "gpus"), [(2, 2), (3, 4), (4, 8)])
def test_hierarchical_bytes_by_kind_are_its_four_stages(servers: int, gpus: int) -> None:
    """NCCL's hierarchical AllReduce, per GPU: (G−1)/G · M over NVLink each way, and its
    rail ring (N−1)/N · M/G each way; so N(G−1) · M of NVLink reduce and of NVLink copy,
    (N−1) · M of network reduce and of network copy over the cluster."""
    topo = hierarchical(servers, gpus, gpus)
    sched = hier_schedule(topo, M)
    res = simulate(sched, topo)
    kinds = transfer_kinds(res, sched, topo)
    got = [Fraction(int(res.nbytes[kinds == k].sum())) / M for k in range(4)]
    nvl, net = servers * (gpus - 1), servers - 1
    assert dict(zip(KINDS, got, strict=True)) == {
        "NVLink reduce": nvl,
        "network reduce": net,
        "network copy": net,
        "NVLink copy": nvl,
    }
    # and they run in that order (KINDS lists the stages in order): reduce and copy,
    # equal in bytes, are told apart by when they run
    mean_start = [float(res.start_s[kinds == k].mean()) for k in range(4)]
    assert mean_start == sorted(mean_start)


def test_switch_endpoints_are_all_network() -> None:
    topo = uniform_switch(4)
    sched = ring(topo, M)
    res = simulate(sched, topo)
    kinds = transfer_kinds(res, sched, topo)
    assert set(kinds.tolist()) == {1, 2}


def test_kinds_follow_ids_not_positions() -> None:
    """A result whose transfers come in another order than the schedule's is matched by
    id; one with transfers the schedule lacks is refused."""
    topo = hierarchical(2, 2, 2)
    sched = hier_schedule(topo, M)
    res = simulate(sched, topo)
    kinds = transfer_kinds(res, sched, topo)
    flipped = dataclasses.replace(sched, transfers=tuple(reversed(sched.transfers)))
    assert np.array_equal(transfer_kinds(res, flipped, topo), kinds)
    other = dataclasses.replace(sched, transfers=sched.transfers[: len(sched.transfers) // 2])
    with pytest.raises(InputError, match="not a simulation of this schedule"):
        transfer_kinds(res, other, topo)


@settings(max_examples=15, deadline=None)
@given(
    servers=st.integers(2, 4),
    gpus=st.sampled_from([2, 4]),
    lost=st.integers(0, 1),
    bins=st.integers(5, 300),
)
def test_series_conserve_bytes(servers: int, gpus: int, lost: int, bins: int) -> None:
    """Each kind's throughput, integrated over the run, is that kind's bytes, and the
    kinds add up to the aggregate series."""
    topo = hierarchical(servers, gpus, gpus)
    if lost:
        topo = fail_nics(topo, 0, lost)
    sched = ring(topo, M)
    res = simulate(sched, topo)
    kinds = transfer_kinds(res, sched, topo)
    x, rates = kind_series(res, kinds, bins)
    _, total = utilisation_series(res, bins)
    dt = x[1] - x[0]
    for k in range(4):
        assert rates[k].sum() * dt == pytest.approx(res.nbytes[kinds == k].sum(), rel=1e-9)
    assert np.allclose(rates.sum(axis=0), total, rtol=1e-9, atol=1e-6 * total.max())


def test_plot_by_kind_writes_a_png(tmp_path: Path) -> None:
    topo = fail_nics(hierarchical(2, 4), 0, 1)
    sched = ring(topo, M)
    res = simulate(sched, topo)
    out = tmp_path / "k.png"
    plot(res, out, kinds=transfer_kinds(res, sched, topo))
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_docs_stages_figure_is_measured(tmp_path: Path) -> None:
    """The stages figure of docs/schedules.md comes from simulated runs; on a small
    cluster, the hierarchical schedule's kinds are its four stages and OptCC moves
    fewer network bytes than the flat ring."""
    mod = runpy.run_path(str(ROOT / "docs_src" / "schedules" / "figures.py"))
    totals = mod["stages_figure"](out=tmp_path, servers=2, gpus=4, lost=1, size=Fraction(2**22))
    assert (tmp_path / "schedule-stages.png").read_bytes()[:4] == b"\x89PNG"
    assert set(totals) == set(mod["ALGORITHMS"])
    assert all(v > 0 for v in totals["hierarchical"])
    net = {name: t[1] + t[2] for name, t in totals.items()}
    assert net["optcc"] < net["ring"]
    assert "img/schedule-stages.png" in (ROOT / "docs" / "schedules.md").read_text()


def test_docs_small_buffer_figure_is_measured(tmp_path: Path) -> None:
    """The small-buffer figure of docs/schedules.md comes from two simulated runs of
    OptCC; on a small cluster its small-buffer defaults beat its rings there too."""
    mod = runpy.run_path(str(ROOT / "docs_src" / "schedules" / "figures.py"))
    times = mod["small_figure"](out=tmp_path, servers=4, gpus=4, lost=2, size=Fraction(2**20))
    assert (tmp_path / "small-buffers.png").read_bytes()[:4] == b"\x89PNG"
    assert times["optcc, small-buffer defaults"] < times["optcc, rings"]
    assert "img/small-buffers.png" in (ROOT / "docs" / "schedules.md").read_text()
