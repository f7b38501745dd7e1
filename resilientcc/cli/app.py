"""The ``rcc`` command line: bound | synth | sim | verify | report."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

from resilientcc import __version__

app = typer.Typer(
    name="rcc",
    help="resilientcc: AllReduce under NIC failures — lower bounds, schedules, verification, simulation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"resilientcc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """resilientcc command line."""


def _register() -> None:
    # Each command lives in its own module and registers itself on ``app``.
    from resilientcc.cli import bound, report, run, sim, synth, verify  # noqa: F401


_register()


def usage_error_line(error: typer.TyperException) -> str:
    """One line for a usage error: the command, what is wrong, where to read more.

    >>> try:
    ...     app(["report", "--output", "x.md"], prog_name="rcc", standalone_mode=False)
    ... except typer.TyperException as error:
    ...     print(usage_error_line(error))
    error: No such option: --output (Possible options: --out) (see rcc report --help)
    """
    ctx = getattr(error, "ctx", None)
    where = ctx.command_path if ctx is not None else "rcc"
    message = " ".join(error.format_message().split()).rstrip(".")
    return f"error: {message} (see {where} --help)"


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``rcc`` console script (``argv``: the arguments, default ``sys.argv``).

    A usage error (an unknown option or command, a missing argument, a value that is not
    a number) is one line on stderr and exit status 2, like the commands' own errors.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        # ``rcc`` alone shows the help, as ``no_args_is_help`` does without this wrapper
        code = app(args=args or ["--help"], prog_name="rcc", standalone_mode=False)
    except typer.TyperException as error:  # usage errors (typer's ClickException)
        typer.echo(usage_error_line(error), err=True)
        code = getattr(error, "exit_code", 2)
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        code = 1
    sys.exit(code if isinstance(code, int) else 0)
