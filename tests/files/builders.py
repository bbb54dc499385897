"""Small real files of each accepted kind, made here rather than downloaded: a PDF with
text written object by object (the structure every reader parses: objects, a
cross-reference table with their offsets, a trailer), Word documents by python-docx,
images by their formats' own layout (PNG chunks with CRCs, a GIF, a WebP RIFF header)."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import docx
from pypdf import PdfWriter


def _pdf_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_with_text(pages: list[str]) -> bytes:
    """A PDF whose pages show ``pages`` (Helvetica, one line each)."""
    count = len(pages)
    # 1 catalog, 2 page tree, 3 font, then per page: the page and its content stream.
    page_ids = [4 + 2 * i for i in range(count)]
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{n} 0 R' for n in page_ids)}] "
        f"/Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for number, text in zip(page_ids, pages, strict=True):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {number + 1} 0 R >>".encode()
        )
        stream = f"BT /F1 12 Tf 72 720 Td ({_pdf_string(text)}) Tj ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return pdf_document(objects)


def pdf_document(objects: list[bytes]) -> bytes:
    """A PDF file of these objects (numbered from 1, the first the catalog), with its
    cross-reference table, as a PDF writer lays it out."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def pdf_encrypted(password: str = "secret") -> bytes:
    """A one-page PDF that opens only with ``password`` (AES-128)."""
    writer = PdfWriter()
    writer.add_blank_page(width=612, height=792)
    writer.encrypt(user_password=password, owner_password=password, algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def pdf_owner_password_only() -> bytes:
    """Encrypted with an empty user password (printing restricted, say): anyone opens it."""
    writer = PdfWriter(clone_from=io.BytesIO(pdf_with_text(["Open to all"])))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_document() -> bytes:
    document = docx.Document()
    document.add_heading("Quarterly report", level=1)
    document.add_paragraph("Revenue grew in every region.")
    document.add_heading("Details", level=2)
    document.add_paragraph("First point", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for row, values in zip(table.rows, (("Region", "Sales"), ("North", "12|3")), strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_paragraph("The end.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_with(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def ole2_encrypted_package() -> bytes:
    """What a password-protected .docx is on disk: not a ZIP but an OLE2 compound file
    whose directory names an ``EncryptedPackage`` stream (the header and one directory
    sector of that layout, enough for the signature and the stream's name)."""
    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 16 + struct.pack("<HH", 0x3E, 3)
    header = header.ljust(512, b"\x00")
    entries = b""
    for name in ("Root Entry", "EncryptionInfo", "EncryptedPackage"):
        encoded = (name + "\x00").encode("utf-16-le")
        entries += (encoded.ljust(64, b"\x00") + struct.pack("<H", len(encoded))).ljust(
            128, b"\x00"
        )
    return header + entries.ljust(512, b"\x00")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(extra: int = 0) -> bytes:
    """A 1x1 PNG; ``extra`` bytes of an ancillary chunk make it as large as wanted."""
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    body = _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
    if extra:
        body += _png_chunk(b"tEXt", b"c\x00" + b"x" * extra)
    return b"\x89PNG\r\n\x1a\n" + body + _png_chunk(b"IEND", b"")


def gif() -> bytes:
    return (
        b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00"
        b"!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
    )


def jpeg() -> bytes:
    """The start of a baseline JPEG (SOI, JFIF APP0), then EOI."""
    app0 = b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    return b"\xff\xd8\xff\xe0" + struct.pack(">H", len(app0) + 2) + app0 + b"\xff\xd9"


def webp() -> bytes:
    """A lossless 1x1 WebP (RIFF container, VP8L chunk)."""
    vp8l = b"\x2f\x00\x00\x00\x00\x07\x10\x11\x11\x88\x88\xfe\x07\x00"
    chunk = b"VP8L" + struct.pack("<I", len(vp8l)) + vp8l
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def elf() -> bytes:
    """The start of a 64-bit Linux executable."""
    return b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + b"\x02\x00\x3e\x00" + b"\x00" * 200


def case_id(value: object) -> str | None:
    """Test ids without the bytes (some files differ per run: encryption salts, ZIP
    timestamps), so every pytest-xdist worker collects the same tests."""
    return "bytes" if isinstance(value, bytes) else None
