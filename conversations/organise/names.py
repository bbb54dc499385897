"""The checks a folder's or a tag's name goes through, naming the request's field."""

from __future__ import annotations

import unicodedata

from django.utils.translation import gettext as _

from core.errors import ApplicationError


def _refusals(what: str) -> tuple[str, str, str]:
    """The three refusals of a ``what`` ("folder" or "tag") name, as whole sentences:
    no name, too long (``%(limit)d``, ``%(name)s``), control characters."""
    if what == "tag":
        return (
            _("A tag needs a name."),
            _("A tag's name is at most %(limit)d characters: “%(name)s…” is longer."),
            _("A tag's name cannot hold control characters."),
        )
    return (
        _("A folder needs a name."),
        _("A folder's name is at most %(limit)d characters: “%(name)s…” is longer."),
        _("A folder's name cannot hold control characters."),
    )


def name_clean(raw: object, *, field: str, what: str, limit: int) -> str:
    """``raw`` trimmed; refused (400 naming ``field``) when empty, longer than ``limit``
    or holding control characters (a NUL is not storable on PostgreSQL)."""
    name = raw.strip() if isinstance(raw, str) else ""
    empty, too_long, control = _refusals(what)
    if not name:
        raise ApplicationError(empty, extra={field: [_("Required.")]})
    if len(name) > limit:
        message = too_long % {"limit": limit, "name": name[:limit]}
        short = _("At most %(limit)d characters.") % {"limit": limit}
        raise ApplicationError(message, extra={field: [short]})
    if any(unicodedata.category(char) == "Cc" for char in name):
        raise ApplicationError(control, extra={field: [control]})
    return name
