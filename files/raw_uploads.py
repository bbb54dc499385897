"""A file sent as the request's whole body, named in its ``Content-Disposition`` header
(``attachment; filename="report.pdf"``, or RFC 6266's ``filename*=UTF-8''...``).

Why besides multipart: daphne serves HTTP through Twisted, which parses every
``multipart/form-data`` POST into memory before the application sees a byte (several
copies of the file: about 250 MiB at the peak for a 20 MB upload). A raw body is
spooled to a temporary file by Twisted and again by Django's ASGI handler, and read here
in chunks into another, so memory stays flat whatever the file's size. The site's own
pages upload this way; the multipart form stays for scripts and for browsers without
JavaScript.

The size limit is the multipart one (:func:`files.uploads.file_max_bytes`): a declared
length over it is refused before a byte is read, a body that runs past it while it is
read is refused there, and nothing of it is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.files.uploadedfile import TemporaryUploadedFile
from django.http import HttpRequest
from django.utils.http import parse_header_parameters
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.errors import ApplicationError
from files.uploads import UploadTooLarge, file_max_bytes

__all__ = ["CHUNK_BYTES", "FORM_TYPES", "filename_of", "is_raw", "raw_file", "require_length"]

CHUNK_BYTES = 64 * 1024
# Bodies Django reads as a form: never taken for a raw file.
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")
# Translated when a refusal is made (gettext_noop only marks them).
NAME_REQUIRED = gettext_noop(
    "Name the file: send it as the request's body with a header "
    "'Content-Disposition: attachment; filename=\"<name>\"', or as multipart/form-data "
    "in the field 'file'."
)

LENGTH_REQUIRED = gettext_noop(
    "Send the file with a Content-Length header: a body of unknown length (chunked) cannot be read."
)


def filename_of(request: HttpRequest) -> str | None:
    """The ``filename`` (or RFC 6266's ``filename*``) of the ``Content-Disposition``
    header, ``None`` without one."""
    header = request.headers.get("Content-Disposition", "")
    if not header:
        return None
    _value, params = parse_header_parameters(header)
    name = params.get("filename*") or params.get("filename")
    return name or None


def require_length(request: HttpRequest) -> None:
    """Refuse a body of unknown length (``Transfer-Encoding: chunked``, no
    ``Content-Length``): Django's WSGI handler, which serves the site's sync views, reads
    none of it, so its file would look empty or missing."""
    if "Transfer-Encoding" in request.headers and not request.META.get("CONTENT_LENGTH"):
        message = _(LENGTH_REQUIRED)
        raise ApplicationError(message, extra={"file": [message]})


def is_raw(request: HttpRequest) -> bool:
    """Whether the body is a file of its own: a ``Content-Disposition`` header on a body
    that is not a form (a JSON body without one is the request's own data)."""
    return request.content_type not in FORM_TYPES and "Content-Disposition" in request.headers


@contextmanager
def raw_file(request: HttpRequest, max_bytes: int | None = None) -> Iterator[TemporaryUploadedFile]:
    """The body as an uploaded file on disk, deleted when the block ends; refused
    (``ApplicationError``: 400 without a name, 413 over the limit) keeping nothing."""
    name = filename_of(request)
    if not name:
        message = _(NAME_REQUIRED)
        raise ApplicationError(message, extra={"file": [message]})
    require_length(request)
    limit = file_max_bytes() if max_bytes is None else max_bytes
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise UploadTooLarge(limit)  # declared too large: nothing is read
    upload = TemporaryUploadedFile(name, request.content_type or "", 0, None)
    try:
        received = 0
        while chunk := request.read(CHUNK_BYTES):
            received += len(chunk)
            if received > limit:  # a body longer than it said it was
                raise UploadTooLarge(limit)
            upload.write(chunk)
        upload.size = received
        upload.seek(0)
        yield upload
    finally:
        upload.close()  # a temporary file: closing it deletes it
