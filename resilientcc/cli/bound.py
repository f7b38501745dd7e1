"""``rcc bound``."""

from __future__ import annotations
