"""The API's JSON request bodies: refused by size before they are read, and refused
(400) when parsed JSON holds what the database cannot store.

- A declared ``Content-Length`` over :func:`body_max_bytes` is a 413 before anything is
  read; Django refuses a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` the same way
  (``RequestDataTooBig``), also a 413. The settings derive both from the message limit.
- ``"\\ud800"`` is valid JSON but not text: a lone UTF-16 surrogate cannot be encoded
  as UTF-8, and the database refused the row (a 500). Such strings are a 400.
- Deep nesting made ``json.loads`` raise ``RecursionError`` (a 500). No field of the
  API nests; anything deeper than :data:`MAX_DEPTH` is a 400.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from agentsite.errors import ApplicationError
from conversations import services

__all__ = ["MAX_DEPTH", "body_max_bytes", "read_json_object"]

# JSON may spell one character as a 12-byte surrogate-pair escape: never refuse a body
# whose message could still be within the character limit, but refuse before parsing
# anything larger.
BODY_BYTES_PER_CHAR = 12
BODY_OVERHEAD_BYTES = 64 * 1024
MAX_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")


def body_max_bytes() -> int:
    return services.message_max_chars() * BODY_BYTES_PER_CHAR + BODY_OVERHEAD_BYTES


def read_json_object(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object; 413 when too large (checked before reading), 400 if bad."""
    limit = body_max_bytes()
    too_large = ApplicationError(
        f"The request body is too large (the limit is {limit:,} bytes).", code="too_large"
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
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApplicationError(f"The request body is not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise ApplicationError(
            "The request body must be a JSON object.", extra={"__all__": ["Expected an object."]}
        )
    _refuse_unstorable(data)
    return data


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON value")


def _too_deep() -> ApplicationError:
    return ApplicationError(f"The request body is nested deeper than {MAX_DEPTH} levels.")


def _refuse_unstorable(data: Any) -> None:
    """Walk the parsed body (without recursion: it may be deep) for lone surrogates."""
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise ApplicationError(
                    "The request body holds a lone UTF-16 surrogate (such as \\ud800), "
                    "which is not text. Send valid Unicode."
                )
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise _too_deep()
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
