"""Unit conversion for the calculator ("26.2 miles to km"), with pint's unit registry.

Models and people ask for conversions in words; the registry knows the units, plurals,
spellings and the offset temperature scales. It is built on first use (about 0.6 s), not
when the site starts.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["UnitError", "convert"]


class UnitError(ValueError):
    """An unknown unit, or two that measure different things; the message says which."""


@functools.cache
def _registry() -> Any:
    import pint  # first use only: the registry takes about 0.6 s to build

    return pint.UnitRegistry()


def convert(amount: float, unit: str, target: str) -> tuple[float, str, str]:
    """``amount`` of ``unit`` in ``target``: (value, the unit's name, the target's name)."""
    import pint

    registry = _registry()
    try:
        quantity = registry.Quantity(amount, unit.strip())
        converted = quantity.to(target.strip())
    except pint.UndefinedUnitError as exc:
        names = exc.unit_names
        raise UnitError(f"unknown unit {names[0]!r}" if names else str(exc)) from None
    except pint.DimensionalityError:
        raise UnitError(f"cannot convert {unit.strip()} to {target.strip()}") from None
    except (pint.PintError, ValueError, TypeError, AttributeError) as exc:
        raise UnitError(f"cannot read the units: {exc}") from None
    return float(converted.magnitude), f"{quantity.units:~P}", f"{converted.units:~P}"
