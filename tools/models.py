"""Models of the tools app."""

from __future__ import annotations
