"""Markdown to safe HTML for answers and artifacts.

markdown-it-py renders (raw HTML in the source is escaped, not passed through), Pygments
highlights fenced code, and nh3 (ammonia) sanitises the result as a second line of
defence, so nothing a model or tool writes can run script in the page.

Rendering is the largest cost of a chat page, and a reload re-renders every answer of
the conversation, so each process keeps recently rendered answers (``CACHE_CHARACTERS``).
"""

from __future__ import annotations

import html
import threading
from collections import OrderedDict

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

__all__ = ["render_markdown"]

_FORMATTER = HtmlFormatter(nowrap=True, noclasses=True, style="friendly")

ALLOWED_TAGS = {
    "a", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "i", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup", "table", "tbody",
    "td", "th", "thead", "tr", "ul", "img", "div",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "span": {"style"},
    "code": {"class"},
    "pre": {"class"},
    "th": {"align"},
    "td": {"align"},
    "div": {"class"},
}


def _highlight(code: str, lang: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang.strip()) if lang.strip() else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes and wraps it itself
    return highlight(code, lexer, _FORMATTER)


_MD = (
    MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _highlight})
    .enable("table")
    .enable("strikethrough")
)


CACHE_CHARACTERS = 8_000_000  # per process: source + HTML kept (8 MB of ASCII, more otherwise)


class RenderCache:
    """Recently rendered texts, least recently used first out, bounded by their size."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self.size = 0
        self._entries: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()  # page loads render on several threads

    def get(self, text: str) -> str | None:
        with self._lock:
            found = self._entries.get(text)
            if found is not None:
                self._entries.move_to_end(text)
            return found

    def put(self, text: str, rendered: str) -> None:
        cost = len(text) + len(rendered)
        if cost > self.max_size // 8:  # one huge document must not flush the rest
            return
        with self._lock:
            if text in self._entries:
                return
            self._entries[text] = rendered
            self.size += cost
            while self.size > self.max_size:
                old_text, old_rendered = self._entries.popitem(last=False)
                self.size -= len(old_text) + len(old_rendered)


_cache = RenderCache(CACHE_CHARACTERS)


def render_markdown(text: str) -> SafeString:
    """Render untrusted markdown to sanitised HTML."""
    text = text or ""
    rendered = _cache.get(text)
    if rendered is None:
        rendered = _render(text)
        _cache.put(text, rendered)
    return mark_safe(rendered)  # noqa: S308 - sanitised by nh3 in _render


def _render(text: str) -> str:
    rendered = _MD.render(text)
    return nh3.clean(
        rendered,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"color", "font-weight", "font-style", "background-color"},
    )


def escape(text: str) -> str:
    return html.escape(text)
