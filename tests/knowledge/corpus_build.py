"""The labelled retrieval corpus (``tests/knowledge/corpus/``) as the files a user uploads.

The corpus is kept as text: Markdown, plain text and CSV files are uploaded as they are;
a source named ``<name>.pdf.md``, ``<name>.docx.md`` or ``<name>.html.md`` is Markdown
turned into ``<name>.pdf`` (written object by object here, Helvetica, compressed pages;
``<!-- page -->`` starts a new page), ``<name>.docx`` (python-docx: headings, lists,
tables) or ``<name>.html`` (markdown-it, inside a wiki page's navigation, script and
footer) when the corpus is built, so no binary file is committed.

``questions.json`` labels each question with the documents that answer it (more than one
when the same text exists in two documents, e.g. a release note and its translation) and
a passage: words of the answering passage, matched in a hit's text with whitespace
collapsed.

No Django here: the files are plain bytes (``benchmarks/knowledge_*.py`` and
``tests/knowledge/quality.py`` index them).
"""

from __future__ import annotations

import io
import json
import random
import re
import textwrap
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.files.builders import pdf_document

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
QUESTIONS = CORPUS_DIR / "questions.json"
GENERATED = ("pdf", "docx", "html")
PAGE_BREAK = "<!-- page -->"


@dataclass(frozen=True)
class CorpusFile:
    name: str  # as uploaded, e.g. "travel-and-expenses-policy.pdf"
    data: bytes
    source: str  # the file under corpus/ it comes from


@dataclass(frozen=True)
class Question:
    id: str
    lang: str  # en, zh, ja
    kind: str  # keyword: shares the passage's words; paraphrase: says it otherwise
    question: str
    documents: tuple[str, ...]  # any of them answers it
    passages: tuple[str, ...]  # words of an answering passage (any of them)


# --------------------------------------------------------------------------- sources


def sources() -> list[Path]:
    return sorted(p for p in CORPUS_DIR.iterdir() if p.is_file() and p.name != QUESTIONS.name)


def output_name(source: Path) -> str:
    """``x.pdf.md`` -> ``x.pdf``; anything else keeps its name."""
    stem, _, last = source.name.rpartition(".")
    inner = stem.rpartition(".")[2]
    if last == "md" and inner in GENERATED and "." in stem:
        return stem
    return source.name


def build() -> list[CorpusFile]:
    """Every corpus document as the bytes of the file a user would upload."""
    files = []
    for source in sources():
        name = output_name(source)
        text = source.read_text(encoding="utf-8")
        kind = name.rpartition(".")[2] if name != source.name else ""
        if kind == "pdf":
            data = pdf_from_markdown(text)
        elif kind == "docx":
            data = docx_from_markdown(text)
        elif kind == "html":
            data = html_from_markdown(text, title=name.rpartition(".")[0])
        else:
            data = text.encode("utf-8")
        files.append(CorpusFile(name=name, data=data, source=source.name))
    return files


def write(directory: Path) -> list[Path]:
    """The built corpus written into ``directory`` (e.g. to upload by hand)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for file in build():
        path = directory / file.name
        path.write_bytes(file.data)
        paths.append(path)
    return paths


def questions() -> list[Question]:
    raw = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    return [
        Question(
            id=q["id"],
            lang=q["lang"],
            kind=q["kind"],
            question=q["question"],
            documents=tuple(q["documents"]),
            passages=tuple(q["passages"]),
        )
        for q in raw["questions"]
    ]


def normalized(text: str) -> str:
    """For matching a labelled passage: whitespace collapsed, Markdown emphasis and
    escapes dropped (HTML goes through markdownify, DOCX tables through pipes)."""
    text = text.replace("\\", "").replace("**", "").replace("__", "")
    return " ".join(text.split())


# ----------------------------------------------------------------------- Markdown parts


@dataclass(frozen=True)
class Block:
    kind: str  # heading, paragraph, bullet, number, table, code, page
    text: str = ""
    level: int = 0
    rows: tuple[tuple[str, ...], ...] = ()


INLINE = re.compile(r"\*\*(.+?)\*\*|\*(.+?)\*|`([^`]+)`")


def plain(text: str) -> str:
    """Markdown inline markup dropped (bold, italics, code)."""
    return INLINE.sub(lambda m: m.group(1) or m.group(2) or m.group(3), text)


def blocks(markdown: str) -> Iterator[Block]:
    """The block structure of the corpus's Markdown (what the generators need)."""
    lines = markdown.splitlines()
    i = 0
    paragraph: list[str] = []

    def flush() -> Iterator[Block]:
        if paragraph:
            yield Block("paragraph", " ".join(line.strip() for line in paragraph))
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped == PAGE_BREAK:
            yield from flush()
            yield Block("page")
        elif stripped.startswith("```"):
            yield from flush()
            code = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                code.append(lines[i])
                i += 1
            yield Block("code", "\n".join(code))
        elif heading := re.match(r"^(#{1,6})\s+(.*)$", stripped):
            yield from flush()
            yield Block("heading", heading.group(2), level=len(heading.group(1)))
        elif stripped.startswith("|"):
            yield from flush()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                cells = tuple(c.strip() for c in lines[i].strip().strip("|").split("|"))
                if not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                    rows.append(cells)
                i += 1
            yield Block("table", rows=tuple(rows))
            continue
        elif bullet := re.match(r"^[-*]\s+(\[[ x]\]\s+)?(.*)$", stripped):
            yield from flush()
            yield Block("bullet", bullet.group(2))
        elif number := re.match(r"^\d+\.\s+(.*)$", stripped):
            yield from flush()
            yield Block("number", number.group(1))
        elif not stripped:
            yield from flush()
        else:
            paragraph.append(stripped)
        i += 1
    yield from flush()


# -------------------------------------------------------------------------------- PDF

PAGE_WIDTH, PAGE_HEIGHT, MARGIN = 595, 842, 64  # A4 in points
BODY_SIZE, HEADING_SIZE, LEADING = 10.5, 13, 14
LINE_CHARS = 92  # Helvetica 10.5 pt averages about 5 pt a character
LINES_PER_PAGE = (PAGE_HEIGHT - 2 * MARGIN) // LEADING


def _pdf_text(text: str) -> bytes:
    """A PDF string in WinAnsiEncoding (cp1252: € and typographic quotes included)."""
    raw = text.encode("cp1252", errors="replace")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def _pdf_pages(markdown: str) -> list[list[tuple[str, str]]]:
    """Pages of (font, line): headings bold, paragraphs wrapped, a blank line between."""
    pages: list[list[tuple[str, str]]] = [[]]

    def add(font: str, line: str) -> None:
        if len(pages[-1]) >= LINES_PER_PAGE:
            pages.append([])
        if not (line == "" and not pages[-1]):  # no blank line at a page's top
            pages[-1].append((font, line))

    for block in blocks(markdown):
        if block.kind == "page":
            if pages[-1]:
                pages.append([])
            continue
        if block.kind == "heading":
            add("F1", "")
            add("F2", plain(block.text))
            continue
        if block.kind == "table":
            lines = ["   ".join(row) for row in block.rows]
        elif block.kind in ("bullet", "number"):
            lines = textwrap.wrap("- " + plain(block.text), LINE_CHARS, subsequent_indent="  ")
        elif block.kind == "code":
            lines = block.text.splitlines()
        else:
            lines = textwrap.wrap(plain(block.text), LINE_CHARS)
        if block.kind not in ("bullet", "number"):
            add("F1", "")
        for line in lines:
            add("F1", line)
    return [page for page in pages if page]


def pdf_from_lines(pages: list[list[tuple[str, str]]], *, compress: bool = True) -> bytes:
    """A PDF whose pages show these lines: catalog, page tree, two standard fonts, then
    per page its object and its content stream (compressed unless told), a
    cross-reference table."""
    count = len(pages)
    page_ids = [5 + 2 * i for i in range(count)]
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + " ".join(f"{n} 0 R" for n in page_ids).encode()
        + b"] /Count %d >>" % count,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
    ]
    sizes = {"F1": BODY_SIZE, "F2": HEADING_SIZE}
    for number, lines in zip(page_ids, pages, strict=True):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] "
            b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents %d 0 R >>"
            % (PAGE_WIDTH, PAGE_HEIGHT, number + 1)
        )
        parts = [b"BT %d TL %d %d Td" % (LEADING, MARGIN, PAGE_HEIGHT - MARGIN)]
        font = None
        for line_font, line in lines:
            if line_font != font:
                parts.append(b"/%s %s Tf" % (line_font.encode(), str(sizes[line_font]).encode()))
                font = line_font
            parts.append(_pdf_text(line) + b" Tj T*" if line else b"T*")
        parts.append(b"ET")
        stream = b"\n".join(parts)
        stream = zlib.compress(stream) if compress else stream
        flate = b" /Filter /FlateDecode" if compress else b""
        objects.append(
            b"<< /Length %d%s >>\nstream\n" % (len(stream), flate) + stream + b"\nendstream"
        )
    return pdf_document(objects)


def pdf_from_markdown(markdown: str) -> bytes:
    return pdf_from_lines(_pdf_pages(markdown))


# ------------------------------------------------------------------------------- DOCX


def docx_from_markdown(markdown: str) -> bytes:
    import docx

    document = docx.Document()
    for block in blocks(markdown):
        if block.kind == "heading":
            document.add_heading(plain(block.text), level=min(block.level, 4))
        elif block.kind == "bullet":
            document.add_paragraph(plain(block.text), style="List Bullet")
        elif block.kind == "number":
            document.add_paragraph(plain(block.text), style="List Number")
        elif block.kind == "table":
            columns = max(len(row) for row in block.rows)
            table = document.add_table(rows=len(block.rows), cols=columns)
            table.style = "Table Grid"
            for row, cells in zip(table.rows, block.rows, strict=True):
                for cell, value in zip(row.cells, cells, strict=False):
                    cell.text = plain(value)
        elif block.kind in ("paragraph", "code"):
            document.add_paragraph(plain(block.text))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# ------------------------------------------------------------------------------- HTML

HTML_PAGE = """<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<title>{title} - Larkspur wiki</title>
<style>body {{ font-family: sans-serif; max-width: 48rem; margin: auto; }}</style>
<script>window.analytics = {{ page: "{title}", track: function () {{}} }};</script>
</head>
<body>
<nav><a href="/">Wiki home</a> | <a href="/policies">Policies</a> |
<a href="/engineering">Engineering</a> | <a href="/search">Search</a></nav>
<main>
{body}
</main>
<footer>Larkspur internal wiki. Last edited by the page owner; report mistakes in #wiki.</footer>
</body>
</html>
"""


def html_from_markdown(markdown: str, *, title: str) -> bytes:
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(markdown.replace(PAGE_BREAK, ""))
    lang = "en"
    if re.search(r"[\u3040-\u30ff]", markdown):
        lang = "ja"
    elif re.search(r"[\u4e00-\u9fff]", markdown):
        lang = "zh"
    return HTML_PAGE.format(lang=lang, title=title, body=body).encode("utf-8")


# ------------------------------------------------------------------ text for scale runs


class Babbler:
    """Text in the corpus's words: a first-order Markov chain over its English words,
    and over its Chinese and Japanese characters, so generated passages have the
    vocabulary and term frequencies of team documents (for the scale benchmarks)."""

    def __init__(self, seed: int = 7) -> None:
        self.random = random.Random(seed)
        english: list[str] = []
        cjk: list[str] = []
        for source in sources():
            text = source.read_text(encoding="utf-8")
            if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", text):
                cjk.append(re.sub(r"\s+", "", text))
            else:
                english.append(text)
        self.words = _chain(re.findall(r"[\w€'.,:%-]+", " ".join(english)))
        self.chars = _chain(list("".join(cjk)))

    def english(self, chars: int) -> str:
        return " ".join(self._walk(self.words, chars, 1))

    def cjk(self, chars: int) -> str:
        return "".join(self._walk(self.chars, chars, 0))

    def _walk(self, chain: dict[str, list[str]], chars: int, gap: int) -> Iterable[str]:
        token = self.random.choice(list(chain))
        length = 0
        while length < chars:
            yield token
            length += len(token) + gap
            followers = chain.get(token)
            token = self.random.choice(followers) if followers else self.random.choice(list(chain))

    def paragraphs(self, chars: int, *, cjk: bool = False, size: int = 600) -> str:
        """About ``chars`` characters in paragraphs of about ``size``, with headings."""
        parts = []
        total = 0
        while total < chars:
            if len(parts) % 6 == 0:
                heading = self.cjk(8) if cjk else self.english(30).rstrip(".,:").capitalize()
                parts.append(f"## {heading}")
            paragraph = self.cjk(size // 2) if cjk else self.english(size)
            parts.append(paragraph)
            total += len(paragraph) + 2
        return "\n\n".join(parts)


def _chain(tokens: list[str]) -> dict[str, list[str]]:
    chain: dict[str, list[str]] = {}
    for current, following in zip(tokens, tokens[1:], strict=False):
        chain.setdefault(current, []).append(following)
    return chain


def pdf_of_pages(pages: list[str], *, compress: bool = True) -> bytes:
    """A PDF with one page per text (each wrapped; longer text is cut at the page's end)."""
    laid_out = []
    for text in pages:
        lines: list[tuple[str, str]] = []
        for paragraph in text.split("\n\n"):
            if lines:
                lines.append(("F1", ""))
            if paragraph.startswith("#"):
                lines.append(("F2", paragraph.lstrip("# ")))
            else:
                lines += [("F1", line) for line in textwrap.wrap(paragraph, LINE_CHARS)]
        laid_out.append(lines[:LINES_PER_PAGE])
    return pdf_from_lines(laid_out, compress=compress)
