import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from resilientcc import __version__
from resilientcc.cli.app import app, main


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


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["report", "--output", "x.md"], "No such option: --output (Possible options: --out)"),
        (["sim"], "Missing argument 'schedule'"),
        (["sim", "ring", "-n", "abc"], "Invalid value for '--servers'"),
        (["sim", "ring", "--size"], "'--size' requires an argument"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_usage_errors_are_one_line_exit_2(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    assert exc.value.code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and says in err, err
    assert "Traceback" not in err and "╭" not in err and out == ""
    assert list(tmp_path.iterdir()) == []


def test_main_runs_commands_and_keeps_their_exit_status(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"resilientcc {__version__}"
    with pytest.raises(SystemExit) as exc:  # a command's own error: its line, status 2
        main(["sim", "nosuchalgo"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "unknown algorithm 'nosuchalgo'" in err
    with pytest.raises(SystemExit) as exc:  # no arguments: the help
        main([])
    assert exc.value.code == 0 and "Usage: rcc" in capsys.readouterr().out


def test_console_script_usage_error_is_one_line():
    """What docs/tutorial-schedules.md quotes for a mistyped option."""
    out = subprocess.run(
        [sys.executable, "-m", "resilientcc", "report", "--output", "x.md"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and out.stdout == ""
    line = "error: No such option: --output (Possible options: --out) (see rcc report --help)"
    assert out.stderr.splitlines() == [line], out.stderr
    page = (Path(__file__).resolve().parents[1] / "docs" / "tutorial-schedules.md").read_text()
    assert f"$ rcc report --output x.md\n{line}\n" in page
