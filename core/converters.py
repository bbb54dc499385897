"""The ``<id:...>`` URL converter: a database id, refused (404) when no row can have it.

Django's ``<int:...>`` accepts any run of digits, so ``/c/99999999999999999999/`` reached
views, raw SQL and cache keys with a number no 64-bit column holds (a 500 on SQLite and
PostgreSQL). A converter that raises ``ValueError`` makes the route not match: the
request falls through to a 404 (JSON under ``/api/``) before any view runs.
"""

from __future__ import annotations

from django.urls import register_converter

__all__ = ["DB_ID_MAX", "DatabaseIdConverter", "register"]

DB_ID_MAX = 2**63 - 1  # the largest value of a signed 64-bit column (BigAutoField)


class DatabaseIdConverter:
    regex = "[0-9]+"

    def to_python(self, value: str) -> int:
        number = int(value)  # over 4300 digits: ValueError, so no match either
        if number > DB_ID_MAX:
            raise ValueError(f"{value} is larger than any database id")
        return number

    def to_url(self, value: int) -> str:
        return str(value)


def register() -> None:
    """Make ``<id:name>`` available to every URLconf (called once, from the app's ready())."""
    register_converter(DatabaseIdConverter, "id")
