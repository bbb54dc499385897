"""The checks a folder's or a tag's name goes through, naming the request's field."""

from __future__ import annotations

import unicodedata

from core.errors import ApplicationError


def name_clean(raw: object, *, field: str, what: str, limit: int) -> str:
    """``raw`` trimmed; refused (400 naming ``field``) when empty, longer than ``limit``
    or holding control characters (a NUL is not storable on PostgreSQL)."""
    name = raw.strip() if isinstance(raw, str) else ""
    if not name:
        raise ApplicationError(f"A {what} needs a name.", extra={field: ["Required."]})
    if len(name) > limit:
        message = f"A {what}'s name is at most {limit} characters: “{name[:limit]}…” is longer."
        raise ApplicationError(message, extra={field: [f"At most {limit} characters."]})
    if any(unicodedata.category(char) == "Cc" for char in name):
        message = f"A {what}'s name cannot hold control characters."
        raise ApplicationError(message, extra={field: [message]})
    return name
