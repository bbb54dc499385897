"""The text a file holds, as the agent will read it; every refusal a message, never a
traceback."""

from __future__ import annotations

import io

import pytest

from core.errors import ApplicationError
from files import extraction
from files.detection import DOCX_TYPE
from files.extraction import MAX_TEXT_CHARS, extract
from tests.files import builders


def pdf_text(data: bytes) -> extraction.Extracted:
    return extract(io.BytesIO(data), kind="pdf", content_type="application/pdf")


def test_a_pdf_gives_its_text_and_where_each_page_starts():
    extracted = pdf_text(builders.pdf_with_text(["First page here", "Second (page)", "Third"]))
    assert extracted.text == "First page here\n\nSecond (page)\n\nThird"
    assert extracted.pages == [0, 17, 32]
    assert [extracted.text[start:].split("\n")[0] for start in extracted.pages] == [
        "First page here",
        "Second (page)",
        "Third",
    ]
    assert not extracted.truncated


def test_a_password_protected_pdf_is_refused_in_plain_words():
    with pytest.raises(ApplicationError) as refused:
        pdf_text(builders.pdf_encrypted())
    assert refused.value.message == (
        "This PDF is password-protected: remove the password and upload it again."
    )


def test_a_pdf_with_only_an_owner_password_opens():
    assert pdf_text(builders.pdf_owner_password_only()).text == "Open to all"


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.4\nthis is not a PDF at all",
        builders.pdf_with_text(["cut"])[:120],
        b"%PDF-1.7\n" + bytes(range(256)) * 10,
    ],
    ids=builders.case_id,
)
def test_a_broken_pdf_is_refused_in_plain_words(data):
    with pytest.raises(ApplicationError) as refused:
        pdf_text(data)
    assert refused.value.message == "This PDF could not be read: it may be damaged."


def test_a_docx_gives_headings_lists_and_tables_as_markdown():
    extracted = extract(io.BytesIO(builders.docx_document()), kind="docx", content_type=DOCX_TYPE)
    assert extracted.text == (
        "# Quarterly report\n\n"
        "Revenue grew in every region.\n\n"
        "## Details\n\n"
        "- First point\n\n"
        "| Region | Sales |\n| North | 12\\|3 |\n\n"
        "The end."
    )
    assert extracted.pages == []


def test_a_docx_that_would_unpack_to_too_much_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setattr(extraction, "DOCX_MAX_UNPACKED_BYTES", 1024 * 1024)
    bomb = builders.zip_with({"word/document.xml": b"\x00" * (2 * 1024 * 1024)})
    assert len(bomb) < 10_000  # a few KB that would unpack to 2 MiB

    def never(*args, **kwargs):
        raise AssertionError("python-docx opened a zip bomb")

    monkeypatch.setattr(extraction.docx, "Document", never)
    with pytest.raises(ApplicationError, match="unpacks to more than 1 MiB"):
        extract(io.BytesIO(bomb), kind="docx", content_type=DOCX_TYPE)


def test_a_docx_with_too_many_parts_is_refused(monkeypatch):
    monkeypatch.setattr(extraction, "DOCX_MAX_MEMBERS", 3)
    members = {f"word/part{i}.xml": b"<x/>" for i in range(4)}
    with pytest.raises(ApplicationError, match="too many parts"):
        extract(io.BytesIO(builders.zip_with(members)), kind="docx", content_type=DOCX_TYPE)


def test_a_broken_docx_is_refused_in_plain_words():
    broken = builders.zip_with({"word/document.xml": b"<not xml"})
    with pytest.raises(ApplicationError) as refused:
        extract(io.BytesIO(broken), kind="docx", content_type=DOCX_TYPE)
    assert refused.value.message == "This Word document could not be read: it may be damaged."


def test_html_becomes_markdown_without_scripts_or_styles():
    html = (
        "<html><head><style>body{color:red}</style><script>alert('x')</script></head>"
        "<body><h1>Title</h1><p>Some <b>bold</b> text and a <a href='https://e.com'>link</a>."
        "</p><ul><li>one</li><li>two</li></ul><noscript>no</noscript></body></html>"
    )
    text = extract(io.BytesIO(html.encode()), kind="text", content_type="text/html").text
    assert text == "# Title\n\nSome **bold** text and a [link](https://e.com).\n\n- one\n- two"


def test_text_is_kept_as_it_is_without_its_bom():
    data = "\ufeffa,b\n1,2\n".encode()
    assert extract(io.BytesIO(data), kind="text", content_type="text/csv").text == "a,b\n1,2\n"


def test_text_past_the_limit_is_cut_and_says_so(monkeypatch):
    monkeypatch.setattr(extraction, "MAX_TEXT_CHARS", 1000)
    extracted = extract(io.BytesIO(b"x" * 5000), kind="text", content_type="text/plain")
    assert extracted.truncated
    assert extracted.text.startswith("x" * 1000 + "\n\n[Only the first 1,000 characters")
    assert "x" * 1001 not in extracted.text


def test_the_limit_is_two_million_characters():
    assert MAX_TEXT_CHARS == 2_000_000


def test_an_image_has_no_text():
    extracted = extract(io.BytesIO(builders.png()), kind="image", content_type="image/png")
    assert (extracted.text, extracted.pages) == ("", [])
