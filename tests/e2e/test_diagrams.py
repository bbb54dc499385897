"""Diagrams and code in the chat (issue 47): mermaid labels as written, diagrams in the
page's scheme, the mermaid bundle downloaded once, Copy buttons that stay under the
composer, and a tool's code arguments shown as code.

Real Chromium, real daphne, the scripted LLM server.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, Response, expect

from tests.e2e.conftest import ScriptedLLM, log_in
from tests.e2e.test_chat_flows import latest_run, new_conversation, send, wait_finished

pytestmark = pytest.mark.e2e

DOCS = Path(__file__).resolve().parents[2] / "docs"
BUNDLE = "/vendor/mermaid/mermaid.min.js"
DIAGRAM = (
    "The check:\n\n```mermaid\nflowchart TD\n  A[Start] --> B{Tokens >= 1?}\n"
    "  B -->|a < b & c| C[Spend one]\n  B -->|no| D[Wait]\n"
    "  C --> E[List<String>]\n  D -->|x<y| E\n```\n\nThat is all."
)


def ask_for(page: Page, llm: ScriptedLLM, answer: str, question: str = "Draw it") -> int:
    """A new conversation whose one answer is ``answer``; the run's id."""
    llm.script({"chunks": [answer[i : i + 40] for i in range(0, len(answer), 40)]})
    new_conversation(page)
    send(page, question)
    run_id = latest_run(page)
    wait_finished(page, run_id)
    return run_id


def drawn_svg(page: Page, run_id: int) -> str:
    """The SVG text of the answer's diagram, as its <img> shows it."""
    img = page.locator(f"#answer-{run_id} .mermaid-diagram img")
    expect(img).to_be_visible()
    src = img.get_attribute("src") or ""
    assert src.startswith("data:image/svg+xml,"), src[:80]
    return urllib.parse.unquote(src.split(",", 1)[1])


def labels(page: Page, svg: str) -> list[str]:
    """The text of each node and edge label of a drawn flowchart (parsed, not shown)."""
    return page.evaluate(
        """(svg) => {
            const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
            return [...doc.querySelectorAll("g.node .label, g.edgeLabel .label")]
                .map((label) => label.textContent.trim()).filter(Boolean);
        }""",
        svg,
    )


def test_a_diagram_label_is_drawn_exactly_as_written(chat_page: Page, llm: ScriptedLLM) -> None:
    run_id = ask_for(chat_page, llm, DIAGRAM)
    drawn = labels(chat_page, drawn_svg(chat_page, run_id))
    assert "Tokens >= 1?" in drawn, drawn
    assert "a < b & c" in drawn and "Start" in drawn, drawn
    # What looks like a tag is text too (mermaid's sanitiser dropped "<String>").
    assert "List<String>" in drawn and "x<y" in drawn, drawn
    # The fence's text stays the source, for Copy (hidden under the image).
    code = chat_page.locator(f"#answer-{run_id} pre code.language-mermaid")
    assert "B{Tokens >= 1?}" in code.evaluate("(el) => el.textContent")


NODE_FILL = re.compile(r"\.node rect,[^{]*\{fill:(#[0-9a-fA-F]{3,6});")
LABEL_COLOUR = re.compile(r"\.label\{[^}]*color:(#[0-9a-fA-F]{3,6});")


def luminance(colour: str) -> float:
    """Relative luminance of a #rgb/#rrggbb or rgb() colour (WCAG)."""
    if colour.startswith("#"):
        digits = colour[1:]
        if len(digits) == 3:
            digits = "".join(c * 2 for c in digits)
        channels = [int(digits[i : i + 2], 16) for i in (0, 2, 4)]
    else:
        channels = [int(float(c)) for c in re.findall(r"[\d.]+", colour)[:3]]

    def linear(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def scheme_of(page: Page, run_id: int) -> dict[str, float]:
    """Luminance of what the diagram shows: its box, its nodes and its label text."""
    svg = drawn_svg(page, run_id)
    fill, text = NODE_FILL.search(svg), LABEL_COLOUR.search(svg)
    assert fill and text, svg[:1500]
    figure = page.locator(f"#answer-{run_id} .mermaid-diagram")
    box = figure.evaluate("(el) => getComputedStyle(el).backgroundColor")
    return {"box": luminance(box), "node": luminance(fill[1]), "text": luminance(text[1])}


def test_diagrams_are_drawn_dark_in_dark_mode(
    chat_page: Page, llm: ScriptedLLM, screenshot: Callable[..., Path]
) -> None:
    chat_page.emulate_media(color_scheme="light")
    light_run = ask_for(chat_page, llm, DIAGRAM)
    light = scheme_of(chat_page, light_run)
    assert light["box"] > 0.8 and light["node"] > 0.5 and light["text"] < 0.1, light

    # The system turns dark: the diagram on the page is drawn again, dark.
    chat_page.emulate_media(color_scheme="dark")
    expect(chat_page.locator(f"#answer-{light_run} .mermaid-diagram")).to_have_attribute(
        "data-theme", "dark"
    )
    dark = scheme_of(chat_page, light_run)
    assert dark["box"] < 0.05 and dark["node"] < 0.05 and dark["text"] > 0.4, dark
    # And a page loaded dark draws it dark from the start; its label is still as written.
    chat_page.reload()
    assert scheme_of(chat_page, light_run) == dark
    assert "Tokens >= 1?" in labels(chat_page, drawn_svg(chat_page, light_run))
    chat_page.locator(f"#answer-{light_run} .mermaid-diagram").scroll_into_view_if_needed()
    screenshot(chat_page, docs="dark-diagram")


def test_settings_dark_theme_draws_diagrams_dark_on_a_light_system(
    chat_page: Page, llm: ScriptedLLM
) -> None:
    chat_page.emulate_media(color_scheme="light")
    run_id = ask_for(chat_page, llm, DIAGRAM)
    # As base.html marks the page when Settings pin the dark theme.
    chat_page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
    figure = chat_page.locator(f"#answer-{run_id} .mermaid-diagram")
    expect(figure).to_have_attribute("data-theme", "dark")
    assert scheme_of(chat_page, run_id)["node"] < 0.05


KINDS = (
    "Every kind:\n\n```mermaid\nflowchart LR\n  subgraph Shop\n    A[Order] -->|paid| B(Ship)\n"
    "  end\n  B -.->|late?| C{Refund}\n```\n\n"
    "```mermaid\nsequenceDiagram\n  participant U as User\n  U->>Agent: Ask\n"
    "  Note right of Agent: thinks\n  loop Each tool\n    Agent-->>U: Result\n  end\n```\n\n"
    "```mermaid\nclassDiagram\n  class Shape {\n    <<interface>>\n    +area() float\n  }\n"
    "  Shape <|-- Circle : is a\n```\n\n"
    "```mermaid\nstateDiagram-v2\n  [*] --> Waiting\n  Waiting --> Done: approved\n"
    "  Done --> [*]\n```"
)

# Each text of an SVG shown alone on the answer's background: its colour and the colour
# under its middle (the first painted box or shape below it, blended), as contrast ratios.
TEXT_CONTRASTS = """(page) => {
  const rgba = (c) => {
    const m = (c || "").match(/[\\d.]+/g);
    if (!m || c === "none") return null;
    const [r, g, b, a = 1] = m.map(Number);
    return { r, g, b, a };
  };
  const linear = (v) => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  const lum = (c) => 0.2126 * linear(c.r) + 0.7152 * linear(c.g) + 0.0722 * linear(c.b);
  const over = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a), a: 1 });
  const paint = (el) => {
    const style = getComputedStyle(el);
    if (!(el instanceof SVGElement)) return rgba(style.backgroundColor);
    if (["svg", "g", "text", "tspan", "foreignObject"].includes(el.tagName)) return null;
    const fill = rgba(style.fill);
    if (fill) fill.a *= Number(style.fillOpacity) * Number(style.opacity);
    return fill;
  };
  const texts = [...document.querySelectorAll("svg text, svg tspan, foreignObject *")]
    .filter((el) => [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()));
  const found = [];
  for (const el of texts) {
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height) continue;
    const style = getComputedStyle(el);
    let colour = rgba(el instanceof SVGElement ? style.fill : style.color);
    if (!colour) continue;
    const layers = [];
    for (const under of document.elementsFromPoint(box.x + box.width / 2, box.y + box.height / 2)) {
      if (under === el) continue;
      const layer = paint(under);
      if (layer && layer.a > 0) layers.push(layer);
      if (layer && layer.a >= 1) break;
    }
    let back = rgba(page);
    for (const layer of layers.reverse()) back = over(layer, back);
    colour = over(colour, back);
    const [hi, lo] = [lum(colour), lum(back)].sort((x, y) => y - x);
    found.push({ text: el.textContent.trim(), ratio: (hi + 0.05) / (lo + 0.05) });
  }
  return found;
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_of_a_diagram_is_readable(
    chat_page: Page, llm: ScriptedLLM, scheme: str
) -> None:
    chat_page.emulate_media(color_scheme=scheme)
    run_id = ask_for(chat_page, llm, KINDS)
    figures = chat_page.locator(f"#answer-{run_id} .mermaid-diagram")
    expect(figures).to_have_count(4)
    background = figures.first.evaluate("(el) => getComputedStyle(el).backgroundColor")
    alone = chat_page.context.new_page()
    try:
        for n in range(4):
            expect(figures.nth(n)).to_have_attribute("data-theme", scheme)
            img = figures.nth(n).locator("img")
            expect(img).to_be_visible()
            svg = urllib.parse.unquote((img.get_attribute("src") or "").split(",", 1)[1])
            alone.set_content(f'<body style="margin:0;background:{background}">{svg}</body>')
            texts = alone.evaluate(TEXT_CONTRASTS, background)
            assert len(texts) >= 3, texts
            faint = [(t["text"], round(t["ratio"], 2)) for t in texts if t["ratio"] < 4.5]
            assert not faint, f"diagram {n + 1} in {scheme}: {faint}"
    finally:
        alone.close()


def test_the_mermaid_bundle_downloads_once_for_every_view_of_a_chat(
    new_context: Callable[..., BrowserContext], llm: ScriptedLLM
) -> None:
    context = new_context()  # its own, empty cache
    page = context.new_page()
    log_in(page, "alice")
    bundles: list[Response] = []
    page.on("response", lambda r: bundles.append(r) if r.url.endswith(BUNDLE) else None)

    page.goto("/")
    page.wait_for_load_state("load")
    assert bundles == []  # no diagram, no mermaid
    run_id = ask_for(page, llm, DIAGRAM)
    drawn_svg(page, run_id)
    conversation = page.url
    (first,) = bundles
    assert first.status == 200 and first.request.sizes()["responseBodySize"] > 1_000_000

    for _ in range(2):  # two more views of the chat: the diagram, from the cached bundle
        bundles.clear()
        page.goto(conversation)
        assert "Tokens >= 1?" in labels(page, drawn_svg(page, run_id))
        transferred = [r.request.sizes()["responseBodySize"] for r in bundles]
        assert all(size == 0 for size in transferred), [(r.status, r.url) for r in bundles]
    context.close()


CODE_ANSWER = "Here is the code:\n\n" + "\n\n".join(
    f"Step {n}:\n\n```python\nprint({n})\nvalue = {n} * 2\nprint(value)\n```" for n in range(12)
)


def test_copy_buttons_never_show_through_the_composer(chat_page: Page, llm: ScriptedLLM) -> None:
    run_id = ask_for(chat_page, llm, CODE_ANSWER, "Code, please")
    send_button = chat_page.locator("#composer").get_by_role("button", name="Send")
    expect(send_button).to_be_visible()
    copies = chat_page.locator(f"#answer-{run_id} .copy-code")
    expect(copies).to_have_count(12)
    # Scroll Copy buttons in turn to the height of Send: under the composer (the last
    # blocks never go under it, nor the first ones, above the top of the page).
    for index in (4, 7, 9):
        copy = copies.nth(index)
        placed = chat_page.evaluate(
            UNDER_SEND, [copy.element_handle(), send_button.element_handle()]
        )
        assert placed, f"code block {index} should lie under the Send button here"
        box = send_button.bounding_box()
        assert box
        point = [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2]
        on_top = chat_page.evaluate(
            "([x, y]) => document.elementFromPoint(x, y).closest('button')?.textContent", point
        )
        assert on_top == "Send", (index, on_top)


# Scrolls the page (or the box that scrolls) until the Copy button is level with Send;
# whether the code block then lies under Send's middle.
UNDER_SEND = """([copy, send]) => {
    let box = copy.parentElement;
    while (box && !(box.scrollHeight > box.clientHeight &&
                    /auto|scroll/.test(getComputedStyle(box).overflowY))) box = box.parentElement;
    const scroller = box || document.scrollingElement;
    const a = copy.getBoundingClientRect(), b = send.getBoundingClientRect();
    scroller.scrollTop += (a.top + a.height / 2) - (b.top + b.height / 2);
    const block = copy.closest(".code-block").getBoundingClientRect();
    const s = send.getBoundingClientRect(), y = s.top + s.height / 2, x = s.left + s.width / 2;
    return block.top <= y && y <= block.bottom && block.left <= x && x <= block.right;
}"""


PYTHON_CODE = 'import math\n\nfor n in range(3):\n    print("hi", n, math.pi)\n'


def test_a_python_calls_code_is_shown_as_lines_of_code(chat_page: Page, llm: ScriptedLLM) -> None:
    llm.script(
        {"tool_calls": [{"name": "python", "arguments": {"code": PYTHON_CODE}}]},
        {"chunks": ["Ran it."]},
        default={"chunks": ["Done."]},
    )
    new_conversation(chat_page)
    send(chat_page, "Run some python")
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    card = chat_page.locator(f"#card-{run_id}-1")
    card.locator("summary").click()
    code = card.locator(".tool-code pre > code.language-python")
    expect(code).to_be_visible()
    assert code.evaluate("(el) => el.textContent") == PYTHON_CODE
    assert code.evaluate("(el) => el.innerText.split('\\n').length") >= 4  # shown as lines
    expect(code.locator(".hljs-keyword").first).to_have_text("import")  # highlighted
    expect(card).not_to_contain_text('\\"hi\\"')
    expect(card).not_to_contain_text("\\n")
    chat_page.reload()  # the same from the server's HTML
    card.locator("summary").click()
    assert code.evaluate("(el) => el.textContent") == PYTHON_CODE
    expect(code.locator(".hljs-keyword").first).to_have_text("import")
