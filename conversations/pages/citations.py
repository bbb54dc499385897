"""Inline citations: the "[1]" an answer writes for a knowledge passage becomes a link.

Done on the answer's sanitised HTML (``tools.markdown.render``), not on its markdown: the
markdown is rendered once and cached for everyone, and the browser renders the same source
while it streams, so the links are added to the final HTML only, where each run knows its
own sources. The HTML is read with the standard library's HTML parser, which says where
each run of text starts: only text is rewritten, never a tag or an attribute, and text
inside code, links and maths (KaTeX reads the element's text) is left as it is. A number
no source has stays plain text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

__all__ = ["Citation", "cited_numbers", "link_citations"]

# "[1]" or "[1, 2]": what search_knowledge asks the model to write.
_BRACKETS = re.compile(r"\[\s*\d{1,4}(?:\s*,\s*\d{1,4})*\s*\]")
_NUMBER = re.compile(r"\d+")
_SKIPPED_TAGS = frozenset({"a", "code", "pre", "script", "style", "textarea"})
_SKIPPED_CLASSES = frozenset({"math"})  # dollarmath's spans and divs: TeX, not prose
_VOID_TAGS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)


@dataclass(frozen=True)
class Citation:
    """Where the answer's number ``number`` points: the passage's page, and what it is."""

    number: int
    href: str
    where: str


class _TextRuns(HTMLParser):
    """The runs of prose text of an HTML fragment, as ``(start, end)`` offsets into it."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=False)  # raw text: offsets stay the source's
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", html)]
        self._open: list[bool] = []  # per open element: does it hide its text?
        self._hidden = 0
        self.runs: list[tuple[int, int]] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID_TAGS:
            return
        classes = set((dict(attrs).get("class") or "").split())
        hides = tag in _SKIPPED_TAGS or bool(classes & _SKIPPED_CLASSES)
        self._open.append(hides)
        self._hidden += hides

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID_TAGS or not self._open:
            return
        self._hidden -= self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._hidden or "[" not in data:
            return
        line, column = self.getpos()
        start = self._line_starts[line - 1] + column
        self.runs.append((start, start + len(data)))


def _matches(html: str) -> Iterator[re.Match[str]]:
    """Each bracketed number (or list of numbers) in the fragment's prose."""
    if "[" not in html:
        return
    for start, end in _TextRuns(html).runs:
        yield from _BRACKETS.finditer(html, start, end)


def cited_numbers(html: str) -> set[int]:
    """The numbers the answer cites in its prose (not in code): which passages it used."""
    return {int(n) for match in _matches(html) for n in _NUMBER.findall(match.group())}


def link_citations(html: str, citations: Iterable[Citation]) -> SafeString:
    """``html`` (sanitised) with each cited number that has a source as a superscript link
    to its passage, named "Source n: where" for screen readers."""
    by_number = {citation.number: citation for citation in citations}
    if not by_number:
        return mark_safe(html)  # noqa: S308 - the caller's sanitised HTML, unchanged
    parts: list[str] = []
    done = 0
    for match in _matches(html):
        numbers = [int(n) for n in _NUMBER.findall(match.group())]
        if not any(n in by_number for n in numbers):
            continue
        parts += [html[done : match.start()], _linked(match.group(), by_number)]
        done = match.end()
    parts.append(html[done:])
    return mark_safe("".join(parts))  # noqa: S308 - only escaped text and our own tags added


def _link(citation: Citation, text: str) -> str:
    where = escape(citation.where)
    label = _("Source %(number)s: %(where)s") % {"number": citation.number, "where": citation.where}
    label = escape(label)
    return (
        f'<a href="{escape(citation.href)}" title="{where}" '
        f'aria-label="{label}" target="_blank" rel="noopener">'
        f"{text}</a>"
    )


def _linked(bracketed: str, by_number: dict[int, Citation]) -> str:
    """One "[1]" (the whole of it a link) or "[1, 2]" (each number its own link, the ones
    without a source plain), in a ``<sup>``: the text reads as it did."""
    numbers = _NUMBER.findall(bracketed)
    if len(numbers) == 1:
        return f'<sup class="citation">{_link(by_number[int(numbers[0])], bracketed)}</sup>'

    def one(match: re.Match[str]) -> str:
        citation = by_number.get(int(match.group()))
        return _link(citation, match.group()) if citation else match.group()

    return f'<sup class="citation">{_NUMBER.sub(one, bracketed)}</sup>'
