"""scripts/random_audit.py: it passes on the seed that found a bug, and flags mutants."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from resilientcc.schedules.generators import generate
from resilientcc.schedules.ir import Schedule
from resilientcc.topology.model import Topology

pytest.importorskip("resilientcc.sim")

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "random_audit.py"


def load_script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("random_audit", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_seed_113_one_server_with_every_nic_down_passes_every_check(capsys):
    audit = load_script()
    case = audit.draw_case(113)
    assert case.topology.num_ranks == 6 and not case.topology.alive_nics(0)
    assert audit.main(["--seeds", "113:114", "--checks", "all"]) == 0
    out = capsys.readouterr().out
    assert "0 failure(s)" in out
    assert "optcc                    1        0" in out  # generated, not refused


def test_draws_are_reproducible():
    audit = load_script()
    a, b = audit.draw_case(7), audit.draw_case(7)
    assert a.desc == b.desc and a.topology == b.topology and a.size == b.size
    assert audit.draw_case(8).desc != a.desc


def _dropped(name: str, topo: Topology, size: Fraction) -> Schedule:
    """Mutant: the last transfer lost."""
    s = generate(name, topo, size)
    return dataclasses.replace(s, transfers=s.transfers[:-1])


def _shrunk(name: str, topo: Topology, size: Fraction) -> Schedule:
    """Mutant: every chunk a quarter of what it should be (a quarter of the bytes moved)."""
    s = generate(name, topo, size)
    chunks = tuple(dataclasses.replace(c, offset=c.offset / 4, size=c.size / 4) for c in s.chunks)
    return dataclasses.replace(s, chunks=chunks)


def _crashing(name: str, topo: Topology, size: Fraction) -> Schedule:
    raise ZeroDivisionError("Fraction(0, 0)")


@pytest.mark.parametrize(
    "make,check,expect",
    [
        (_dropped, "exact", "exact: not exact"),
        (_shrunk, "bound", "bound: simulated"),
        (_dropped, "msccl", None),  # still round-trips: msccl alone does not see it
        (_crashing, "exact", "generator raised"),
    ],
)
def test_mutants_are_flagged(make, check, expect):
    audit = load_script()
    case = audit.draw_case(115)  # 3 x 2 GPUs, 4 KiB
    tally: dict = {}
    found = audit.audit_case(case, tally, (check,), ("ring", "optcc"), make=make)
    if expect is None:
        assert found == []
    else:
        assert len(found) >= 2 and all(expect in f for f in found[:2]), found
        assert all(f.startswith("seed 115, ") for f in found)
        assert sum(len(t.failures) for t in tally.values()) == len(found)


def test_bad_arguments_exit_with_a_message():
    audit = load_script()
    for argv in (["--seeds", "x"], ["--seeds", "5:5"], ["--checks", "speed"]):
        with pytest.raises(SystemExit, match="error: "):
            audit.main(argv)


def test_optcc_against_the_fastest_other_is_reported_not_failed() -> None:
    audit = load_script()
    tally = {
        "optcc": audit.Tally(ratios={1: 1.2, 2: 1.0}),
        "ring": audit.Tally(ratios={1: 1.0, 2: 1.1}),
        "trees": audit.Tally(ratios={1: 1.1}),
    }
    rows = audit.behind(tally)
    assert [(round(r, 6), seed, name) for r, seed, name in rows] == [
        (1.2, 1, "ring"),
        (round(1.0 / 1.1, 6), 2, "ring"),
    ]
    lines = audit.behind_report(tally)
    assert lines[0].startswith("optcc behind the fastest other by more than 5%: 1 of 2 cases")
    assert lines[1] == "  seed 1: 1.200 x ring's time"
    # the bound check keeps each simulated time over the bound
    case = audit.draw_case(115)
    found = audit.audit_case(case, (t := {}), ("bound",), ("ring", "optcc"))
    assert found == [] and all(115 in t[a].ratios and t[a].ratios[115] >= 1 for a in t)
