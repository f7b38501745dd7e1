"""Runs every ``rcc`` line of the bound tutorial's snippets (docs_src/bound) in-process."""

from __future__ import annotations

import json
import runpy
import shlex
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from resilientcc.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = ROOT / "docs_src" / "bound"
runner = CliRunner()


def _commands(name: str) -> list[list[str]]:
    lines = (SNIPPETS / name).read_text().splitlines()
    return [shlex.split(ln)[1:] for ln in lines if ln.startswith("rcc ")]


def _all_snippets() -> list[tuple[str, list[str]]]:
    out = []
    for path in sorted(SNIPPETS.glob("*.sh")):
        out += [(path.name, args) for args in _commands(path.name)]
    return out


def test_tutorial_includes_every_snippet() -> None:
    text = (ROOT / "docs" / "tutorial-bound.md").read_text()
    for path in SNIPPETS.glob("*.sh"):
        assert f'--8<-- "docs_src/bound/{path.name}"' in text
    assert '--8<-- "docs_src/bound/api_example.py"' in text


@pytest.mark.parametrize(
    ("name", "args"), _all_snippets(), ids=lambda x: " ".join(x) if isinstance(x, list) else x
)
def test_snippet_line(name: str, args: list[str]) -> None:
    res = runner.invoke(app, args)
    if name.startswith("errors"):
        assert res.exit_code == 2
        assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
        return
    assert res.exit_code == 0, res.output
    if "--json" in args:
        d = json.loads(res.stdout)
        assert d["lower_bound_s"] > 0 and d["binding"]
    else:
        assert "lower bound" in res.stdout and "binding:" in res.stdout
    if args[:3] == ["bound", "--fail", "0:4"]:
        assert "1/31" in res.stdout  # overhead over NCCL's fault-free ring, p = 32


def test_flagship_snippet_key_numbers() -> None:
    healthy, degraded = _commands("flagship.sh")
    out = runner.invoke(app, degraded).stdout
    assert "5.369 ms" in out and "5.201 ms" in out and "+3.226 %" in out
    assert "the 8 GPUs of server 0 must send M out over 200 GB/s" in out
    out = runner.invoke(app, healthy).stdout
    assert "4.161 ms" in out  # the fault-free bound, below NCCL's ring


def test_api_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(SNIPPETS / "api_example.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "overhead         1/31" in out
    assert Fraction(1, 31)  # the script asserts the exact value itself


def test_latency_snippet_numbers() -> None:
    """The numbers the tutorial quotes for ``--latency``: 1.342 ms → 1.365 ms (base 8.4
    µs + a 14 µs network route), and without the base 14 µs over the LP bound."""
    table, as_json = _commands("latency.sh")
    out = runner.invoke(app, table).stdout
    assert "1.342 ms" in out and "1.365 ms" in out and "route latency 14 us" in out
    d = json.loads(runner.invoke(app, as_json).stdout)
    lat = d["latency_bound"]
    assert Fraction(lat["exact"]) - Fraction(d["lower_bound_exact"]) == Fraction(14, 10**6)
    assert lat["base_latency_s"] == 0
