"""The ``rcc`` command line: bound | synth | sim | verify | report."""

from __future__ import annotations

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
    from resilientcc.cli import bound, report, sim, synth, verify  # noqa: F401


_register()


def main() -> None:
    """Entry point of the ``rcc`` console script."""
    app()
