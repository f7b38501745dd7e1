"""Every docstring example in the package runs and prints what it shows.

The modules are found by scanning the sources for ``>>>``, so an example added to any
module is run here without being listed, and one that goes stale fails.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "resilientcc"


def _modules_with_examples() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append(".".join(parts))
    return out


MODULES = _modules_with_examples()


def test_the_scan_finds_the_known_modules() -> None:
    # a broken scan (wrong root, wrong marker) would otherwise pass with nothing to run
    assert len(MODULES) >= 30
    for name in ("resilientcc.units", "resilientcc.bounds.lp", "resilientcc.verify"):
        assert name in MODULES


@pytest.mark.parametrize("module", MODULES)
def test_doctests(module: str) -> None:
    res = doctest.testmod(importlib.import_module(module))
    assert res.attempted > 0, f"{module}: '>>>' in the source but no example collected"
    assert res.failed == 0
