"""Bandwidth check of simulator timings: proved on real runs, violated when time is squeezed."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from resilientcc.schedules.generators import generate
from resilientcc.topology import fail_nics, hierarchical
from resilientcc.verify import PROVED, VIOLATED
from resilientcc.verify.bandwidth import check_bandwidth


@pytest.mark.parametrize("name", ["ring", "optcc", "balance"])
def test_simulated_schedules_respect_capacity(name: str) -> None:
    from resilientcc.sim import simulate

    topo = fail_nics(hierarchical(2, 4, 2), 0, 1)
    s = generate(name, topo, Fraction(1 << 20))
    res = simulate(s, topo)
    assert check_bandwidth(s, topo, res).verdict == PROVED
    squeezed = dataclasses.replace(
        res, start_s=res.start_s / 4, tx_end_s=res.tx_end_s / 4, end_s=res.end_s / 4
    )
    bad = check_bandwidth(s, topo, squeezed)
    assert bad.verdict == VIOLATED
    assert bad.counterexample is not None and bad.counterexample.transfers
    assert "link" in str(bad.counterexample)
