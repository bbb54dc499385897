"""Answers as sanitised markdown, and the per-process cache of rendered answers."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from tools.markdown.images import attribute_filter, is_local_image
from tools.markdown.render import RenderCache, render_markdown


def test_markdown_is_rendered_and_raw_html_shown_escaped():
    html = render_markdown("**bold** <script>alert(1)</script> [x](javascript:alert(1))")

    assert "<strong>bold</strong>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html


def test_answer_code_is_left_to_the_browser_and_links_do_not_leak_the_page():
    """The browser highlights answers (highlight.js), live and final alike: the server's
    HTML is markdown-it's, so the two are the same DOM."""
    html = render_markdown("```python\ndef f(x):\n    return x < 3\n```\n\n[site](https://e.com)")

    assert (
        '<pre><code class="language-python">def f(x):\n    return x &lt; 3\n</code></pre>' in html
    )
    assert "<span" not in html
    assert 'rel="noopener noreferrer nofollow"' in html


def test_documents_keep_pygments_highlighting():
    """Artifact documents are shown without script: Pygments highlights them (classes)."""
    html = render_markdown("```python\ndef f(x):\n    return x < 3\n```", highlight=True)

    assert '<pre><code class="language-python"><span class="k">def</span>' in html
    assert "style=" not in html  # the CSP refuses inline styles: classes only
    assert "&lt;" in html  # the code's "<" stays text
    assert render_markdown("```python\nx\n```") != html  # a cache per kind


def test_maths_is_marked_for_katex_and_money_stays_text():
    html = render_markdown(
        "Euler: $e^{i\\pi} + 1 = 0$, shown $$x^2$$ inline.\n\n$$\n\\sum_k k < n\n$$\n\n"
        "It costs $5 and $10, or $ 5 and $ 10."
    )

    assert '<span class="math inline">e^{i\\pi} + 1 = 0</span>' in html
    # $$..$$ in a paragraph is a span: a <div> would split the paragraph in the browser.
    assert '<span class="math display">x^2</span>' in html
    assert '<div class="math block">\n\\sum_k k &lt; n\n</div>' in html
    assert "<p>It costs $5 and $10, or $ 5 and $ 10.</p>" in html


def test_task_lists_are_disabled_checkboxes():
    html = render_markdown("- [ ] open\n- [x] done\n- plain")

    assert '<ul class="contains-task-list">' in html and "<li>plain</li>" in html
    boxes = [attrs for tag, attrs in _elements(html) if tag == "input"]
    box = {"class": "task-list-item-checkbox", "type": "checkbox", "disabled": ""}
    assert boxes == [box, box | {"checked": ""}]  # as the browser's renderer writes them
    assert html.count('<li class="task-list-item">') == 2


def test_table_alignment_is_an_attribute_not_a_style():
    html = render_markdown("| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |")

    assert '<th align="left">a</th>' in html and '<td align="right">3</td>' in html
    assert '<td align="center">2</td>' in html and "style" not in html


def test_ordered_lists_keep_their_start():
    assert '<ol start="3">' in render_markdown("3. three\n4. four")


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def _elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    """The elements of ``html`` as a browser would parse them (escaped text is text)."""
    collector = _Collector()
    collector.feed(html)
    return collector.elements


@pytest.mark.parametrize(
    "source",
    [
        "<script>alert(1)</script>",
        '<img src="x" onerror="alert(1)">',
        '<a href="javascript:alert(1)" onclick="alert(1)">x</a>',
        "[x](javascript:alert(1)) [y](JAVASCRIPT:alert(1)) [z](vbscript:msgbox(1))",
        "[d](data:text/html,<script>alert(1)</script>)",
        '<input type="text" onfocus="alert(1)" autofocus>',
        '<div class="math block" style="position:fixed" onmouseover="alert(1)">x</div>',
        "$<script>alert(1)</script>$ and $$<img src=x onerror=alert(1)>$$",
        "```<script>\nalert(1)\n```",
        "- [x] <b onclick=alert(1)>task</b>",
    ],
)
def test_nothing_an_answer_writes_runs_script(source):
    elements = _elements(render_markdown(source))

    assert not {tag for tag, _ in elements} & {"script", "img", "iframe", "style", "svg"}
    for tag, attrs in elements:
        assert not [name for name in attrs if name.startswith("on") or name == "style"], tag
        for name in ("href", "src"):
            assert not re.match(r"\s*(javascript|vbscript|data):", attrs.get(name) or "", re.I)
        if tag == "input":
            assert attrs["type"] == "checkbox" and "disabled" in attrs


def test_only_a_task_box_is_an_input_and_it_is_disabled():
    """What the sanitiser lets through, whatever reached it (markdown never writes raw
    HTML): an input is always a disabled checkbox, classes are the known ones."""
    from tools.markdown.render import _SANITISER

    cleaned = _SANITISER.clean(
        '<input type="text" class="task-list-item-checkbox evil" checked="checked" value="x">'
        '<span class="math evil inline">m</span><div class="x math">d</div>'
    )

    assert _elements(cleaned) == [
        ("input", {"class": "task-list-item-checkbox", "checked": "", "type": "checkbox",
                   "disabled": ""}),
        ("span", {"class": "math inline"}),
        ("div", {"class": "math"}),
    ]  # fmt: skip


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


# --- images: only data: and same-origin ones load (issue 28) -----------------------------


@pytest.mark.parametrize(
    "source",
    [
        "![the chart](http://remote.example/leak.png?q=secret)",
        "![the chart](HTTPS://remote.example/leak.png)",
        "![the chart](//remote.example/leak.png)",
    ],
)
def test_a_remote_image_becomes_a_link(source):
    html = render_markdown(source)

    assert "<img" not in html
    link = re.search(r"<a [^>]*>the chart</a>", html)
    assert link is not None, html
    assert 'class="remote-image"' in link.group(0)
    assert 'href="' in link.group(0) and "remote.example/leak.png" in link.group(0)
    assert 'rel="noopener noreferrer nofollow"' in link.group(0)
    assert 'target="_blank"' in link.group(0)


def test_a_remote_image_without_alt_text_shows_its_url_and_keeps_its_title():
    html = render_markdown('![](https://remote.example/a.png?x=1&y=2 "Sales")')

    assert "<img" not in html
    assert (
        '<a class="remote-image" href="https://remote.example/a.png?x=1&amp;y=2" title="Sales"'
        ' target="_blank" rel="noopener noreferrer nofollow">'
        "https://remote.example/a.png?x=1&amp;y=2</a>"
    ) in html


def test_raw_img_html_is_shown_as_text_never_as_an_image():
    html = render_markdown('Look: <img src="http://remote.example/raw.png" alt="x">')

    assert "<img" not in html and "&lt;img" in html


def test_data_and_same_origin_images_stay_images():
    html = render_markdown(
        "![dot](data:image/png;base64,iVBORw0KGgo=) ![art](/artifacts/7/preview) ![rel](chart.png)"
    )

    assert '<img src="data:image/png;base64,iVBORw0KGgo=" alt="dot">' in html
    assert '<img src="/artifacts/7/preview" alt="art">' in html
    assert '<img src="chart.png" alt="rel">' in html
    assert "<a " not in html


def test_an_svg_data_image_and_a_data_link_are_refused():
    html = render_markdown(
        "![s](data:image/svg+xml;base64,PHN2Zz4=) [d](data:image/png;base64,iVBORw0KGgo=)"
    )

    assert "<img" not in html
    assert 'href="data:' not in html


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("/artifacts/1/preview", True),
        ("chart.png", True),
        ("data:image/png;base64,AAAA", True),
        ("data:image/svg+xml,<svg/>", False),
        ("http://remote.example/a.png", False),
        ("//remote.example/a.png", False),
        ("/\\remote.example/a.png", False),  # browsers read "\" as "/"
        ("/\t/remote.example/a.png", False),  # and drop tabs
        ("javascript:alert(1)", False),
        ("", False),
    ],
)
def test_which_image_urls_are_local(url, local):
    assert is_local_image(url) is local


def test_the_sanitiser_drops_a_remote_img_src_that_reaches_it():
    assert attribute_filter("img", "src", "https://remote.example/a.png") is None
    assert attribute_filter("img", "src", "/static/x.png") == "/static/x.png"
    assert attribute_filter("a", "href", " DATA:text/html,x") is None
    assert attribute_filter("a", "href", "https://e.com") == "https://e.com"
