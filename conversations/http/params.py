"""Whole numbers read from query strings and headers, refused (400) when out of range.

``int()`` accepts any length of digits, and a number past 64 bits reached the database
as an ``OFFSET`` or a comparison it cannot hold (a 500). Every integer the API reads from
a request goes through :func:`whole_number`, with the range its use allows.
"""

from __future__ import annotations

from django.utils.translation import gettext as _

from core.converters import DB_ID_MAX
from core.errors import ApplicationError

__all__ = ["DB_ID_MAX", "whole_number"]


def whole_number(
    raw: str | None,
    *,
    name: str,
    default: int,
    minimum: int = 0,
    maximum: int = DB_ID_MAX,
) -> int:
    """``raw`` as an int in ``[minimum, maximum]``; ``default`` when absent or blank."""
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or not minimum <= value <= maximum:
        message = _("'%(name)s' must be a whole number from %(minimum)s to %(maximum)s.") % {
            "name": name,
            "minimum": minimum,
            "maximum": maximum,
        }
        raise ApplicationError(message, extra={name: [message]})
    return value
