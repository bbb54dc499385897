"""Answers as sanitised markdown, and the per-process cache of rendered answers."""

from __future__ import annotations

from tools.markdown import RenderCache, render_markdown


def test_markdown_is_rendered_and_raw_html_shown_escaped():
    html = render_markdown("**bold** <script>alert(1)</script> [x](javascript:alert(1))")

    assert "<strong>bold</strong>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html


def test_fenced_code_is_highlighted_and_links_do_not_leak_the_page():
    html = render_markdown("```python\ndef f(x):\n    return x < 3\n```\n\n[site](https://e.com)")

    assert '<pre><code class="language-python"><span style="' in html
    assert "&lt;" in html  # the code's "<" stays text
    assert 'rel="noopener noreferrer nofollow"' in html


def test_rendering_an_answer_again_gives_the_same_html():
    text = "# Title\n\n- one\n- two\n\n```js\nconst a = '<b>';\n```"

    assert render_markdown(text) == render_markdown(text) == str(render_markdown(text))


def test_cache_drops_the_least_recently_used_beyond_its_size():
    cache = RenderCache(max_size=160)  # eight entries of 20 characters
    cache.put("a" * 10, "A" * 10)
    cache.put("b" * 10, "B" * 10)
    assert cache.get("a" * 10) == "A" * 10  # "b" is now the least recently used

    for n in range(7):
        cache.put(str(n) * 10, "x" * 10)

    assert cache.size == 160
    assert cache.get("b" * 10) is None
    assert cache.get("a" * 10) == "A" * 10
    assert cache.get("6" * 10) == "x" * 10


def test_a_document_larger_than_an_eighth_of_the_cache_is_not_kept():
    cache = RenderCache(max_size=800)
    cache.put("small", "<p>small</p>")

    cache.put("big" * 40, "<p>big</p>" * 10)

    assert cache.get("big" * 40) is None
    assert cache.get("small") == "<p>small</p>"
