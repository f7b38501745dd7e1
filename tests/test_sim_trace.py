"""A simulation's timeline as CSV or a Chrome trace (rcc sim --trace)."""

from __future__ import annotations

import csv
import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from resilientcc.cli.app import app
from resilientcc.errors import InputError
from resilientcc.schedules.generators import generate
from resilientcc.sim import simulate, write_trace
from resilientcc.sim.plot import KINDS, transfer_kinds
from resilientcc.topology import fail_nics, hierarchical

TOPO = fail_nics(hierarchical(2, 4), 0, 1)


@pytest.fixture(scope="module")
def run():  # type: ignore[no-untyped-def]
    sched = generate("optcc", TOPO, Fraction(2**22))
    return sched, simulate(sched, TOPO)


def test_csv_is_the_result_row_for_row(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sched, res = run
    assert write_trace(res, sched, TOPO, tmp_path / "t.csv") == "csv"
    with open(tmp_path / "t.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == res.num_transfers
    ops = {t.id: t.op for t in sched.transfers}
    kinds = transfer_kinds(res, sched, TOPO)
    for i, row in enumerate(rows):
        assert int(row["id"]) == int(res.transfer_ids[i])
        assert (int(row["src"]), int(row["dst"])) == (int(res.src[i]), int(res.dst[i]))
        assert row["op"] == ops[int(row["id"])]
        assert row["kind"] == KINDS[int(kinds[i])]
        # full precision: the floats read back exactly
        assert float(row["start_s"]) == float(res.start_s[i])
        assert float(row["tx_end_s"]) == float(res.tx_end_s[i])
        assert float(row["end_s"]) == float(res.end_s[i])
        assert float(row["bytes"]) == float(res.nbytes[i])
    assert max(float(r["end_s"]) for r in rows) <= res.time_s


def test_chrome_trace_rows_by_server_and_rank(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sched, res = run
    assert write_trace(res, sched, TOPO, tmp_path / "t.json") == "chrome"
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["otherData"]["time_s"] == res.time_s
    events = data["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == res.num_transfers
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {0: "server 0", 1: "server 1"}
    threads = {e["tid"] for e in events if e.get("name") == "thread_name"}
    assert threads == set(res.src.tolist())
    ts = np.array([e["ts"] for e in spans])
    dur = np.array([e["dur"] for e in spans])
    assert np.allclose(ts, res.start_s * 1e6, atol=1e-4)
    assert np.allclose(dur, (res.tx_end_s - res.start_s) * 1e6, atol=2e-4)
    assert all(e["pid"] == e["tid"] // 4 for e in spans)  # a rank's row under its server
    assert {e["cat"] for e in spans} <= set(KINDS)


def test_bad_paths_and_mismatched_results(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sched, res = run
    with pytest.raises(InputError, match=r"must end in \.csv or \.json"):
        write_trace(res, sched, TOPO, tmp_path / "t.txt")
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        write_trace(res, sched, TOPO, tmp_path / "d.csv")
    (tmp_path / "d.csv").rmdir()
    with pytest.raises(InputError, match="no folder"):
        write_trace(res, sched, TOPO, tmp_path / "no" / "t.csv")
    half = dataclasses.replace(sched, transfers=sched.transfers[: len(sched.transfers) // 2])
    with pytest.raises(InputError, match="not a simulation of this schedule"):
        write_trace(res, half, TOPO, tmp_path / "t.csv")
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_cli_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    args = ["sim", "ring", "-n", "2", "-g", "2", "--size", "1MiB"]
    res = runner.invoke(app, [*args, "--trace", "r.csv"])
    assert res.exit_code == 0, res.output
    assert "trace -> r.csv" in res.stdout
    assert len(Path("r.csv").read_text().splitlines()) == 1 + 2 * 3 * 2 * 4  # header + rows
    res = runner.invoke(app, [*args, "--trace", "r.txt"])
    assert res.exit_code == 2 and "must end in .csv or .json" in res.output
    res = runner.invoke(app, ["sim", "ring,balance", "-n", "2", "-g", "2", "--trace", "x.csv"])
    assert res.exit_code == 2 and "one run's timeline" in res.output
    assert not Path("x.csv").exists()
