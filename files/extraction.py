"""The text of a stored file, for the agent to read: PDF (pypdf, with where each page
starts), Word (python-docx: headings as Markdown ``#``, tables as rows), HTML (Markdown by
markdownify, scripts and styles dropped) and text as it is.

Text is kept up to :data:`MAX_TEXT_CHARS` characters, and a note at its end says when
more was left out, so the agent knows it did not see all of it. A file the libraries
cannot read is refused with a message a person can act on, never a traceback: a
password-protected PDF, a broken one, a DOCX that would unpack to more than
:data:`DOCX_MAX_UNPACKED_BYTES` (a zip bomb: checked from the archive's directory before
python-docx reads a byte of it).
"""

from __future__ import annotations

import codecs
import logging
import re
import zipfile
from dataclasses import dataclass, field
from typing import BinaryIO

import docx
from bs4 import BeautifulSoup
from django.utils.translation import gettext as _
from docx.table import Table
from markdownify import MarkdownConverter
from pypdf import PasswordType, PdfReader

from core.errors import ApplicationError

__all__ = [
    "DOCX_MAX_MEMBERS",
    "DOCX_MAX_UNPACKED_BYTES",
    "MAX_TEXT_CHARS",
    "Extracted",
    "extract",
]

logger = logging.getLogger(__name__)

MAX_TEXT_CHARS = 2_000_000
DOCX_MAX_UNPACKED_BYTES = 100 * 1024 * 1024  # python-docx holds every part in memory
DOCX_MAX_MEMBERS = 5_000
CHUNK = 64 * 1024
PAGE_SEPARATOR = "\n\n"
HTML_DROPPED = ("script", "style", "noscript", "template", "iframe", "object", "embed")


@dataclass
class Extracted:
    text: str = ""
    pages: list[int] = field(default_factory=list)  # PDF: where each page starts in text
    truncated: bool = False


def _refuse(message: str) -> ApplicationError:
    return ApplicationError(message, extra={"file": [message]})


def _truncation_note() -> str:
    return (
        f"\n\n[Only the first {MAX_TEXT_CHARS:,} characters of this file's text are kept; "
        "the rest was left out.]"
    )


def _capped(text: str, truncated: bool = False) -> Extracted:
    if len(text) > MAX_TEXT_CHARS:
        text, truncated = text[:MAX_TEXT_CHARS], True
    return Extracted(text=text + (_truncation_note() if truncated else ""), truncated=truncated)


def _read_text(stream: BinaryIO, limit: int = MAX_TEXT_CHARS) -> tuple[str, bool]:
    """Up to ``limit`` characters of UTF-8 text (the BOM dropped), and whether there was
    more; read in chunks, so the rest of a large file is never held."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    parts: list[str] = []
    kept = 0
    stream.seek(0)
    while chunk := stream.read(CHUNK):
        piece = decoder.decode(chunk)
        parts.append(piece)
        kept += len(piece)
        if kept > limit:
            return "".join(parts)[:limit], True
    parts.append(decoder.decode(b"", final=True))
    text = "".join(parts)
    return text[:limit], len(text) > limit


# ------------------------------------------------------------------------------ HTML


def _html_to_markdown(html: str) -> str:
    soup = BeautifulSoup(html, "html.parser")
    for element in soup(HTML_DROPPED):
        element.decompose()
    markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    return re.sub(r"\n{3,}", "\n\n", markdown).strip()


# ------------------------------------------------------------------------------- PDF


def _pdf(stream: BinaryIO) -> Extracted:
    stream.seek(0)
    try:
        reader = PdfReader(stream)
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise _refuse(
                _("This PDF is password-protected: remove the password and upload it again.")
            )
        pages: list[int] = []
        parts: list[str] = []
        length = 0
        truncated = False
        for page in reader.pages:
            if length >= MAX_TEXT_CHARS:
                truncated = True  # pages left unread
                break
            if parts:
                parts.append(PAGE_SEPARATOR)
                length += len(PAGE_SEPARATOR)
            pages.append(length)
            text = (page.extract_text() or "").strip()
            parts.append(text)
            length += len(text)
    except ApplicationError:
        raise
    except Exception as exc:  # pypdf raises many kinds on a broken file
        logger.info("unreadable PDF: %r", exc)
        raise _refuse(_("This PDF could not be read: it may be damaged.")) from None
    extracted = _capped("".join(parts), truncated)
    extracted.pages = [offset for offset in pages if offset <= MAX_TEXT_CHARS]
    return extracted


# ------------------------------------------------------------------------------ DOCX


def _check_archive(stream: BinaryIO) -> None:
    """Refuse a DOCX whose members would unpack to too much (a zip bomb), are too many, or
    are encrypted, from the archive's directory alone. zipfile never inflates a member
    past its declared size, so the declared sizes bound what python-docx can read."""
    stream.seek(0)
    try:
        with zipfile.ZipFile(stream) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise _refuse(_("This Word document could not be read: it may be damaged.")) from None
    if len(members) > DOCX_MAX_MEMBERS:
        raise _refuse(
            _("This Word document has too many parts (over %(count)s).")
            % {"count": f"{DOCX_MAX_MEMBERS:,}"}
        )
    if any(member.flag_bits & 0x1 for member in members):
        raise _refuse(
            _("This Word document is password-protected: remove the password and upload it again.")
        )
    unpacked = sum(member.file_size for member in members)
    if unpacked > DOCX_MAX_UNPACKED_BYTES:
        limit = DOCX_MAX_UNPACKED_BYTES // (1024 * 1024)
        raise _refuse(
            _("This Word document unpacks to more than %(limit)s MiB, too much to read.")
            % {"limit": limit}
        )


def _heading_level(style_name: str) -> int:
    if style_name == "Title":
        return 1
    match = re.fullmatch(r"Heading (\d)", style_name)
    return int(match.group(1)) if match else 0


def _cell_text(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _docx(stream: BinaryIO) -> Extracted:
    _check_archive(stream)
    stream.seek(0)
    try:
        document = docx.Document(stream)
        blocks: list[str] = []
        length = 0
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                rows = [
                    "| " + " | ".join(_cell_text(cell.text) for cell in row.cells) + " |"
                    for row in block.rows
                ]
                text = "\n".join(rows)
            else:
                text = block.text.strip()
                style = block.style.name if block.style is not None else ""
                level = _heading_level(style or "")
                if text and level:
                    text = "#" * min(level, 6) + " " + text
                elif text and (style or "").startswith("List"):
                    text = "- " + text
            if text:
                blocks.append(text)
                length += len(text) + 2
            if length > MAX_TEXT_CHARS:
                break
    except Exception as exc:  # python-docx and lxml raise many kinds on a broken file
        logger.info("unreadable DOCX: %r", exc)
        raise _refuse(_("This Word document could not be read: it may be damaged.")) from None
    return _capped("\n\n".join(blocks))


# ----------------------------------------------------------------------------- entry


def extract(stream: BinaryIO, *, kind: str, content_type: str) -> Extracted:
    """The text of a file :func:`files.detection.detect` accepted as ``kind``."""
    if kind == "image":
        return Extracted()
    if kind == "pdf":
        return _pdf(stream)
    if kind == "docx":
        return _docx(stream)
    text, truncated = _read_text(stream)
    if content_type == "text/html":
        try:
            text = _html_to_markdown(text)
        except Exception as exc:  # html.parser is lenient; a recursion limit is not
            logger.info("unreadable HTML: %r", exc)
            raise _refuse(_("This HTML file could not be read.")) from None
    return _capped(text, truncated)
