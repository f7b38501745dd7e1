"""``rcc report``."""

from __future__ import annotations
