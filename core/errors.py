"""The one exception type for failures a user should read (bad input, quota, permissions)."""

from __future__ import annotations


class ApplicationError(Exception):
    """A user-facing failure: ``message`` is safe to show, ``extra`` carries field errors."""

    def __init__(self, message: str, *, code: str = "invalid", extra: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.extra = extra or {}
