"""The rcc command line (typer)."""
