"""``rcc sim``."""

from __future__ import annotations
