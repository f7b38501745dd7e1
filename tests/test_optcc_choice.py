"""OptCC's variant choice (``choose_variant``): the generator runs what it says, and the
rule that chose it is in the schedule's meta, on the CLI and in ``rcc sim --json``."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from resilientcc.cli.app import app
from resilientcc.errors import ScheduleError
from resilientcc.schedules.optcc import (
    VARIANT_LABELS,
    VARIANT_OPTIONS,
    VARIANTS,
    choose_variant,
    optcc,
)
from resilientcc.sim.tune import OPTCC_VARIANTS
from resilientcc.topology import apply_fail_specs, hierarchical

#: the ``variant`` meta each choice's schedule carries
META = {
    "ordered_rings": {"ordered rings"},
    "hier_ring": {"hierarchical ring"},
    "pipeline": {"pipelined hierarchical"},
    "weighted_ring": {"weighted ring"},
    "ring": {"ring (no degraded server)", "ring (two GPUs)"},
    "direct": {"direct", "rings + decoupled direct"},
    "trees": {"tree packing"},
}

#: (servers, failures, MiB): every variant is some row's default
CLUSTERS = [
    (4, "", 256),  # pipeline, no failure
    (4, "0:1", 1024),  # pipeline, one degraded
    (8, "0:4", 1024),  # hierarchical ring, the straggler owns nothing
    (4, "0:1", 16),  # hierarchical ring, small buffer
    (16, "0:1", 1024),  # hierarchical ring, a sliver
    (24, "", 1024),  # NCCL's ring
    (6, "0:nic1+1:x3/4+2:nic0,nic1,nic2,nic3+3:4", 64),  # several degraded, up to 128 MiB
    (6, "0:nic0+1:nic3+2:nic7+3:x7/8", 256),  # ordered rings
    (5, "0:nic6+1:nic3,nic4+2:nic2x1/2+3:nic5x3/4", 2),  # direct (below 4 MiB)
    (3, "0:x1/2+1:nic0", 64),  # tree packing where only the direct schedule was left
    (4, "0:nic0+1:nic3+2:nic5", 256),  # tree packing: three degraded servers that differ
]


def _topo(n: int, fail: str):  # type: ignore[no-untyped-def]
    return apply_fail_specs(hierarchical(n, 8), [f for f in fail.split("+") if f])


@pytest.mark.parametrize(("n", "fail", "mib"), CLUSTERS)
def test_the_generator_runs_the_chosen_variant_and_records_the_rule(
    n: int, fail: str, mib: int
) -> None:
    topo, size = _topo(n, fail), Fraction(mib * 2**20)
    choice = choose_variant(topo, size)
    assert choice.variant in VARIANTS and choice.rule and choice.rule != "asked for"
    s = optcc(topo, size, check=False)
    assert s.meta_get("variant") in META[choice.variant], (choice, s.meta_get("variant"))
    assert s.meta_get("variant_rule") == choice.rule


def test_the_clusters_cover_every_default_variant() -> None:
    seen = {choose_variant(_topo(n, f), Fraction(m * 2**20)).variant for n, f, m in CLUSTERS}
    assert seen == set(VARIANTS) - {"weighted_ring"}
    # the weighted ring: one degraded server above 8 servers where the hierarchical ring
    # does not run (here: refused)
    wr = choose_variant(_topo(16, "0:1"), 2**30, hier_ring=False)
    assert wr.variant == "weighted_ring" and wr.relief is not None and "3/4" in wr.rule


@pytest.mark.parametrize(
    ("options", "variant"),
    [
        ({"pipeline": True}, "pipeline"),
        ({"hier_ring": True}, "hier_ring"),
        ({"direct": True}, "direct"),
        ({"ordered_rings": True}, "ordered_rings"),
        ({"ring_fraction": Fraction(1, 2)}, "direct"),
    ],
)
def test_a_variant_asked_for_says_so(options: dict[str, object], variant: str) -> None:
    topo, size = _topo(8, "0:1+1:1"), Fraction(2**28)
    choice = choose_variant(topo, size, **options)
    assert (choice.variant, choice.rule) == (variant, "asked for")
    assert optcc(topo, size, check=False, **options).meta_get("variant_rule") == "asked for"


#: a cluster and size where each variant that can be asked for runs when asked
ASKABLE = {
    "ordered_rings": (6, "0:nic0+1:nic3+2:nic7+3:x7/8", 256),
    "hier_ring": (8, "0:4", 64),
    "pipeline": (4, "0:1", 256),
    "weighted_ring": (16, "0:1", 1024),
    "direct": (5, "0:nic6+1:nic3,nic4+2:nic2x1/2+3:nic5x3/4", 64),
    "trees": (4, "0:1", 256),
}


def test_one_table_names_the_variants_for_choice_and_tuning() -> None:
    """The options that ask for a variant (the table ``tune`` tries after the rules)
    make ``choose_variant`` choose that variant."""
    assert set(VARIANT_LABELS) == set(VARIANTS)
    assert set(VARIANT_OPTIONS) == set(VARIANTS) - {"ring"} == set(ASKABLE)
    for variant, options in VARIANT_OPTIONS.items():
        n, fail, mib = ASKABLE[variant]
        got = choose_variant(_topo(n, fail), Fraction(mib * 2**20), **options)
        assert got.variant == variant, (variant, got)
        # refusing every other variant is not asking: the direct schedule keeps its rule
        assert (got.rule == "asked for") == (variant != "direct")
    labels = [label for label, _ in OPTCC_VARIANTS]
    assert labels[0] == "rules" and len(set(labels)) == len(labels)  # tune refuses repeats


def test_choices_that_cannot_run_raise_as_optcc_does() -> None:
    topo = _topo(4, "0:1")
    for options in ({"pipeline": True, "hier_ring": True}, {"ordered_rings": "yes"}):
        with pytest.raises(ScheduleError) as a:
            choose_variant(topo, 2**28, **options)
        with pytest.raises(ScheduleError) as b:
            optcc(topo, Fraction(2**28), check=False, **options)
        assert str(a.value) == str(b.value)


def test_cli_shows_the_variant_and_its_rule(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["-n", "8", "--fail", "0:4", "-s", "64MiB"]
    res = runner.invoke(app, ["sim", "optcc", *args, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    want = choose_variant(_topo(8, "0:4"), 2**26)
    assert d["variant"] == "hierarchical ring" and d["variant_rule"] == want.rule
    res = runner.invoke(app, ["sim", "optcc", *args])
    assert f"variant: hierarchical ring — {want.rule}\n" in res.stdout
    res = runner.invoke(app, ["synth", "optcc", *args, "-o", str(tmp_path / "s.json")])
    assert res.exit_code == 0 and f"variant: hierarchical ring — {want.rule}" in res.stdout
    res = runner.invoke(app, ["sim", "ring,optcc", *args])  # the comparison says it too
    assert res.exit_code == 0 and f"optcc variant: hierarchical ring — {want.rule}\n" in res.stdout
    # a baseline has no variant: the keys are there, empty
    d = json.loads(runner.invoke(app, ["sim", "ring", *args, "--json"]).stdout)
    assert d["variant"] is None and d["variant_rule"] is None


def test_the_schedules_page_shows_what_synth_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    page = (Path(__file__).resolve().parents[1] / "docs" / "schedules.md").read_text()
    command = "rcc synth optcc -n 8 --fail 0:4 -s 64MiB -o s.json"
    res = CliRunner().invoke(app, command.split()[1:])
    assert res.exit_code == 0, res.output
    assert f"$ {command}\n{res.stdout}```" in page, res.stdout
