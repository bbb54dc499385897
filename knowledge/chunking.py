"""Splitting a document's text into passages to index: each under the heading it sits in
and on the page it starts on, neighbours overlapping so a sentence cut at a boundary is
still whole in one of them.

The text is what :mod:`files.extraction` made: Markdown headings (``#``) for Word, HTML and
Markdown files, blocks separated by blank lines, and for a PDF the offsets where its pages
start. A chunk never spans two sections or two pages (its heading and page stay true);
a block longer than a chunk is cut in windows, at a space or sentence end when there is
one (text without spaces, such as Chinese, is cut where the window ends).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["Piece", "split"]

HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
BLOCK_BREAK = re.compile(r"\n\s*\n")
HEADING_SEPARATOR = " › "
HEADING_MAX_CHARS = 500  # Chunk.heading's column
# Where a window may end, best first: a paragraph or line, a sentence, a space.
BREAKS = ("\n", "。", ". ", "! ", "? ", "！", "？", "; ", " ")


@dataclass(frozen=True)
class Piece:
    text: str
    heading: str  # the trail of headings above it, "Guide › Setup"; "" before any
    page: int | None  # 1-based, for texts with pages


@dataclass
class _Block:
    start: int
    text: str


def _blocks(text: str) -> Iterator[_Block]:
    position = 0
    for match in BLOCK_BREAK.finditer(text):
        yield _Block(position, text[position : match.start()])
        position = match.end()
    yield _Block(position, text[position:])


def _cut(text: str, size: int) -> int:
    """Where to end a window of at most ``size`` characters: the last good break in its
    second half, else ``size``."""
    if len(text) <= size:
        return len(text)
    window = text[:size]
    for mark in BREAKS:
        at = window.rfind(mark, size // 2)
        if at != -1:
            return at + len(mark)
    return size


def _windows(text: str, size: int, overlap: int) -> Iterator[str]:
    start = 0
    while start < len(text):
        end = start + _cut(text[start:], size)
        yield text[start:end].strip()
        if end >= len(text):
            return
        start = max(end - overlap, start + 1)
        # Start the next window at a word, not in the middle of one (when there are words).
        space = text.find(" ", start, end)
        if space != -1:
            start = space + 1


def _tail(text: str, overlap: int) -> str:
    """The last ``overlap`` characters of ``text``, from a word's start when there are words."""
    if overlap <= 0 or len(text) <= overlap:
        return text if overlap > 0 else ""
    tail = text[-overlap:]
    space = tail.find(" ")
    return tail[space + 1 :] if 0 <= space < len(tail) // 2 else tail


def split(
    text: str, *, pages: Sequence[int] = (), size: int = 1200, overlap: int = 200
) -> list[Piece]:
    """The passages of ``text``: at most about ``size`` characters each (a heading trail
    is kept beside the text, not in it), consecutive ones in a section sharing up to
    ``overlap`` characters."""
    overlap = max(0, min(overlap, size // 2))
    trail: list[tuple[int, str]] = []  # (level, title) of the headings above
    pieces: list[Piece] = []
    parts: list[str] = []
    section: tuple[str, int | None] = ("", None)

    def flush() -> None:
        body = "\n\n".join(parts).strip()
        if body:
            pieces.append(Piece(body, *section))
        parts.clear()

    for block in _blocks(text):
        body = block.text.strip()
        if not body:
            continue
        heading = HEADING.match(body) if "\n" not in body else None
        if heading:
            level, title = len(heading.group(1)), heading.group(2)
            trail = [(lv, t) for lv, t in trail if lv < level] + [(level, title)]
            continue
        page = bisect.bisect_right(pages, block.start) or None if pages else None
        where = (HEADING_SEPARATOR.join(t for _, t in trail)[:HEADING_MAX_CHARS], page)
        if where != section:
            flush()
            section = where
        used = sum(len(part) + 2 for part in parts)
        if parts and used + len(body) > size:
            previous = "\n\n".join(parts)
            flush()
            parts.append(_tail(previous, overlap))
        if len(body) > size:
            flush()
            windows = list(_windows(body, size, overlap))
            pieces.extend(Piece(window, *section) for window in windows[:-1])
            parts.append(windows[-1])
        else:
            parts.append(body)
    flush()
    return pieces
