"""Validation errors in the API's one error shape: ``{"error": message, "fields": {...}}``.

Pydantic's errors (:mod:`conversations.api.schemas`, :mod:`conversations.api.params`) are
worded as the API always worded them: ``'title' must be a string.`` with ``Must be a
string.`` under ``title``, ``Unknown field(s): colour.`` for fields the body may not hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.utils.translation import gettext as _

__all__ = ["validation_error"]

# The sources of a parameter (ninja's first item of an error's location).
SOURCES = frozenset({"body", "query", "path", "header", "cookie", "form", "file"})
WHOLE = "__all__"  # an error of the whole body, not one field


def _field(loc: tuple[Any, ...]) -> str:
    """The field an error's location names: ``("body", "payload", "title")`` is title."""
    parts = list(loc)
    if parts and parts[0] in SOURCES:
        source = parts.pop(0)
        if source == "body" and parts:
            parts.pop(0)  # the view's parameter that holds the whole body
    return ".".join(str(part) for part in parts) or WHOLE


def _choices(expected: str) -> str:
    return expected.replace("'", "")


def _wording(kind: str, name: str, ctx: dict[str, Any], msg: str) -> tuple[str, str]:
    """(the sentence, the message under the field) for an error of type ``kind``."""
    if kind == "missing":
        if name == WHOLE:
            return _("The request body must be a JSON object."), _("Expected an object.")
        return _("'%(name)s' is required.") % {"name": name}, _("Required.")
    if kind in ("string_type", "str_type"):
        return _("'%(name)s' must be a string.") % {"name": name}, _("Must be a string.")
    if kind == "string_too_long":
        return (
            _("'%(name)s' is too long.") % {"name": name},
            _("At most %(n)s characters.") % {"n": ctx.get("max_length")},
        )
    if kind == "string_too_short":
        if ctx.get("min_length") == 1:
            return _("'%(name)s' cannot be empty.") % {"name": name}, _("Required.")
        return (
            _("'%(name)s' is too short.") % {"name": name},
            _("At least %(n)s characters.") % {"n": ctx.get("min_length")},
        )
    if kind in ("bool_type", "bool_parsing"):
        return _("'%(name)s' must be true or false.") % {"name": name}, _("Must be a boolean.")
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return (
            _("'%(name)s' must be a whole number.") % {"name": name},
            _("Must be a whole number."),
        )
    if kind in ("literal_error", "enum"):
        choices = _choices(str(ctx.get("expected", "")))
        return _("'%(name)s' must be %(choices)s.") % {"name": name, "choices": choices}, choices
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return _("'%(name)s' must be an object.") % {"name": name}, _("Expected an object.")
    if "headline" in ctx:  # the schemas' own errors
        return str(ctx["headline"]), msg
    if kind in ("whole_number",):
        return msg, msg
    return f"'{name}': {msg}.", msg


def validation_error(errors: Iterable[dict[str, Any]]) -> tuple[str, dict[str, list[str]]]:
    """The message and the field messages of ninja's validation ``errors``."""
    fields: dict[str, list[str]] = {}
    sentences: list[str] = []
    unknown: list[str] = []
    for error in errors:
        name = _field(tuple(error.get("loc", ())))
        kind = error.get("type", "")
        if kind == "extra_forbidden":
            unknown.append(name)
            fields.setdefault(name, []).append(_("Unknown field."))
            continue
        sentence, message = _wording(kind, name, error.get("ctx") or {}, error.get("msg", ""))
        sentences.append(sentence)
        fields.setdefault(name, []).append(message)
    if unknown:  # what the body may not hold comes first, as it always did
        sentences.insert(
            0, _("Unknown field(s): %(names)s.") % {"names": ", ".join(sorted(unknown))}
        )
    return (sentences[0] if sentences else _("Invalid input.")), fields
