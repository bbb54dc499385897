"""What a file is comes from its bytes: signatures for the binary kinds (a DOCX checked
inside its ZIP), UTF-8 without NUL bytes for text, the name only choosing a text type."""

from __future__ import annotations

import io

import pytest

from core.errors import ApplicationError
from files.detection import DOCX_TYPE, detect, text_content_type
from tests.files import builders


def kind_of(data: bytes, name: str = "upload") -> tuple[str, str]:
    detected = detect(io.BytesIO(data), name)
    return detected.kind, detected.content_type


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (builders.png(), ("image", "image/png")),
        (builders.jpeg(), ("image", "image/jpeg")),
        (builders.gif(), ("image", "image/gif")),
        (builders.webp(), ("image", "image/webp")),
        (builders.pdf_with_text(["x"]), ("pdf", "application/pdf")),
        (builders.docx_document(), ("docx", DOCX_TYPE)),
    ],
    ids=builders.case_id,
)
def test_binary_kinds_come_from_the_content_whatever_the_name(data, expected):
    assert kind_of(data, "misleading.txt") == expected
    assert kind_of(data, "no-extension") == expected


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("notes.txt", "text/plain"),
        ("README.md", "text/markdown"),
        ("README.MARKDOWN", "text/markdown"),
        ("table.csv", "text/csv"),
        ("data.json", "application/json"),
        ("page.html", "text/html"),
        ("page.htm", "text/html"),
        ("main.py", "text/plain"),
        ("app.ts", "text/plain"),
        ("Makefile", "text/plain"),
        (".md", "text/plain"),  # a hidden file's name, not an extension
    ],
)
def test_text_types_come_from_the_extension(name, content_type):
    assert kind_of("héllo, wörld\n".encode(), name) == ("text", content_type)
    assert text_content_type(name) == content_type


def test_text_may_start_with_a_bom_and_be_large():
    data = b"\xef\xbb\xbf" + "ligne é\n".encode() * 200_000  # chunks split characters
    assert kind_of(data, "big.txt") == ("text", "text/plain")


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (builders.elf(), "ELF"),
        (b"text\x00with a NUL", "neither UTF-8 text"),
        ("Latin-1 café".encode("latin-1"), "neither UTF-8 text"),
        (bytes(range(256)) * 4, "neither UTF-8 text"),
        (builders.zip_with({"a.txt": b"hi"}), "ZIP archive, not a Word document"),
        (builders.ole2_encrypted_package(), "password-protected"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "old-format Office file"),
    ],
    ids=builders.case_id,
)
def test_anything_else_is_refused_saying_what_is_accepted(data, says):
    with pytest.raises(ApplicationError) as refused:
        detect(io.BytesIO(data), "harmless.txt")
    assert says in refused.value.message
    assert "Accepted: text, Markdown, code, CSV, JSON or HTML" in refused.value.message
    assert refused.value.code == "invalid"  # a 400
    assert refused.value.extra["file"]


def test_an_empty_file_is_refused():
    with pytest.raises(ApplicationError, match="empty"):
        detect(io.BytesIO(b""), "empty.txt")


def test_text_that_begins_like_a_signature_is_still_text():
    """filetype calls anything starting "GIF" a GIF: an image needs its whole signature."""
    assert kind_of(b"GIF is a format from 1987.", "notes.md") == ("text", "text/markdown")
    assert kind_of(b"RIFF notes: not WebP", "notes.txt") == ("text", "text/plain")


def test_detection_leaves_the_stream_at_its_start():
    stream = io.BytesIO(builders.png())
    detect(stream, "a.png")
    assert stream.tell() == 0
