"""What an uploaded file is, from its bytes: never from its name's extension alone, never
from the Content-Type the client sent (both are the uploader's word).

Binary formats are recognised by their signatures (the ``filetype`` library, then a closer
look where a signature alone says too little: a DOCX is a ZIP holding
``word/document.xml``, not any ZIP). Anything else is text only if all of it decodes as
UTF-8 (a BOM allowed) without NUL bytes; only then does the name's extension pick among
the text types (Markdown, CSV, JSON, HTML, plain text for code and the rest). Everything
else is refused with a message naming what is accepted.
"""

from __future__ import annotations

import codecs
import zipfile
from dataclasses import dataclass
from typing import BinaryIO

import filetype
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from core.errors import ApplicationError

__all__ = ["ACCEPTED", "Detected", "detect", "text_content_type"]

# What is accepted, in a refusal's words (translated when a refusal is made).
ACCEPTED = gettext_noop(
    "text, Markdown, code, CSV, JSON or HTML (UTF-8), PDF, Word (.docx), "
    "or an image (PNG, JPEG, WebP, GIF)"
)
CHUNK = 64 * 1024
HEAD = 8192  # what filetype reads of a file

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ZIP_TYPES = frozenset({"application/zip", DOCX_TYPE})
# The container of password-protected Office files (and of old .doc/.xls/.ppt files).
OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")

# Text types by extension (lower case, without the dot); anything else is text/plain.
TEXT_TYPES = {
    "md": "text/markdown",
    "markdown": "text/markdown",
    "csv": "text/csv",
    "json": "application/json",
    "html": "text/html",
    "htm": "text/html",
}


@dataclass(frozen=True)
class Detected:
    kind: str  # StoredFile.Kind's value: text, pdf, docx, image
    content_type: str


def _refuse(what: str) -> ApplicationError:
    message = _("%(refusal)s Accepted: %(accepted)s.") % {"refusal": what, "accepted": _(ACCEPTED)}
    return ApplicationError(message, extra={"file": [what]})


def text_content_type(name: str) -> str:
    """The type of a text file by its (sanitised) name's extension."""
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem:
        return "text/plain"
    return TEXT_TYPES.get(extension.lower(), "text/plain")


def _strict_image(head: bytes, mime: str) -> bool:
    """filetype matches GIF on three bytes and PNG on four: text may begin so too."""
    if mime == "image/gif":
        return head[:6] in (b"GIF87a", b"GIF89a")
    if mime == "image/png":
        return head[:8] == b"\x89PNG\r\n\x1a\n"
    return True


def _is_docx(stream: BinaryIO) -> bool:
    try:
        with zipfile.ZipFile(stream) as archive:
            return "word/document.xml" in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False


def _contains(stream: BinaryIO, needle: bytes) -> bool:
    tail = b""
    while chunk := stream.read(CHUNK):
        if needle in tail + chunk:
            return True
        tail = chunk[-len(needle) :]
    return False


def _is_utf8_text(stream: BinaryIO) -> bool:
    """All of it decodes as UTF-8 (a leading BOM allowed) and holds no NUL byte; read in
    chunks, so a large file costs no memory."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    try:
        while chunk := stream.read(CHUNK):
            if b"\x00" in chunk:
                return False
            decoder.decode(chunk)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def detect(stream: BinaryIO, name: str) -> Detected:
    """What ``stream`` (seekable, read from the start) holds; ``name`` (sanitised) only
    chooses among text types. Raises ``ApplicationError`` for anything not accepted."""
    stream.seek(0)
    head = stream.read(HEAD)
    if not head:
        empty = _("The file is empty.")
        raise ApplicationError(empty, extra={"file": [empty]})
    guess = filetype.guess(head)
    mime = guess.mime if guess is not None else ""
    try:
        if mime in IMAGE_TYPES and _strict_image(head, mime):
            return Detected("image", mime)
        if mime == "application/pdf":
            return Detected("pdf", "application/pdf")
        if mime in ZIP_TYPES or head.startswith(b"PK\x03\x04"):
            stream.seek(0)
            if _is_docx(stream):
                return Detected("docx", DOCX_TYPE)
            raise _refuse(_("This is a ZIP archive, not a Word document."))
        if head.startswith(OLE2_MAGIC):
            stream.seek(0)
            if _contains(stream, ENCRYPTED_PACKAGE):
                raise _refuse(
                    _(
                        "This document is password-protected: remove the password and "
                        "upload it again."
                    )
                )
            raise _refuse(
                _("This is an old-format Office file (.doc, .xls or .ppt): save it as .docx.")
            )
        stream.seek(0)
        if _is_utf8_text(stream):
            return Detected("text", text_content_type(name))
    finally:
        stream.seek(0)
    if guess is not None:
        kind = f"{guess.extension.upper()} ({guess.mime})"
        raise _refuse(_("This file is %(kind)s, which can't be attached.") % {"kind": kind})
    raise _refuse(_("This file is neither UTF-8 text nor a type that can be attached."))
