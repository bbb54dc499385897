"""Markdown to safe HTML for answers and artifacts.

markdown-it-py renders (raw HTML in the source is escaped, not passed through), Pygments
highlights fenced code, and nh3 (ammonia) sanitises the result as a second line of
defence, so nothing a model or tool writes can run script in the page.
"""

from __future__ import annotations

import html

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


def render_markdown(text: str) -> SafeString:
    """Render untrusted markdown to sanitised HTML."""
    rendered = _MD.render(text or "")
    clean = nh3.clean(
        rendered,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"color", "font-weight", "font-style", "background-color"},
    )
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 just above


def escape(text: str) -> str:
    return html.escape(text)
