"""Inline citations: an answer's "[n]" becomes a link to the passage its run found, on the
rendered (sanitised) HTML, and nothing else of the answer changes."""

from __future__ import annotations

from html.parser import HTMLParser

from conversations.pages.citations import Citation, cited_numbers, link_citations
from conversations.pages.rendering import build_run_view
from tools.builtin.search_knowledge import search_knowledge_tool
from tools.markdown.render import render_markdown

HOLIDAYS = Citation(1, "/knowledge/passages/41/", "handbook.pdf, page 3, Holidays")
SICK = Citation(2, "/knowledge/passages/42/", 'policy "A&B" <2024>')


class _Text(HTMLParser):
    """The text a reader sees, and the links with their accessible names."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.text = ""
        self.links: list[tuple[str, str, str]] = []  # (href, aria-label, text)
        self._link: dict[str, str | None] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._link = dict(attrs)
            self._link_text = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._link is not None:
            self.links.append(
                (self._link.get("href") or "", self._link.get("aria-label") or "", self._link_text)
            )
            self._link = None

    def handle_data(self, data: str) -> None:
        self.text += data
        if self._link is not None:
            self._link_text += data


def linked(markdown: str, *citations: Citation) -> str:
    return str(link_citations(render_markdown(markdown), citations))


def test_a_cited_number_becomes_a_superscript_link_named_after_its_source() -> None:
    html = linked("You get 25 days a year [1].", HOLIDAYS)

    assert html == (
        '<p>You get 25 days a year <sup class="citation"><a href="/knowledge/passages/41/" '
        'title="handbook.pdf, page 3, Holidays" aria-label="Source 1: handbook.pdf, page 3, '
        'Holidays" target="_blank" rel="noopener">[1]</a></sup>.</p>\n'
    )
    # What a reader sees and copies is the text as it was.
    assert _Text(html).text == _Text(render_markdown("You get 25 days a year [1].")).text


def test_a_number_without_a_source_stays_plain_text() -> None:
    source = "Holidays [1], sick days [3], a list [1, 3] and [4, 5]."
    html = linked(source, HOLIDAYS)

    links = _Text(html).links
    assert links == [
        ("/knowledge/passages/41/", "Source 1: handbook.pdf, page 3, Holidays", "[1]"),
        ("/knowledge/passages/41/", "Source 1: handbook.pdf, page 3, Holidays", "1"),
    ]
    assert "sick days [3]," in html and "and [4, 5]." in html
    assert '<sup class="citation">[<a ' in html and "</a>, 3]</sup>" in html
    assert _Text(html).text == _Text(render_markdown(source)).text


def test_code_links_and_maths_are_untouched() -> None:
    source = (
        "Cited [1].\n\n"
        "Inline `items[1]` and a [link [1]](https://example.com/).\n\n"
        "```python\nrows[1] = [2]\n```\n\n"
        "    indented[1]\n\n"
        "Maths $x[1] + y$ here."
    )
    plain = str(render_markdown(source))
    html = linked(source, HOLIDAYS, SICK)

    assert html.count('<sup class="citation">') == 1
    assert html.replace(html[html.index("<sup") : html.index("</sup>") + 6], "[1]") == plain
    assert cited_numbers(plain) == {1}


def test_text_that_needs_escaping_stays_escaped_and_tags_stay_whole() -> None:
    source = 'A & B <b>[2]</b> "quoted" [2]\n\n| col [2] |\n|---|\n| cell [1] |'
    html = linked(source, HOLIDAYS, SICK)

    assert "A &amp; B &lt;b&gt;" in html  # the raw HTML of the source stays text
    assert 'aria-label="Source 2: policy &quot;A&amp;B&quot; &lt;2024&gt;"' in html
    assert html.count('<sup class="citation">') == 4  # in the paragraph and both cells
    assert [link[2] for link in _Text(html).links] == ["[2]", "[2]", "[2]", "[1]"]


def test_without_sources_the_html_is_returned_as_it_is() -> None:
    html = render_markdown("Nothing to cite [1].")
    assert link_citations(html, []) == html
    assert cited_numbers(str(html)) == {1}


def _search_card(chunk_ids: list[int]) -> list[tuple[int, str, dict]]:
    """A finished search_knowledge call as the run logs it (the tool's own output)."""

    class Hit:
        def __init__(self, chunk_id: int) -> None:
            self.chunk_id, self.document_name = chunk_id, "handbook.pdf"
            self.page, self.heading, self.text = 3, f"Part {chunk_id}", "Some passage."

    tool = search_knowledge_tool(lambda q, k: [Hit(c) for c in chunk_ids], ["Handbook"])
    observation = tool.func(query="holidays").content
    common = {"type": "iteration", "iteration": 1, "tool_name": "search_knowledge"}
    return [
        (1, "step", {**common, "status": "start", "tool_args": {"query": "holidays"}}),
        (2, "step", {**common, "status": "done", "observation": observation, "error": None}),
    ]


def test_a_finished_runs_answer_links_its_citations_to_the_live_passages() -> None:
    events = _search_card([41, 42])
    answer = "25 days [1]; unknown [9]; `code [2]`."
    view = build_run_view(7, [*events, (3, "done", {"status": "succeeded", "answer": answer})], [])

    links = _Text(view.answer_html).links
    assert links == [("/knowledge/passages/41/", "Source 1: handbook.pdf, page 3, Part 41", "[1]")]
    assert "unknown [9]" in view.answer_html and "<code>code [2]</code>" in view.answer_html


def test_a_run_without_sources_renders_its_answer_as_before() -> None:
    answer = "See [1]."
    view = build_run_view(8, [(1, "done", {"status": "succeeded", "answer": answer})], [])
    assert view.answer_html == render_markdown(answer)
