"""Registry of schedule generators: ``name -> function(topology, size, **options) -> Schedule``.

Every generator checks its output with the exact executor before returning it.
Modules are imported lazily so that ``rcc bound`` does not pay for them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from resilientcc.errors import InputError
from resilientcc.schedules.ir import Schedule
from resilientcc.topology.model import Topology

__all__ = ["GENERATORS", "generate", "get_generator"]

# name -> (module, function)
GENERATORS: dict[str, tuple[str, str]] = {
    "ring": ("resilientcc.schedules.ring", "ring"),
    "balance": ("resilientcc.schedules.balance", "balance"),
    "hierarchical": ("resilientcc.schedules.hierarchical", "hierarchical"),
    "r2cc_allreduce": ("resilientcc.schedules.r2cc", "r2cc_allreduce"),
    "optcc": ("resilientcc.schedules.optcc", "optcc"),
    "trees": ("resilientcc.schedules.tree_packing", "tree_allreduce"),
}


def get_generator(name: str) -> Callable[..., Schedule]:
    """The generator function called ``name``; InputError lists the known names."""
    key = name.replace("-", "_").lower()
    if key not in GENERATORS:
        raise InputError(f"unknown algorithm {name!r} (known: {', '.join(GENERATORS)})")
    module, func = GENERATORS[key]
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


def generate(name: str, topology: Topology, size: Fraction, **options: Any) -> Schedule:
    """Generate the schedule ``name`` for ``topology`` and message ``size`` bytes."""
    return get_generator(name)(topology, size, **options)
