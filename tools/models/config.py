"""Placeholder until its owner fills it in."""

from __future__ import annotations

__all__: list[str] = []
