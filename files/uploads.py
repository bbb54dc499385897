"""Uploads refused while they stream, not after: a Django upload handler first in the
request's chain counts the bytes of the files as they arrive and stops reading past the
limit, so a 5 GB upload costs neither memory nor disk.

Django's own handlers come after it: a request over ``FILE_UPLOAD_MAX_MEMORY_SIZE``
streams to a temporary file (``TemporaryFileUploadHandler``), so memory stays flat
whatever the file's size. ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bounds only the form's other
fields in a multipart body, never its files: this handler is what bounds those.

The refusal is an ``ApplicationError`` (``too_large``: the API's 413) raised out of the
parse, so whoever reads ``request.FILES`` meets it, nothing of the file having been kept.
"""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from core.errors import ApplicationError

__all__ = [
    "MULTIPART_SLACK_BYTES",
    "UploadLimit",
    "UploadTooLarge",
    "file_max_bytes",
    "limit",
    "size_words",
    "too_large_message",
]

# A multipart body is its file plus framing (boundaries, part headers, a CSRF field):
# a declared length past the file limit plus this is refused before a byte is read.
MULTIPART_SLACK_BYTES = 1024 * 1024


def file_max_bytes() -> int:
    return int(settings.AGENTSITE_FILE_MAX_BYTES)


def size_words(size: int) -> str:
    """``20 MiB`` for a whole number of MiB, else ``100,000 bytes``."""
    mib = 1024 * 1024
    if size >= mib and size % mib == 0:
        return _("%(size)s MiB") % {"size": size // mib}
    return ngettext("%(size)s byte", "%(size)s bytes", size) % {"size": f"{size:,}"}


def too_large_message(limit: int) -> str:
    return _("The file is too large: the limit is %(limit)s.") % {"limit": size_words(limit)}


class UploadTooLarge(ApplicationError):
    def __init__(self, limit: int) -> None:
        message = too_large_message(limit)
        super().__init__(message, code="too_large", extra={"file": [message]})


class UploadLimit(FileUploadHandler):
    """Passes every chunk on to the next handlers while the request's files add up to at
    most ``limit`` bytes; past it, stops the upload (Django closes the files begun, which
    deletes their temporary copies) and the refusal is raised once the parse ends."""

    def __init__(self, request: HttpRequest | None = None, limit: int | None = None) -> None:
        super().__init__(request)
        self.limit = file_max_bytes() if limit is None else limit
        self.received = 0
        self.refused = False

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length > self.limit + MULTIPART_SLACK_BYTES:
            raise UploadTooLarge(self.limit)  # declared too large: nothing is read
        return None  # the parse goes on as usual

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.limit:
            self.refused = True
            raise StopUpload(connection_reset=True)  # read no more of the body
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler makes the file

    def upload_complete(self) -> None:
        if self.refused:
            raise UploadTooLarge(self.limit)


def limit(request: HttpRequest, max_bytes: int | None = None) -> None:
    """Put :class:`UploadLimit` first among ``request``'s upload handlers; before anything
    reads ``request.POST`` or ``request.FILES`` (Django refuses a change after)."""
    request.upload_handlers = [UploadLimit(request, max_bytes), *request.upload_handlers]
