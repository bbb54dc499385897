"""Markdown to safe HTML for answers and artifacts.

markdown-it-py renders (raw HTML in the source is escaped, not passed through), Pygments
highlights fenced code (with classes: the CSP refuses inline styles, ``highlight.py``),
and nh3 (ammonia) sanitises the result as a second line of defence, so nothing a model or
tool writes can run script in the page. Remote images become links
(``markdown_images.py``): nothing a model writes makes the browser fetch from another host.

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

from tools.highlight import TOKEN_CLASSES, highlight_code
from tools.markdown_images import REMOTE_IMAGE_CLASS, attribute_filter, render_image

__all__ = ["render_markdown"]

ALLOWED_TAGS = {
    "a", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "i", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup", "table", "tbody",
    "td", "th", "thead", "tr", "ul", "img", "div",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},
    "pre": {"class"},
    "th": {"align"},
    "td": {"align"},
    "div": {"class"},
}
ALLOWED_CLASSES = {"span": set(TOKEN_CLASSES), "a": {REMOTE_IMAGE_CLASS}}
ALLOWED_ATTRIBUTE_VALUES = {"a": {"target": {"_blank"}}}  # remote images open apart


def _highlight(code: str, lang: str, _attrs: str) -> str:
    return highlight_code(code, lang) or ""  # "": markdown-it escapes and wraps it itself


_MD = (
    MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _highlight})
    .enable("table")
    .enable("strikethrough")
)
_MD.add_render_rule("image", render_image)


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


_SANITISER = nh3.Cleaner(
    tags=ALLOWED_TAGS,
    attributes=ALLOWED_ATTRIBUTES,
    allowed_classes=ALLOWED_CLASSES,
    tag_attribute_values=ALLOWED_ATTRIBUTE_VALUES,
    attribute_filter=attribute_filter,  # data: for images only, no remote image
    url_schemes={"http", "https", "mailto", "data"},
    link_rel="noopener noreferrer nofollow",
)


def _render(text: str) -> str:
    return _SANITISER.clean(_MD.render(text))


def escape(text: str) -> str:
    return html.escape(text)
