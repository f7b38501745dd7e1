"""``rcc verify``."""

from __future__ import annotations
