"""Percentiles as every benchmark here prints them (nearest rank)."""

from __future__ import annotations


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]
