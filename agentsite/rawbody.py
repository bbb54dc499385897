"""Daphne's HTTP requests without Twisted's parsing of form bodies.

Twisted's ``Request`` parses every URL-encoded or multipart POST body into
``request.args`` before daphne sees it; daphne hands the raw body to the ASGI application
(Django parses it again) and never reads ``args``. The parse builds an
``email.message.EmailMessage`` for the Content-Type header, and the standard library's
header registry creates a new class for it on every call (37 µs here, and one more class
for the garbage collector per message POST); a multipart upload is parsed in memory a
second time. Twisted's own switch turns it off; daphne does not pass it.
"""

from __future__ import annotations

from typing import Any

from daphne import http_protocol


class RawBodyRequest(http_protocol.WebRequest):
    """Daphne's request with ``parsePOSTFormSubmission`` off."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)


def install() -> None:
    """Make daphne's HTTP factory build :class:`RawBodyRequest` (it looks the request
    class up in its module for every connection)."""
    http_protocol.WebRequest = RawBodyRequest
