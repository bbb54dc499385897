"""Fenced code is highlighted with classes that the shipped stylesheet colours."""

from __future__ import annotations

from pathlib import Path

from tools.markdown.highlight import TOKEN_CLASSES, highlight_code, stylesheet

STYLESHEET = Path(__file__).resolve().parents[2] / "static" / "css" / "highlight.css"


def test_the_shipped_stylesheet_is_generated_from_the_same_style():
    assert STYLESHEET.read_text() == stylesheet(), (
        "static/css/highlight.css is stale: run `python -m tools.markdown.highlight > "
        "static/css/highlight.css`"
    )


def test_tokens_get_classes_never_inline_styles():
    html = highlight_code("x = 1  # one", "python")

    assert html is not None and "style=" not in html
    assert '<span class="n">x</span>' in html and '<span class="c1"># one</span>' in html
    assert {"n", "c1", "o", "mi"} <= TOKEN_CLASSES


def test_an_unknown_or_missing_language_is_left_to_markdown_it():
    assert highlight_code("x", "no-such-language") is None
    assert highlight_code("x", "  ") is None
