"""``rcc sim``: algorithms and files, JSON and table output, plots, one-line errors (exit 2)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from resilientcc.cli.app import app
from resilientcc.schedules.ring import ring
from resilientcc.schedules.serialize import save_schedule
from resilientcc.topology import hierarchical

runner = CliRunner()
SMALL = ["-n", "2", "-g", "4", "--size", "64MiB"]


def _run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["sim", *args])


def _json(*args: str) -> dict:
    res = _run(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_json_fields_and_values() -> None:
    d = _json("ring", *SMALL, "--zero-latency")
    for key in (
        "algorithm",
        "time_s",
        "latency_s",
        "lower_bound_s",
        "ratio_to_bound",
        "fault_free_ring_s",
        "overhead_vs_fault_free_ring",
        "fault_free_lower_bound_s",
        "overhead_vs_fault_free_bound",
    ):
        assert key in d
    assert d["algorithm"] == "ring"
    p = 8
    expected = 2 * (p - 1) / p * 64 * 2**20 / (4 * 50e9)
    assert d["time_s"] == pytest.approx(expected, rel=1e-9)
    if d["fault_free_ring_s"] is not None:  # bounds module present
        assert d["overhead_vs_fault_free_ring"] == pytest.approx(0.0, abs=1e-9)
        assert d["ratio_to_bound"] >= 1 - 1e-9
    # the fault-free ring loads every NIC alike and keeps them busy: floor = time
    assert d["byte_floor_s"] == pytest.approx(expected, rel=1e-9)
    assert d["byte_floor_link"].startswith("s") and "nic" in d["byte_floor_link"]


def test_latency_bound_fields() -> None:
    """With latencies the run is compared with the latency-aware bound too: above the
    LP bound, below the run; at zero latency it is the LP bound."""
    d = _json("optcc", *SMALL)
    assert d["lower_bound_s"] < d["latency_bound_s"] <= d["time_s"]
    assert d["ratio_to_latency_bound"] == pytest.approx(d["time_s"] / d["latency_bound_s"])
    assert 1 - 1e-9 <= d["ratio_to_latency_bound"] < d["ratio_to_bound"]
    z = _json("optcc", *SMALL, "--zero-latency")
    assert z["latency_bound_s"] == z["lower_bound_s"]
    assert "lower bound with latency" in _run("optcc", *SMALL).stdout


def test_simulated_fault_free_ring() -> None:
    """Next to the closed form, the fault-free ring simulated with the same latencies:
    the ring on a healthy cluster is its own reference; at zero latency the simulation
    is the closed form; with latency, at a small size, it is well above it."""
    d = _json("ring", *SMALL)
    assert d["fault_free_ring_sim_s"] == d["time_s"]
    assert d["overhead_vs_fault_free_ring_sim"] == 0.0
    d = _json("optcc", "-n", "2", "-g", "4", "--size", "4MiB", "--fail", "0:1")
    assert d["fault_free_ring_sim_s"] > 1.2 * d["fault_free_ring_s"]
    assert d["overhead_vs_fault_free_ring_sim"] == pytest.approx(
        d["time_s"] / d["fault_free_ring_sim_s"] - 1
    )
    z = _json("balance", *SMALL, "--fail", "0:2", "--zero-latency")
    assert z["fault_free_ring_sim_s"] == pytest.approx(z["fault_free_ring_s"], rel=1e-9)
    res = _run("optcc", "-n", "2", "-g", "4", "--size", "4MiB", "--fail", "0:1")
    assert "fault-free ring, simulated" in res.stdout and "overhead vs it" in res.stdout


def test_note_when_the_critical_path_latency_overlaps() -> None:
    """On 2 × 1 GPUs OptCC's critical path holds more latency than the run pays (its
    zero-latency run is exactly the bound), so time − latency falls below the bound:
    the table says why and how to measure it instead; rerun leaves nothing to explain."""
    args = ["-n", "2", "-g", "1", "--size", "16MiB"]
    d = _json("optcc", *args)
    assert d["bandwidth_s"] < d["lower_bound_s"]
    out = _run("optcc", *args).stdout
    assert "the bandwidth part is below the lower bound" in out and "rerun" in out
    rerun = _json("optcc", *args, "--latency-mode", "rerun")
    assert rerun["bandwidth_s"] == pytest.approx(rerun["lower_bound_s"], rel=1e-9)
    assert "below the lower bound" not in _run("optcc", *args, "--latency-mode", "rerun").stdout
    assert "time − latency of optcc is below" in _run("ring,optcc", *args).stdout
    assert "below the lower bound" not in _run("ring", *args).stdout


def test_generator_options_reach_the_generator(tmp_path: Path) -> None:
    """-O KEY=VALUE is passed to the generator: fewer pieces, fewer transfers; a file
    takes no options; -O help lists them and exits 0."""
    args = ["-n", "2", "-g", "4", "--size", "16MiB", "--fail", "0:1"]
    default = _json("optcc", *args)
    fewer = _json("optcc", *args, "-O", "pieces=2")
    assert fewer["num_transfers"] < default["num_transfers"]
    # exact numbers from the command line reach options typed as floats too
    assert _json("optcc", *args, "-O", "pipeline_timing=1.5")["num_transfers"] > 0
    res = runner.invoke(
        app, ["synth", "optcc", *args, "-O", "pieces=2", "-o", str(tmp_path / "s.json")]
    )
    assert res.exit_code == 0, res.output
    assert f"{fewer['num_transfers']} transfers" in res.stdout
    assert _json(str(tmp_path / "s.json"), *args)["time_s"] == fewer["time_s"]
    res = _run(str(tmp_path / "s.json"), *args, "-O", "pieces=2")
    assert res.exit_code == 2 and "not a schedule file" in res.output
    res = _run("optcc", "-O", "help")
    assert res.exit_code == 0 and "pieces = None" in res.stdout and "sliver = None" in res.stdout
    assert "has no options" in _run("balance", "-O", "help").stdout


def test_synth_and_sim_share_their_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schedule written with rcc synth's defaults simulates with rcc sim's (both 4 × 8
    GPUs; synth used to default to 2 servers, so the file was 'for another topology')."""
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["synth", "ring", "--size", "1MiB", "-o", "r.json"]).exit_code == 0
    d = _json("r.json", "--size", "1MiB")
    assert d["ranks"] == 32


def test_custom_topologies(tmp_path: Path) -> None:
    """GPUs without a server: a one-line error from every layered generator (it was an
    IndexError traceback); OptCC and ``all`` pack trees there instead. With servers, a
    healthy custom cluster is its own fault-free reference, link latencies included
    (rebuilding it as a switch model dropped them)."""
    from resilientcc.topology.io import save_topology
    from resilientcc.topology.model import Link, Node, Topology

    def tri(servers: bool) -> Path:
        gpus = [Node(f"g{i}", "gpu", server=i if servers else None, rank=i) for i in range(3)]
        nodes = (*gpus, Node("sw", "switch"))
        cap, lat = Fraction(10**10), Fraction(1, 10**6)
        links = tuple(
            link
            for i in range(3)
            for link in (
                Link(f"g{i}", "sw", cap, lat, "network"),
                Link("sw", f"g{i}", cap, lat, "network"),
            )
        )
        path = tmp_path / f"tri-{servers}.json"
        save_topology(Topology(nodes, links, name="tri"), path)
        return path

    loose = str(tri(False))
    for algo in ("ring", "balance", "hierarchical", "r2cc_allreduce"):
        res = _run(algo, "--topology", loose, "--size", "1MiB")
        assert res.exit_code == 2, res.output
        assert "GPU g0 belongs to no server" in res.output and "Traceback" not in res.output
    assert _json("optcc", "--topology", loose, "--size", "1MiB")["variant"] == "tree packing"
    assert _json("all", "--topology", loose, "--size", "1MiB")["algorithms"] == ["trees"]
    d = _json("ring", "--topology", str(tri(True)), "--size", "1MiB")
    assert d["fault_free_ring_sim_s"] == d["time_s"]


def test_no_simulated_fault_free_ring_above_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import resilientcc.cli.sim_report as cli_sim

    monkeypatch.setattr(cli_sim, "FF_RING_SIM_MAX_GPUS", 4)
    d = _json("ring", *SMALL)
    assert d["fault_free_ring_sim_s"] is None and d["overhead_vs_fault_free_ring_sim"] is None
    assert d["fault_free_ring_s"] is not None
    assert "fault-free ring, simulated" not in _run("ring", *SMALL).stdout


def test_byte_floor_separates_placement_from_dynamics() -> None:
    """Balance on a degraded server: its busiest link (a surviving NIC of the straggler,
    carrying the dead NICs' channels) sets a floor above the bound, and the run is at
    least that long."""
    d = _json("balance", *SMALL, "--fail", "0:2", "--zero-latency")
    assert d["byte_floor_link"].startswith("s0.")
    assert d["time_s"] >= d["byte_floor_s"] * (1 - 1e-9)
    if d["lower_bound_s"] is not None:
        assert d["byte_floor_ratio_to_bound"] > 1.05
    table = _run("balance", *SMALL, "--fail", "0:2")
    assert table.exit_code == 0 and "byte floor" in table.stdout
    # the rest of the time: before, inside and after the floor link's busy window
    parts = [d[f"byte_floor_{k}_s"] for k in ("head", "idle", "tail")]
    assert min(parts) >= -1e-12
    assert d["byte_floor_s"] + sum(parts) == pytest.approx(d["time_s"], rel=1e-12)
    assert "after its link's last byte" in table.stdout


def test_long_simulations_say_so_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    import resilientcc.cli.sim_report as cli_sim

    res = _run("ring", *SMALL, "--json")
    assert res.exit_code == 0 and "transfers" not in res.stderr
    monkeypatch.setattr(cli_sim, "LONG_SIM_TRANSFERS", 10)
    res = _run("ring", *SMALL, "--json")
    assert res.exit_code == 0, res.output
    assert "simulating ring:" in res.stderr and "transfers" in res.stderr
    assert json.loads(res.stdout)["algorithm"] == "ring"  # stdout stays one JSON object


def test_large_clusters_say_they_are_generating(monkeypatch: pytest.MonkeyPatch) -> None:
    import resilientcc.cli.sim_report as cli_sim

    res = _run("ring", *SMALL, "--json")
    assert "generating" not in res.stderr
    monkeypatch.setattr(cli_sim, "LONG_GEN_GPUS", 2)
    res = _run("ring", *SMALL, "--json")
    assert res.exit_code == 0, res.output
    assert "generating ring on" in res.stderr and "transfers in" in res.stderr
    assert json.loads(res.stdout)["algorithm"] == "ring"


def test_long_simulations_report_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long simulation says on stderr how far it got (every ``PROGRESS_INTERVAL_S``)."""
    import resilientcc.cli.sim_report as cli_sim
    import resilientcc.sim.flow as flow

    monkeypatch.setattr(cli_sim, "LONG_SIM_TRANSFERS", 10)
    monkeypatch.setattr(cli_sim, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(flow, "PROGRESS_EVERY", 4)
    res = _run("ring", *SMALL, "--json")
    assert res.exit_code == 0, res.output
    assert "transfers done" in res.stderr and "simulated" in res.stderr
    assert json.loads(res.stdout)["algorithm"] == "ring"


def test_degraded_balance_beats_naive_ring() -> None:
    ring_d = _json("ring", *SMALL, "--fail", "0:2")
    bal_d = _json("balance", *SMALL, "--fail", "0:2")
    assert bal_d["time_s"] < ring_d["time_s"]
    assert bal_d["latency_s"] > 0


def test_table_and_plot(tmp_path: Path) -> None:
    png = tmp_path / "sim.png"
    res = _run("ring", *SMALL, "--plot", str(png))
    assert res.exit_code == 0, res.output
    for key in ("simulated time", "latency part", "fault-free ring", " us"):
        assert key in res.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_comparison_rows_are_the_single_runs(tmp_path: Path) -> None:
    """``rcc sim A,B``: one object whose results are exactly what ``rcc sim A`` and
    ``rcc sim B`` print, in the order given, with the references once."""
    args = ["-n", "2", "-g", "4", "--size", "16MiB", "--fail", "0:1"]
    both = _json("optcc,balance", *args)
    assert both["algorithms"] == ["optcc", "balance"]
    assert [r["algorithm"] for r in both["results"]] == ["optcc", "balance"]
    for r in both["results"]:
        single = _json(r["algorithm"], *args)
        assert r["time_s"] == single["time_s"]
        assert r["ratio_to_bound"] == single["ratio_to_bound"]
        assert r["overhead_vs_fault_free_ring_sim"] == single["overhead_vs_fault_free_ring_sim"]
        for key in ("lower_bound_s", "fault_free_ring_s", "fault_free_ring_sim_s"):
            assert both[key] == single[key]
    png = tmp_path / "cmp.png"
    res = _run("all", *args, "--plot", str(png))
    assert res.exit_code == 0, res.output
    for name in ("ring", "balance", "hierarchical", "r2cc_allreduce", "optcc"):
        assert f"│ {name} " in res.stdout
    assert "lower bound" in res.stdout and "simulated:" in res.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_one_gpu_clusters(tmp_path: Path) -> None:
    """One GPU: nothing to send, a bound of zero; every output still works."""
    res = _run(
        "all",
        "-n",
        "1",
        "-g",
        "1",
        "--size",
        "1MiB",
        "--plot",
        str(tmp_path / "a.png"),
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    args = ["ring", "-n", "1", "-g", "1", "--size", "1MiB"]
    res = _run(*args, "--plot", str(tmp_path / "r.png"), "--trace", str(tmp_path / "r.csv"))
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r.csv").read_text().count("\n") == 1  # the header only


def test_schedule_file_and_wrong_topology(tmp_path: Path) -> None:
    f = tmp_path / "ring.json"
    save_schedule(ring(hierarchical(2, 4), Fraction(2**20)), f)
    d = _json(str(f), *SMALL)
    assert d["algorithm"] == "ring"
    assert d["num_transfers"] == 2 * 7 * 4 * 8
    res = _run(str(f), "-n", "3", "-g", "4")
    assert res.exit_code == 2
    assert "schedule was made for another topology" in res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuch"], "unknown algorithm 'nosuch' (known: ring, balance"),
        (["ring", "--size", "0"], "--size"),
        (["ring", "--size", "lots"], "--size"),
        (["ring", "--latency-mode", "guess"], "latency_mode"),
        (["balance", "--channels", "2"], "--channels"),
        (["ring", "--plot", "x.gif"], ".png"),
        # file names that are not files; values that overflowed or underflowed the
        # simulator's floats (a traceback, or a "deadlock" for a bandwidth rounded to zero)
        (["nope.json"], "nope.json: no such schedule file"),
        (["sub/nope"], "sub/nope: no such schedule file"),
        (["ring", "--size", "1e400"], "--size: '1e400' is too large"),
        (["ring", "--nic-bw", "1e400GB/s"], "--nic-bw: '1e400GB/s' is out of range"),
        (["ring", "--nic-bw", "1e-400GB/s"], "--nic-bw: '1e-400GB/s' is out of range"),
        (["ring", "--base-latency", "1e400s"], "--base-latency: '1e400s' is too long"),
        (["ring", "--channels", "100000"], "100000 channels, more than 64"),
        # comparisons: checked before anything is simulated
        (["ring,nosuch"], "unknown algorithm 'nosuch'"),
        (["ring,x.json"], "x.json: a list compares algorithms"),
        (["ring,Ring"], "an algorithm appears twice"),
        (["ring,"], "an empty name"),
        (["balance,optcc", "--channels", "2"], "ring is not listed"),
        # generator options
        (["optcc", "-O", "bogus=1"], "-O bogus: not an option of optcc (its options: pieces,"),
        (["optcc", "-O", "pieces"], "expected KEY=VALUE"),
        (["optcc", "-O", "pieces=x"], "optcc: pieces must be a positive integer, got 'x'"),
        (["optcc", "-O", "pieces=1e400"], "-O pieces=1e400: too large"),
        (["optcc", "-O", "pieces=4", "-O", "pieces=8"], "-O pieces: given twice"),
        (["ring,optcc", "-O", "pieces=8"], "simulate it on its own"),
        (["balance", "-O", "pieces=8"], "not an option of balance (its options: none)"),
        (["ring", "--channels", "2", "-O", "channels=2"], "give one"),
        # option values are checked whichever variant runs; booleans are not integers
        (["optcc", "-O", "pieces=true"], "optcc: pieces must be a positive integer, got True"),
        (["optcc", "-O", "sliver=-1/2"], "sliver must be in [0, 1), got -1/2"),
        (["optcc", "-O", "ramp=3"], "optcc: ramp must be true or false, got 3"),
        (["optcc", "-O", "window=-1"], "optcc: window must be a non-negative integer"),
        (["r2cc_allreduce", "-O", "pieces=true"], "r2cc_allreduce: pieces must be a positive"),
    ],
)
def test_errors_exit_2(args: list[str], message: str) -> None:
    res = _run(*args, "-n", "2", "-g", "2")
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output and "deadlock" not in res.output


def test_unwritable_plot_fails_before_simulating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import resilientcc.sim as sim_pkg

    def no_sim(*a: object, **k: object) -> None:
        raise AssertionError("simulated before checking --plot")

    monkeypatch.setattr(sim_pkg, "simulate", no_sim)
    res = _run("ring", "-n", "2", "-g", "2", "--plot", str(tmp_path / "no" / "x.png"))
    assert res.exit_code == 2, res.output
    assert "--plot: cannot write" in res.output and "no folder" in res.output
    res = _run(str(tmp_path), "-n", "2", "-g", "2")
    assert res.exit_code == 2 and "is a directory" in res.output


def test_builder_options_clash_with_a_topology_file(tmp_path: Path) -> None:
    """-n with --topology used to be ignored silently; now it is an error naming the
    options, while --fail (an edit of the file's cluster) and defaults still work."""
    from resilientcc.topology.io import save_topology

    f = tmp_path / "t.json"
    save_topology(hierarchical(2, 2), f)
    for cmd in (["sim", "ring"], ["bound"], ["synth", "ring", "-o", str(tmp_path / "s.json")]):
        res = runner.invoke(app, [*cmd, "--topology", str(f), "-n", "5", "--nic-bw", "100Gbps"])
        assert res.exit_code == 2, res.output
        assert "--servers, --nic-bw cannot be combined with a topology file" in res.output
        res = runner.invoke(app, [*cmd, "--topology", str(f), "--fail", "0:1", "--size", "1MiB"])
        assert res.exit_code == 0, res.output
