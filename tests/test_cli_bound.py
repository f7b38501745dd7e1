"""``rcc bound``: table and JSON output, and one-line errors with exit 2 for bad input."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from resilientcc.cli.app import app
from resilientcc.topology import hierarchical, save_topology, topology_to_dict

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, ["bound", *args])


def _json(*args: str) -> dict:
    res = _run(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_default_flagship_table() -> None:
    res = _run()
    assert res.exit_code == 0, res.output
    out = res.stdout
    for key in ("lower bound", "NCCL flat ring", "overhead", "binding:", "method", "units:"):
        assert key in out
    assert "5.201 ms" in out  # NCCL's fault-free ring, 1 GiB at 400 GB/s, p = 32
    assert "can beat" in out  # the fault-free bound sits below NCCL's flat ring


def test_flagship_degraded_json() -> None:
    d = _json("--fail", "0:4")
    for key in (
        "lower_bound_s",
        "fault_free_ring_s",
        "overhead_vs_fault_free_ring",
        "fault_free_lower_bound_s",
        "binding",
        "method",
        "lower_bound_exact",
    ):
        assert key in d
    assert d["method"] == "lp"
    assert Fraction(d["overhead_vs_fault_free_ring_exact"]) == Fraction(1, 31)
    assert Fraction(d["lower_bound_exact"]) == Fraction(2**31, 400 * 10**9)
    assert d["lower_bound_s"] == pytest.approx(5.36870912e-3)
    assert "server 0" in d["binding"] and "200 GB/s" in d["binding"]
    assert d["fault_free_lower_bound_s"] < d["fault_free_ring_s"] < d["lower_bound_s"]
    assert d["lp"]["constraints"] and any(c["dual"] > 0 for c in d["lp"]["constraints"])


def test_latency_bound() -> None:
    """--latency: the straggler's egress window ends a network route (14 µs) before the
    base latency; the table says so; without --latency there is no such entry."""
    d = _json("--fail", "0:4", "--latency")
    lat = d["latency_bound"]
    assert Fraction(lat["exact"]) == Fraction(d["lower_bound_exact"]) + Fraction(224, 10**7)
    assert lat["route_latency_s"] == [pytest.approx(14e-6), pytest.approx(14e-6)]
    assert "server 0" in lat["binding"]
    d0 = _json("--fail", "0:4", "--latency", "--base-latency", "0us")
    assert Fraction(d0["latency_bound"]["exact"]) == Fraction(lat["exact"]) - Fraction(84, 10**7)
    assert "latency_bound" not in _json("--fail", "0:4")
    res = _run("--fail", "0:4", "--latency")
    assert res.exit_code == 0 and "lower bound with latency" in res.stdout
    bad = _run("--latency", "--base-latency", "-1us")
    assert bad.exit_code == 2 and "--base-latency" in bad.output


def test_closed_form_method_and_options() -> None:
    d = _json("--fail", "0:4", "--method", "closed-form")
    assert d["method"] == "closed_form"
    assert Fraction(d["overhead_vs_fault_free_ring_exact"]) == Fraction(1, 31)
    d = _json("--servers", "8", "--fail", "0:x0.5", "--fabric", "switch", "--size", "256MiB")
    assert Fraction(d["lower_bound_in_M_over_B_exact"]) == 2
    d = _json("-n", "2", "-g", "4", "--nics-per-server", "2", "--nic-bw", "100GB/s")
    assert d["ranks"] == 8


def test_topology_file(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    save_topology(hierarchical(2, 2), p)
    d = _json("--topology", str(p), "--fail", "1:1")
    assert d["ranks"] == 4 and d["lower_bound_s"] > 0


def _assert_bad(res) -> None:
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert "Traceback" not in res.output


@pytest.mark.parametrize(
    "args",
    [
        ["--nic-bw", "-5Gbps"],
        ["--nic-bw", "0Gbps"],
        ["--nvlink-bw", "0"],
        ["--fail", "9:1"],
        ["--fail", "0:nic12"],
        ["--fail", "0:banana"],
        ["--size", "1XB"],
        ["--size", "-1GiB"],
        ["--size", "0"],
        ["--method", "simplex"],
        ["--fabric", "torus"],
        ["--servers", "0"],
        ["--topology", "/nonexistent/topo.json"],
    ],
)
def test_bad_input(args: list[str]) -> None:
    _assert_bad(_run(*args))


@pytest.mark.parametrize(
    "args,message",
    [
        (["--servers", "0"], "error: --servers: must be a positive integer, got 0"),
        (["-g", "3", "--nics-per-server", "4"], "error: --nics-per-server: must be between 1"),
        (["-n", "100000"], "error: --servers × --gpus-per-server: 800,000 GPUs"),
    ],
)
def test_builder_errors_name_the_flag(args: list[str], message: str) -> None:
    res = _run(*args)
    _assert_bad(res)
    assert res.stderr.startswith(message)


def test_bad_topology_files(tmp_path: Path) -> None:
    d = topology_to_dict(hierarchical(2, 2))
    dangling = json.loads(json.dumps(d))
    dangling["links"].append({"src": "s0.gpu0", "dst": "nowhere", "capacity": "1"})
    p1 = tmp_path / "dangling.json"
    p1.write_text(json.dumps(dangling))
    res = _run("--topology", str(p1))
    _assert_bad(res)
    assert "dangling" in res.stderr

    cut = json.loads(json.dumps(d))
    cut["links"] = [lk for lk in cut["links"] if "s1.gpu1" not in (lk["src"], lk["dst"])]
    p2 = tmp_path / "cutoff.json"
    p2.write_text(json.dumps(cut))
    res = _run("--topology", str(p2))
    _assert_bad(res)
    assert "cut off" in res.stderr

    p3 = tmp_path / "garbage.json"
    p3.write_text("{not json")
    _assert_bad(_run("--topology", str(p3)))


def test_custom_topology_with_failures_has_no_fault_free_bound(tmp_path: Path) -> None:
    from resilientcc.topology.model import GPU, SWITCH, Link, Node, Topology

    nodes = (Node("a", GPU, rank=0), Node("b", GPU, rank=1), Node("x", SWITCH), Node("y", SWITCH))
    links = tuple(
        Link(s, d, Fraction(10**10)) for s, d in [("a", "x"), ("x", "b"), ("b", "y"), ("y", "a")]
    )
    p = tmp_path / "ring.json"
    save_topology(Topology(nodes, links, failures=("a cable was cut",)), p)
    d = _json("--topology", str(p))
    assert d["fault_free_lower_bound_s"] is None and d["fault_free_binding"].startswith("n/a")
    res = _run("--topology", str(p))
    assert res.exit_code == 0 and "n/a" in res.stdout
    _assert_bad(_run("--topology", str(p), "--method", "closed-form"))


@pytest.mark.parametrize("command", ["bound", "sim"])
def test_json_stdout_is_one_object_in_a_real_process(command: str) -> None:
    """In a real process (not ``CliRunner``) stdout holds the JSON object alone: HiGHS
    writes a banner straight to file descriptor 1 on every solve, which the LP hides."""
    import subprocess
    import sys

    args = [sys.executable, "-m", "resilientcc", command]
    if command == "sim":
        args.append("ring")
    args += ["-n", "2", "-g", "2", "--size", "1MiB", "--fail", "0:1", "--json"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)
    d = json.loads(out.stdout)
    assert d["lower_bound_s"] > 0
    assert "HiGHS" not in out.stdout
