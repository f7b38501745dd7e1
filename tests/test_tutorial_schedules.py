"""Runs the schedule tutorial (docs_src/workflow) in-process, in order, in a scratch
folder, and checks that every output the page quotes is what the commands print."""

from __future__ import annotations

import runpy
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from resilientcc.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = ROOT / "docs_src" / "workflow"
PAGE = ROOT / "docs" / "tutorial-schedules.md"
#: the order the page runs them in (later ones read the files earlier ones write)
ORDER = ("compare", "synth", "change", "errors")


def _commands(stem: str) -> list[str]:
    lines = (SNIPPETS / f"{stem}.sh").read_text(encoding="utf-8").splitlines()
    return [ln for ln in lines if ln.startswith("rcc ")]


def _excerpts(stem: str) -> list[tuple[str, list[str]]]:
    """``(command, quoted lines)`` blocks of an excerpt file (``$ rcc ...`` starts one)."""
    blocks: list[tuple[str, list[str]]] = []
    for ln in (SNIPPETS / f"{stem}.txt").read_text(encoding="utf-8").splitlines():
        if ln.startswith("$ "):
            blocks.append((ln[2:], []))
        else:
            blocks[-1][1].append(ln)
    return blocks


def _shows(quoted: str, output: str) -> bool:
    """A quoted line is a line of the output; one ending in `` ...`` is a line's start."""
    lines = [ln.rstrip() for ln in output.splitlines()]
    if quoted.endswith(" ..."):
        return any(ln.startswith(quoted[:-4]) for ln in lines)
    return quoted.rstrip() in lines


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, str]]:
    import os

    runner = CliRunner()
    out: dict[str, tuple[int, str, str]] = {}
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("tutorial"))
    try:
        for stem in ORDER:
            for line in _commands(stem):
                res = runner.invoke(app, shlex.split(line)[1:])
                out[line] = (res.exit_code, res.stdout, res.stderr)
        assert Path("compare.png").read_bytes()[:4] == b"\x89PNG"
        assert Path("optcc.xml").read_text().lstrip().startswith("<algo")
        assert not Path("x.json").exists()  # the failing commands wrote nothing
    finally:
        os.chdir(cwd)
    return out


def test_page_includes_every_snippet_and_excerpt() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for stem in ORDER:
        assert f'--8<-- "docs_src/workflow/{stem}.sh"' in text
        assert f'--8<-- "docs_src/workflow/{stem}.txt"' in text
    assert '--8<-- "docs_src/workflow/api_example.py"' in text
    assert '--8<-- "docs_src/workflow/api_example.txt"' in text
    assert sorted(p.stem for p in SNIPPETS.glob("*.sh")) == sorted(ORDER)


@pytest.mark.parametrize("stem", ORDER)
def test_commands_succeed_or_fail_cleanly(stem: str, ran: dict[str, tuple[int, str, str]]) -> None:
    for line in _commands(stem):
        code, stdout, stderr = ran[line]
        if stem == "errors":
            assert code == 2, line
            assert stderr.startswith("error: ") and stderr.count("\n") == 1, (line, stderr)
        else:
            assert code == 0, (line, stdout, stderr)


@pytest.mark.parametrize("stem", ORDER)
def test_quoted_outputs_are_the_real_ones(stem: str, ran: dict[str, tuple[int, str, str]]) -> None:
    blocks = _excerpts(stem)
    assert blocks
    for command, quoted in blocks:
        assert command in ran, f"{stem}.txt quotes a command its .sh does not run: {command}"
        _, stdout, stderr = ran[command]
        for line in quoted:
            assert _shows(line, stdout + stderr), f"{command}: not in its output: {line!r}"


def test_api_example(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(SNIPPETS / "api_example.py"), run_name="__main__")
    out = capsys.readouterr().out
    quoted = (SNIPPETS / "api_example.txt").read_text(encoding="utf-8").splitlines()
    assert out.splitlines() == quoted
