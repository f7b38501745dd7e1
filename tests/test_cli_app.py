import subprocess
import sys

from typer.testing import CliRunner

from resilientcc import __version__
from resilientcc.cli.app import app


def test_python_dash_m_runs_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "resilientcc", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"resilientcc {__version__}"


def test_help_lists_every_command():
    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in ("bound", "synth", "sim", "verify", "report"):
        assert cmd in res.output


def test_unknown_command_is_a_usage_error():
    res = CliRunner().invoke(app, ["frobnicate"])
    assert res.exit_code == 2


def test_help_text_is_reflowed_not_cut_at_the_docstring_lines():
    """A docstring's paragraphs are wrapped to the terminal, not at the source's line
    breaks: on a wide terminal a sentence that spans two source lines is on one line."""
    res = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "200"}, color=False)
    assert res.exit_code == 0
    flat = [line.strip() for line in res.output.splitlines()]
    # "... r2cc_allreduce and" / "optcc, ..." are two lines of the docstring
    assert any("r2cc_allreduce and optcc" in line for line in flat), res.output
