"""scripts/reproduce_table.py runs end to end on a small case and writes its table."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("resilientcc.sim")
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reproduce_table.py"


def load_script():
    spec = importlib.util.spec_from_file_location("reproduce_table", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_reproduce_small_case(tmp_path, capsys):
    mod = load_script()
    out = tmp_path / "repro"
    args = [
        "--servers",
        "2",
        "--lost",
        "4",
        "--sizes",
        "16MiB",
        "--workers",
        "1",
        "--out",
        str(out),
    ]
    assert mod.main(args) == 0
    md = (out / "table.md").read_text()
    assert "| 2 | 4/8 | 16 MiB |" in md
    rows = json.loads((out / "table.json").read_text())
    (row,) = rows
    assert set(row["times_s"]) == {"ring", "balance", "r2cc_allreduce", "optcc"}
    # every algorithm respects the bound
    for t in row["times_s"].values():
        assert t >= row["bound_s"] * (1 - 1e-9)
    # the latency part of each time is reported; what is left (the same run with zero
    # latencies) still respects the bound, and latencies do cost time here
    assert set(row["latency_s"]) == set(row["times_s"])
    for a, lat in row["latency_s"].items():
        assert row["times_s"][a] - lat >= row["bound_s"] * (1 - 1e-9)
        assert 0 < lat < row["times_s"][a]
    assert "optcc zero-latency/bound" in md
    # each schedule's byte floor: never below the bound (its bytes cross every cut), and
    # no zero-latency run of it is shorter
    assert set(row["floor_s"]) == set(row["times_s"])
    for a, low in row["floor_s"].items():
        assert (
            row["bound_s"] * (1 - 1e-9)
            <= low
            <= (row["times_s"][a] - row["latency_s"][a]) * (1 + 1e-9)
        )
    assert "optcc floor/bound" in md
    # the bound that counts latency: above the LP bound, below every simulated time
    assert "optcc/latency bound" in md
    assert row["bound_s"] < row["latency_bound_s"] <= min(row["times_s"].values())
    assert (out / "overhead.png").exists()
    # the cache makes a rerun free
    cache = json.loads((out / "cache.json").read_text())
    assert len(cache) == 15  # a time, its latency part and the floor per simulation
    assert mod.main(args) == 0
    assert "simulations" in capsys.readouterr().err


def test_headline_marks_the_fastest_and_divides_by_the_right_times():
    """Known answer: ratios to the fault-free ring, the smallest in bold, OptCC over the bound."""
    from resilientcc.report import Row, rows_to_headline

    row = Row(
        servers=4,
        nics_lost=2,
        size_bytes=2**30,
        beta=0.75,
        bound_s=0.004,
        fault_free_ring_s=0.005,
        fault_free_ring_formula_s=0.005,
        fault_free_bound_s=0.004,
        times_s={"ring": 0.010, "balance": 0.006, "r2cc_allreduce": 0.0055, "optcc": 0.0044},
    )
    lines = rows_to_headline([row]).splitlines()
    assert lines[0].count("|") == 10  # 9 columns: no column for the plain ring
    assert lines[2] == (
        "| 4 × 8 GPUs | 2 of 8 | 1 GiB | 4.000 ms | 5.000 ms | 1.200 | 1.100 | **0.880** | 1.100 |"
    )
    slower = Row(**{**row.__dict__, "times_s": {**row.times_s, "optcc": 0.0060}})
    assert "**1.100**" in rows_to_headline([slower])  # R2CC is then the fastest


def _cells(path: Path) -> list[list[str]]:
    lines = path.read_text().splitlines()
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:] if ln.startswith("|")]


def test_docs_headline_agrees_with_the_docs_tables():
    """``headline.md`` (home page) and ``table-nN.md`` (Reproducing) come from the same runs."""
    docs = Path(__file__).resolve().parents[1] / "docs_src" / "reproduce"
    full = {}
    for n in (4, 8, 16):
        for c in _cells(docs / f"table-n{n}.md"):
            # servers, lost, size -> (optcc/ff ring, optcc/bound)
            full[(c[0], c[1].split("/")[0], c[2])] = (c[12], c[16])
    head = _cells(docs / "headline.md")
    assert len(head) == len(full) == 12
    for c in head:
        size = "1024 MiB" if c[2] == "1 GiB" else c[2]
        key = (c[0].split(" ")[0], c[1].split(" ")[0], size)
        assert (c[7].strip("*"), c[8]) == full[key]
    index = (docs.parents[1] / "docs" / "index.md").read_text()
    assert '--8<-- "docs_src/reproduce/headline.md"' in index
