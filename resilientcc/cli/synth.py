"""``rcc synth``."""

from __future__ import annotations
