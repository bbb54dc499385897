"""The API's JSON request bodies: refused by size before they are read, and refused
(400) when parsed JSON holds what the database cannot store.

- A declared ``Content-Length`` over :func:`body_max_bytes` is a 413 before anything is
  read; Django refuses a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` the same way
  (``RequestDataTooBig``), also a 413. The settings derive both from the message limit.
- JSON the database can't store (lone surrogates, nesting deeper than
  :data:`~conversations.transfer.jsoninput.MAX_DEPTH`; no field of the API nests) is a 400
  (:mod:`conversations.transfer.jsoninput`).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from django.utils.translation import gettext as _

from conversations import services
from conversations.transfer.jsoninput import MAX_DEPTH, UnstorableJSON, loads_storable
from core.errors import ApplicationError

__all__ = ["MAX_DEPTH", "body_max_bytes", "read_body", "read_json_object"]

# JSON may spell one character as a 12-byte surrogate-pair escape: never refuse a body
# whose message could still be within the character limit, but refuse before parsing
# anything larger.
BODY_BYTES_PER_CHAR = 12
BODY_OVERHEAD_BYTES = 64 * 1024


def body_max_bytes() -> int:
    return services.message_max_chars() * BODY_BYTES_PER_CHAR + BODY_OVERHEAD_BYTES


def read_body(request: HttpRequest, limit: int) -> bytes:
    """The request's bytes; 413 when over ``limit`` (a declared length before reading)."""
    too_large = ApplicationError(
        _("The request body is too large (the limit is %(limit)s bytes).")
        % {"limit": f"{limit:,}"},
        code="too_large",
    )
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise too_large
    try:
        raw = request.body
    except RequestDataTooBig:
        raise too_large from None
    if len(raw) > limit:
        raise too_large
    return raw


def read_json_object(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object; 413 when too large (checked before reading), 400 if bad."""
    raw = read_body(request, body_max_bytes())
    if not raw.strip():
        return {}
    try:
        data = loads_storable(raw)
    except UnstorableJSON as exc:
        raise ApplicationError(_body_refusal(exc.reason, exc.detail)) from None
    if not isinstance(data, dict):
        raise ApplicationError(
            _("The request body must be a JSON object."),
            extra={"__all__": [_("Expected an object.")]},
        )
    return data


def _body_refusal(reason: str, detail: str) -> str:
    """Why a parsed body cannot be stored, in the language of the request."""
    if reason == "invalid":
        return _("The request body is not valid JSON: %(detail)s.") % {"detail": detail}
    if reason == "too_deep":
        return _("The request body is nested deeper than %(depth)s levels.") % {"depth": MAX_DEPTH}
    if reason == "surrogate":
        return _(
            "The request body holds a lone UTF-16 surrogate (such as \\ud800), "
            "which is not text. Send valid Unicode."
        )
    return _("The request body holds a number too large to store (such as 1e999).")
