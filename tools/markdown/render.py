"""Markdown to safe HTML for answers and artifacts.

markdown-it-py renders (raw HTML in the source is escaped, not passed through), and nh3
(ammonia) sanitises the result as a second line of defence, so nothing a model or tool
writes can run script in the page. Remote images become links (``images.py``):
nothing a model writes makes the browser fetch from another host.

Answers are also rendered in the browser while they stream (``static/js/markdown.js``),
and the final HTML the server sends must equal what the browser showed: so answers use
exactly the parser the browser has (markdown-it 14.1 with the same rules and plugins:
``dollarmath`` and ``tasklists`` are the Python ports of the npm plugins it loads, with
the same options) and no server-side highlighting: the browser highlights code (with
highlight.js), typesets maths (KaTeX) and draws diagrams (mermaid) in both cases.
Artifact documents are shown without that script, so Pygments highlights their code
(with classes: the CSP refuses inline styles, ``highlight.py``).

Rendering is the largest cost of a chat page, and a reload re-renders every answer of
the conversation, so each process keeps recently rendered answers (``CACHE_CHARACTERS``).
"""

from __future__ import annotations

import html
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.tasklists import tasklists_plugin

from tools.markdown.highlight import TOKEN_CLASSES, highlight_code
from tools.markdown.images import REMOTE_IMAGE_CLASS, attribute_filter, render_image

__all__ = ["render_markdown"]

# The same allow-list is DOMPurify's in static/js/markdown.js: keep the two in step.
ALLOWED_TAGS = {
    "a", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "i", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup", "table", "tbody",
    "td", "th", "thead", "tr", "ul", "img", "div", "input",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},  # language-<name>
    "pre": {"class"},
    "th": {"align"},
    "td": {"align"},
    "ol": {"start"},
    "input": {"checked"},  # a task list's box; always a disabled checkbox (below)
}
MATH_CLASSES = {"math", "inline", "display", "block"}  # dollarmath: span.math.inline etc.
ALLOWED_CLASSES = {
    "span": set(TOKEN_CLASSES) | MATH_CLASSES,
    "div": MATH_CLASSES,
    "a": {REMOTE_IMAGE_CLASS},
    "ul": {"contains-task-list"},
    "ol": {"contains-task-list"},
    "li": {"task-list-item"},
    "input": {"task-list-item-checkbox"},
}
ALLOWED_ATTRIBUTE_VALUES = {"a": {"target": {"_blank"}}}  # remote images open apart
FORCED_ATTRIBUTE_VALUES = {"input": {"type": "checkbox", "disabled": ""}}


def _highlight(code: str, lang: str, _attrs: str) -> str:
    return highlight_code(code, lang) or ""  # "": markdown-it escapes and wraps it itself


def render_display_math(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """``$$...$$`` inside a paragraph: a span, not dollarmath's ``<div>`` (a div cannot
    sit in a ``<p>``: browsers would split the paragraph around it)."""
    return f'<span class="math display">{escapeHtml(tokens[idx].content)}</span>'


def align_cells(state: StateCore) -> None:
    """A table column's alignment as the ``align`` attribute instead of ``style=""``,
    which the CSP refuses (and the sanitiser drops): the browser's renderer does the same."""
    for token in state.tokens:
        style = token.attrGet("style")
        if token.type not in ("th_open", "td_open") or not style:
            continue
        del token.attrs["style"]
        align = _ALIGN.match(str(style))
        if align:
            token.attrSet("align", align.group(1))


_ALIGN = re.compile(r"^text-align:(left|right|center)$")


def _parser(*, highlight: bool) -> MarkdownIt:
    options = {"html": False, "linkify": False}
    if highlight:
        options["highlight"] = _highlight
    md = MarkdownIt("commonmark", options).enable("table").enable("strikethrough")
    md.core.ruler.push("table_align", align_cells)
    md.add_render_rule("image", render_image)
    return md


# Answers: the browser's parser (static/js/markdown.js), option for option.
_MD = _parser(highlight=False)
_MD.use(
    dollarmath_plugin,
    allow_labels=False,
    allow_space=False,  # "$ 5 and $ 10" is money, not maths
    allow_digits=False,  # and so is "$5 and $10"
    double_inline=True,
)
_MD.use(tasklists_plugin)
_MD.add_render_rule("math_inline_double", render_display_math)

# Artifact documents: shown without script, so Pygments highlights their code.
_DOCUMENT_MD = _parser(highlight=True)


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
_document_cache = RenderCache(CACHE_CHARACTERS // 4)


def render_markdown(text: str, *, highlight: bool = False) -> SafeString:
    """Render untrusted markdown to sanitised HTML: an answer as the browser renders it
    while it streams, or with ``highlight`` a document whose code Pygments highlights."""
    text = text or ""
    cache, md = (_document_cache, _DOCUMENT_MD) if highlight else (_cache, _MD)
    rendered = cache.get(text)
    if rendered is None:
        rendered = _SANITISER.clean(md.render(text))
        cache.put(text, rendered)
    return mark_safe(rendered)  # noqa: S308 - sanitised by nh3


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    """data: for images only, no remote image; a task's box is ``checked=""`` as the
    browser's renderer writes it (the server's and the browser's DOM must be equal)."""
    if tag == "input" and attribute == "checked":
        return ""
    return attribute_filter(tag, attribute, value)


_SANITISER = nh3.Cleaner(
    tags=ALLOWED_TAGS,
    attributes=ALLOWED_ATTRIBUTES,
    allowed_classes=ALLOWED_CLASSES,
    tag_attribute_values=ALLOWED_ATTRIBUTE_VALUES,
    set_tag_attribute_values=FORCED_ATTRIBUTE_VALUES,
    attribute_filter=_attribute_filter,
    url_schemes={"http", "https", "mailto", "data"},
    link_rel="noopener noreferrer nofollow",
)


def escape(text: str) -> str:
    return html.escape(text)
