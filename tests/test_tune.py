"""OptCC's variants chosen by simulation (:func:`resilientcc.sim.tune.tune`, ``--tune``)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from resilientcc.cli.app import app
from resilientcc.errors import InputError, ScheduleError
from resilientcc.schedules.executor import check
from resilientcc.schedules.generators import generate
from resilientcc.schedules.serialize import load_schedule
from resilientcc.sim import simulate
from resilientcc.sim.tune import OPTCC_VARIANTS, tune
from resilientcc.topology import apply_fail_specs, hierarchical

runner = CliRunner()
MIB = 2**20
#: three of four servers of two GPUs (a NIC each, rail fabric) with every NIC at 3/4,
#: 64 MiB: OptCC's rules see them alike and run the pipelined schedule (1.338 × the
#: bound), the direct schedule takes 1.337, the ordered rings 1.285, the tree packing 1.067
SLOWED = ["1:x3/4", "2:x3/4", "3:x3/4"]
SLOWED_ARGS = ["-n", "4", "-g", "2", *[a for spec in SLOWED for a in ("--fail", spec)]]


@pytest.fixture(scope="module")
def slowed() -> tuple:  # type: ignore[type-arg]
    topo = apply_fail_specs(hierarchical(4, 2), SLOWED)
    return topo, tune(topo, Fraction(64 * MIB))


def test_keeps_the_fastest_variant_that_ran(slowed) -> None:  # type: ignore[no-untyped-def]
    _, res = slowed
    ran = [t for t in res.trials if t.time_s is not None]
    assert [t.label for t in res.trials] == [label for label, _ in OPTCC_VARIANTS]
    assert res.time_s == min(t.time_s for t in ran)
    assert res.trial(res.label).time_s == res.time_s
    # here the rules' choice is not the fastest: tuning must change it
    rules = res.trial("rules")
    assert rules.variant == "pipelined hierarchical" and res.label == "tree packing"
    assert res.time_s < 0.85 * res.trial("ordered rings").time_s
    assert res.trial("ordered rings").time_s < res.trial("direct").time_s <= rules.time_s


def test_times_are_the_simulators(slowed) -> None:  # type: ignore[no-untyped-def]
    """Each time is what simulating that variant gives, and the schedule kept is the one
    that ran fastest (simulated again from scratch)."""
    topo, res = slowed
    size = Fraction(64 * MIB)
    rules = simulate(generate("optcc", topo, size), topo).time_s
    assert res.trial("rules").time_s == pytest.approx(rules, rel=1e-12)
    assert simulate(res.schedule, topo).time_s == pytest.approx(res.time_s, rel=1e-12)
    check(res.schedule)
    assert res.schedule.meta_get("tuned") == "tree packing"
    assert res.schedule.meta_get("variant") == "tree packing"
    assert "rules: " in (res.schedule.meta_get("tune_trials") or "")


def test_variants_that_cannot_run_are_skipped_with_the_reason(slowed) -> None:  # type: ignore[no-untyped-def]
    _, res = slowed
    hier = res.trial("hierarchical ring")
    assert hier.time_s is None and "needs two healthy servers" in hier.note
    pipelined = res.trial("pipelined")  # the rules' own choice: not simulated twice
    assert pipelined.note == "same as rules" and pipelined.time_s == res.trial("rules").time_s


def test_the_rules_win_ties_and_single_straggler() -> None:
    """One server with a NIC lost on 4 servers at 64 MiB: the rules' pipelined schedule is
    the fastest; the pipelined variant gives the same schedule and is not preferred."""
    topo = apply_fail_specs(hierarchical(4, 8), ["0:1"])
    res = tune(topo, Fraction(64 * MIB), zero_latency=True)
    assert res.label == "rules"
    assert res.trial("pipelined").note == "same as rules"
    assert all(t.time_s is None or t.time_s >= res.time_s for t in res.trials)


def test_variants_given_and_errors() -> None:
    topo = apply_fail_specs(hierarchical(2, 4), ["0:1"])
    size = Fraction(8 * MIB)
    res = tune(topo, size, variants=[("few", {"pieces": 1}), ("more", {"pieces": 4})])
    assert [t.label for t in res.trials] == ["few", "more"]
    assert res.trial("few").options == (("pieces", 1),)
    with pytest.raises(InputError, match="only optcc"):
        tune(topo, size, "ring")
    with pytest.raises(InputError, match="no variants"):
        tune(topo, size, variants=[])
    with pytest.raises(InputError, match="must differ"):
        tune(topo, size, variants=[("a", {}), ("a", {"pieces": 2})])
    with pytest.raises(ScheduleError, match="no variant of optcc runs here"):
        tune(topo, size, variants=[("rings", {"ordered_rings": True, "pipeline": True})])
    # a variant for the ring generator, which has no variants of its own
    assert tune(topo, size, "ring", variants=[("one", {"channels": 1})]).label == "one"


def test_cli_sim_tune_json() -> None:
    res = runner.invoke(app, ["sim", "optcc", *SLOWED_ARGS, "--size", "64MiB", "--tune", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["tune"]["chosen"] == "tree packing"
    times = [t["time_s"] for t in d["tune"]["trials"] if t["time_s"] is not None]
    assert d["time_s"] == pytest.approx(min(times), rel=1e-12)
    assert "rules [pipelined hierarchical]" in res.stderr


def test_cli_synth_tune(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    res = runner.invoke(
        app, ["synth", "optcc", *SLOWED_ARGS, "-s", "64MiB", "--tune", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert load_schedule(out).meta_get("tuned") == "tree packing"


def test_cli_synth_tune_msccl_fits_the_executor(tmp_path: Path) -> None:
    """The kept variant at its default depth needs 896 steps a threadblock (the executor
    runs 256): --tune writes it at the most pieces that fit, as the untuned path does."""
    from resilientcc.schedules.msccl import from_msccl_xml

    argv = ["synth", "optcc", "-n", "2", "--fail", "0:4", "-s", "1GiB", "-f", "msccl-xml"]
    tuned, plain = tmp_path / "tuned.xml", tmp_path / "plain.xml"
    res = runner.invoke(app, [*argv, "--tune", "-o", str(tuned)])
    assert res.exit_code == 0, res.output
    assert "-> rules" in res.stderr
    assert "18 pieces, not the default 64: the most that fit" in res.stderr
    assert runner.invoke(app, [*argv, "-o", str(plain)]).exit_code == 0
    assert tuned.read_text() == plain.read_text()
    check(from_msccl_xml(tuned.read_text()))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sim", "ring", "--tune"], "only optcc"),
        (["sim", "ring,optcc", "--tune"], "tunes one algorithm"),
        (["sim", "optcc", "--tune", "-O", "pieces=4"], "drop -O or --tune"),
        (["synth", "ring", "--tune", "-o", "x.json"], "only optcc"),
    ],
)
def test_cli_tune_errors(argv: list[str], message: str, tmp_path: Path) -> None:
    res = runner.invoke(app, [a.replace("x.json", str(tmp_path / "x.json")) for a in argv])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output
    assert not (tmp_path / "x.json").exists()


def test_cli_tune_schedule_file(tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    assert runner.invoke(app, ["synth", "ring", "-n", "2", "-g", "2", "-o", str(f)]).exit_code == 0
    for cmd in (["sim", str(f)], ["synth", str(f), "-o", str(tmp_path / "y.json")]):
        res = runner.invoke(app, [*cmd, "-n", "2", "-g", "2", "--tune"])
        assert res.exit_code == 2 and "not a schedule file" in res.output, res.output


def test_docs_example_runs_and_the_page_shows_its_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import runpy

    root = Path(__file__).parent.parent
    runpy.run_path(str(root / "docs_src" / "sim" / "tune_example.py"))
    out = capsys.readouterr().out
    page = (root / "docs" / "schedules.md").read_text()
    assert '--8<-- "docs_src/sim/tune_example.py"' in page
    for line in out.splitlines():  # the page shows what it prints (long notes cut)
        shown = line if "does not run" not in line else line[: line.index("needs")]
        assert shown.rstrip() in page, line
