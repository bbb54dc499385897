"""JSON from outside (an API body, an imported file) that the database can store.

``"\\ud800"`` is valid JSON but not text: a lone UTF-16 surrogate cannot be encoded as
UTF-8 and the database refuses the row. Deep nesting makes ``json.loads`` raise
``RecursionError``; ``1e999`` reads as infinity, which no JSON column holds. All are input
errors, not server errors; callers say so in their own words, by
:attr:`UnstorableJSON.reason`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

__all__ = ["MAX_DEPTH", "UnstorableJSON", "loads_storable"]

MAX_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")

Reason = Literal["invalid", "too_deep", "surrogate", "number"]


class UnstorableJSON(ValueError):
    """Why the bytes are not storable JSON; ``detail`` is the parser's message."""

    def __init__(self, reason: Reason, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason
        self.detail = detail


def loads_storable(raw: bytes | str) -> Any:
    """Parse ``raw``; raise :class:`UnstorableJSON` for anything the database can't store
    (NaN and Infinity included: they are not JSON)."""
    try:
        data = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite)
    except RecursionError:
        raise UnstorableJSON("too_deep") from None
    except _NotFinite:
        raise UnstorableJSON("number") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnstorableJSON("invalid", str(exc)) from None
    _walk(data)
    return data


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON value")


class _NotFinite(ValueError):
    """A JSON number past a float's range (``1e999``): Python reads it as infinity, which
    JSON cannot hold, so no column can store it."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def _walk(data: Any) -> None:
    """Look for lone surrogates and deep nesting without recursion (it may be deep)."""
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise UnstorableJSON("surrogate")
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise UnstorableJSON("too_deep")
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
