"""Answers render as markdown while they stream, and the final HTML is what streamed
(issue 29): real Chromium, real daphne, the scripted LLM server.

Every chat call of a test returns the same answer (the scripted server's default
response), streamed in small chunks, so the tests hold whether the engine writes its
answer in one call or in a separate synthesis call. The run's final frame is held back
(Playwright routes the page's websocket) until the live rendering has been read, then let
through: the DOM the browser rendered live, the DOM the final frame swapped in (as in the
first frame painted after it) and the DOM of a fresh page load must be the same.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, WebSocketRoute, expect

from tests.e2e.conftest import TIMEOUT_MS, ScriptedLLM
from tests.e2e.test_chat_flows import latest_run, new_conversation, send
from tests.e2e.test_csp import Violations

pytestmark = pytest.mark.e2e

CHUNK = 7  # characters per streamed piece: fences, "$$" and "|---|" arrive split
FINISH_FRAME = re.compile(r'id="footer-\d+" class="run-footer" hx-swap-oob="true"')

CORPUS: dict[str, tuple[str, str]] = {
    # name: (answer, a selector that must render while the answer still streams)
    "headings": (
        "# Heading one\n\nSome *emphasis*, **strength**, ~~a strike~~ and `inline code`.\n\n"
        "## Heading two\n\nA paragraph\nover two lines.\n\n### Heading three\n\n---\n\nThe end.",
        "h2",
    ),
    "lists": (
        "Nested:\n\n- one\n- two\n  - two a\n  - two b\n    1. deep\n    2. deeper\n- three\n\n"
        "Loose:\n\n1. first\n\n2. second\n\n   with a second paragraph\n\n3. third\n\n"
        "Starting at 3:\n\n3. three\n4. four\n\nAfter the lists.",
        "ol li p",
    ),
    "table": (
        "## Languages\n\nThree of them:\n\n"
        "| Language | Typing | Since |\n|:---------|:------:|------:|\n"
        "| Python | dynamic | 1991 |\n| Rust | static | 2015 |\n| `Go` | **static** | 2009 |\n\n"
        "Tables end at a blank line.",
        "table tbody tr",
    ),
    "code": (
        "Python:\n\n```python\ndef fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1)"
        " + fib(n - 2)\n```\n\nJavaScript:\n\n```js\nconst add = (a, b) => a + b; // <b>\n```\n\n"
        'Shell, SQL and an unknown language:\n\n```bash\necho "$HOME" | wc -c\n```\n\n'
        "```sql\nSELECT name FROM users WHERE id = 1;\n```\n\n```nosuchlang\nkeep as text\n```\n\n"
        "    indented code\n\nDone.",
        "pre code.hljs .hljs-keyword",
    ),
    "maths": (
        "Euler: $e^{i\\pi} + 1 = 0$, and inline display $$\\int_0^1 x\\,dx = \\tfrac12$$ too.\n\n"
        "$$\n\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\n$$\n\n"
        "Prices stay text: $5 and $10.\n\nA broken one: $\\frac{1}{$ stays readable.",
        ".katex",
    ),
    "mermaid": (
        "A flow:\n\n```mermaid\ngraph TD\n  A[Ask] --> B{Tools?}\n  B -->|yes| C[Call a tool]\n"
        "  B -->|no| D[Answer]\n  C --> B\n```\n\nAnd a sequence:\n\n```mermaid\n"
        "sequenceDiagram\n  User->>Agent: question\n  Agent-->>User: answer\n```\n\nThat is all.",
        ".mermaid-diagram img",
    ),
    "tasks": (
        "To do:\n\n- [ ] write the tests\n- [x] read the issue\n- [X] vendor the libraries\n"
        "- not a task\n\n1. [ ] numbered task\n2. [x] done too\n\nNext steps follow.",
        "input.task-list-item-checkbox[checked]",
    ),
    "links_and_quotes": (
        'See [the docs](https://example.com/docs "Docs") and <https://example.org>.\n\n'
        "> A quote\n> over lines\n>\n> > and a nested one\n\n"
        "A remote image is a link: ![chart](https://example.com/c.png)\n\n"
        "[a reference][ref] defined below.\n\n[ref]: https://example.net/ref\n\nEnd.",
        "blockquote blockquote",
    ),
    "html_looking_text": (
        'Raw HTML stays text: <script>alert(1)</script> and <b onclick="x()">bold?</b>\n\n'
        "<img src=x onerror=alert(1)>\n\n[click me](javascript:alert(1)) "
        "[data](data:text/html,<script>alert(1)</script>)\n\n```html\n<script>alert(2)</script>\n"
        "```\n\nStill safe.",
        "pre code",
    ),
    "unclosed_fence": (
        "Here is code that never closes:\n\n## Setup\n\n```python\nimport os\n\n"
        "print(os.getcwd())\nfor i in range(3):\n    print(i)\n",
        "pre code .hljs-keyword",
    ),
}

# What must render before the whole answer has arrived, where it differs from the
# selector above: mermaid draws its first diagram once its frame has loaded, which can
# take longer than the stream (the diagram is checked while the final frame is held).
EARLY = {"mermaid": ".code-block pre code.language-mermaid"}

# The rendered answer, serialised with sorted attributes (attribute order is not shown).
SNAPSHOT = """(id) => {
  const body = document.querySelector(`#answer-${id} > .answer-body`);
  if (!body) return null;
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE) return node.data;
    if (node.nodeType !== Node.ELEMENT_NODE) return "";
    const attrs = [...node.attributes].map((a) => `${a.name}="${a.value}"`).sort().join(" ");
    const open = attrs ? `<${node.localName} ${attrs}>` : `<${node.localName}>`;
    return open + [...node.childNodes].map(walk).join("") + `</${node.localName}>`;
  };
  return [...body.childNodes].map(walk).join("");
}"""

# Records, while the answer streams: the first element of its rendering once three are
# shown (so a committed block), how much source had arrived when `selector` first
# rendered, and the DOM of the first frame painted after the final frame's swap.
WATCH = (
    """(selector) => {
  const take = """
    + SNAPSHOT
    + """;
  const seen = (window.__live = { early: null, firstAt: null, firstPaint: null });
  new MutationObserver(() => {
    const answer = document.querySelector(".answer.streaming");
    const body = answer && answer.querySelector(":scope > .answer-body");
    if (!body) return;
    if (!seen.early && body.children.length >= 3) seen.early = body.firstElementChild;
    if (seen.firstAt === null && body.querySelector(selector)) {
      seen.firstAt = answer.querySelector(".answer-src").textContent.length;
    }
  }).observe(document.getElementById("messages"), {
    childList: true, subtree: true, characterData: true, attributes: true,
  });
  document.getElementById("chat").addEventListener("htmx:wsAfterMessage", () => {
    const answer = document.querySelector("#messages .answer");
    if (seen.firstPaint || !answer || answer.classList.contains("streaming")) return;
    const id = answer.id.split("-")[1];
    requestAnimationFrame(() => { seen.firstPaint = seen.firstPaint || take(id); });
  });
}"""
)

SETTLED = """([id, text]) => {
  const md = window.agentsiteMarkdown;
  const answer = document.getElementById(`answer-${id}`);
  const source = answer && answer.querySelector(".answer-src");
  if (!md || !answer || md.pending() > 0) return false;
  return text === null || (source !== null && source.textContent === text);
}"""


def chunked(text: str, size: int = CHUNK) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class FinishGate:
    """Routes the page's websocket: frames pass, except the run's final frame and every
    frame after it, which wait for :meth:`release`."""

    page: Page
    held: list[str | bytes] = field(default_factory=list)
    holding: bool = True
    route: WebSocketRoute | None = None

    def __post_init__(self) -> None:
        self.page.route_web_socket(re.compile(r"/ws/conversations/"), self._connect)

    def _connect(self, route: WebSocketRoute) -> None:
        server = route.connect_to_server()
        self.route = route
        route.on_message(server.send)
        server.on_message(self._from_server)

    def _from_server(self, message: str | bytes) -> None:
        if self.holding and (self.held or FINISH_FRAME.search(str(message))):
            self.held.append(message)
        elif self.route is not None:
            self.route.send(message)

    def wait_held(self) -> None:
        """Dispatch Playwright's events until the final frame has been held."""
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while not self.held:
            assert time.monotonic() < deadline, "the run's final frame never came"
            self.page.wait_for_timeout(20)

    def release(self) -> None:
        self.holding = False
        assert self.route is not None
        for message in self.held:
            self.route.send(message)
        self.held.clear()


def settle(page: Page, run_id: int, text: str | None = None) -> None:
    """Wait until markdown.js has rendered everything it has (and ``text`` arrived)."""
    page.wait_for_function(SETTLED, arg=[run_id, text])


def snapshot(page: Page, run_id: int) -> str:
    html = page.evaluate(SNAPSHOT, run_id)
    assert html, "no rendered answer"
    return html


def stream(page: Page, llm: ScriptedLLM, text: str, **reply: Any) -> FinishGate:
    """Open a new conversation whose every LLM call streams ``text``; returns the gate
    that holds its run's final frame."""
    llm.script(default={"content": text, "chunks": chunked(text), "chunk_delay": 0.02} | reply)
    gate = FinishGate(page)
    new_conversation(page)
    return gate


# ------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("name", list(CORPUS))
def test_live_rendering_is_the_final_rendering(
    chat_page: Page, llm: ScriptedLLM, name: str
) -> None:
    text, selector = CORPUS[name]
    violations = Violations(chat_page)
    gate = stream(chat_page, llm, text)
    chat_page.evaluate(WATCH, EARLY.get(name, selector))
    send(chat_page, f"Show me {name}")
    run_id = latest_run(chat_page)
    answer = chat_page.locator(f"#answer-{run_id}")
    gate.wait_held()
    settle(chat_page, run_id, text)

    # (a) Rendered while streaming: the run is not finished for the page yet.
    expect(answer).to_have_class(re.compile(r"\bstreaming\b"))
    expect(answer.locator(f".answer-body {selector}").first).to_be_attached()
    first_at = chat_page.evaluate("() => window.__live.firstAt")
    assert first_at is not None and first_at < len(text), (name, first_at, len(text))
    live = snapshot(chat_page, run_id)
    height = answer.locator(".answer-body").evaluate("(el) => el.getBoundingClientRect().height")
    # (c) Committed blocks stayed the same nodes from early in the stream to its end.
    early = chat_page.evaluate("() => window.__live.early && window.__live.early.isConnected")
    assert early, f"{name}: the first block was re-created (or never committed)"

    # (b) The final frame swaps in the server's HTML: the same DOM, from the first frame.
    gate.release()
    expect(answer).not_to_have_class(re.compile(r"\bstreaming\b"))
    settle(chat_page, run_id)
    first_paint = chat_page.wait_for_function("() => window.__live.firstPaint").json_value()
    assert first_paint == live
    assert snapshot(chat_page, run_id) == live
    after = answer.locator(".answer-body").evaluate("(el) => el.getBoundingClientRect().height")
    assert after == height

    violations.assert_none(f"{name}, live")

    chat_page.reload()  # the server's HTML alone, enhanced at page load
    settle(chat_page, run_id)
    expect(answer.locator(f".answer-body {selector}").first).to_be_attached()
    assert snapshot(chat_page, run_id) == live
    violations.assert_none(f"{name}, after a reload")


def test_html_in_an_answer_stays_text(chat_page: Page, llm: ScriptedLLM) -> None:
    text, _ = CORPUS["html_looking_text"]
    gate = stream(chat_page, llm, text)
    gate.holding = False
    send(chat_page, "Try to inject")
    run_id = latest_run(chat_page)
    body = chat_page.locator(f"#answer-{run_id} .answer-body")
    expect(body).to_contain_text("Still safe.")
    expect(body).to_contain_text("<script>alert(1)</script>")
    assert body.locator("script, img, [onclick], [onerror]").count() == 0
    hrefs = body.locator("a").evaluate_all("(links) => links.map((a) => a.getAttribute('href'))")
    assert not [h for h in hrefs if h and re.match(r"\s*(javascript|data):", h, re.I)], hrefs


def test_the_copy_button_copies_the_code(
    chat_page: Page, llm: ScriptedLLM, alice_context: BrowserContext, app_server: str
) -> None:
    alice_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_server)
    code = "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    gate = stream(chat_page, llm, f"Here:\n\n```python\n{code}```\n\nDone.")
    gate.holding = False
    send(chat_page, "Code please")
    run_id = latest_run(chat_page)
    answer = chat_page.locator(f"#answer-{run_id}")
    expect(answer).not_to_have_class(re.compile(r"\bstreaming\b"))
    button = answer.get_by_role("button", name="Copy the code")
    expect(button).to_have_count(1)
    # The fence's language is named above the code (issue 47), and is not copied.
    expect(answer.locator(".code-block .code-language")).to_have_text("python")
    button.click()
    expect(button).to_have_class(re.compile(r"\bcopied\b"))
    assert chat_page.evaluate("() => navigator.clipboard.readText()") == code


CONTRAST = """(answer) => {
  const rgb = (color) => color.match(/[\\d.]+/g).slice(0, 4).map(Number);
  const luminance = ([r, g, b]) => {
    const lin = (c) => {
      c /= 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  };
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  return [...answer.querySelectorAll("pre code, pre code [class^=hljs-]")].map((el) => {
    const fg = luminance(rgb(getComputedStyle(el).color));
    const bg = luminance(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    return [el.className, el.textContent.slice(0, 20), Math.round(ratio * 100) / 100];
  });
}"""


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_code_is_readable_in_dark_and_light_mode(
    chat_page: Page, llm: ScriptedLLM, scheme: str
) -> None:
    chat_page.emulate_media(color_scheme=scheme)
    text, _ = CORPUS["code"]
    gate = stream(chat_page, llm, text)
    gate.holding = False
    send(chat_page, "Code please")
    run_id = latest_run(chat_page)
    answer = chat_page.locator(f"#answer-{run_id}")
    expect(answer).not_to_have_class(re.compile(r"\bstreaming\b"))
    settle(chat_page, run_id)
    ratios = answer.evaluate(CONTRAST)
    assert len({r[0] for r in ratios}) >= 5, ratios  # several kinds of token were coloured
    low = [r for r in ratios if r[2] < 4.5]
    assert not low, f"{scheme}: tokens below 4.5:1 against the code background: {low}"


def test_an_answer_reset_mid_run_renders_again(chat_page: Page, llm: ScriptedLLM) -> None:
    """The element is replaced mid-run (a catch-up re-renders the run block, as after a
    reconnect): the renderer starts again from the source it finds."""
    text = "## Before\n\n" + "word " * 40 + "\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nAfter."
    gate = stream(chat_page, llm, text)
    send(chat_page, "Reset me")
    run_id = latest_run(chat_page)
    answer = chat_page.locator(f"#answer-{run_id}")
    expect(answer.locator(".answer-body h2")).to_have_text("Before")
    # Replace the element as an out-of-band frame would, with what the source holds so far.
    chat_page.evaluate(
        """(id) => {
            const old = document.getElementById(`answer-${id}`);
            const copy = old.cloneNode(false);
            const source = old.querySelector(".answer-src").cloneNode(true);
            const body = document.createElement("div");
            body.className = "answer-body";
            copy.append(source, body);
            old.replaceWith(copy);
        }""",
        run_id,
    )
    gate.wait_held()
    settle(chat_page, run_id, text)
    live = snapshot(chat_page, run_id)
    assert "<h2>Before</h2>" in live and "<table>" in live
    gate.release()
    expect(answer).not_to_have_class(re.compile(r"\bstreaming\b"))
    settle(chat_page, run_id)
    assert snapshot(chat_page, run_id) == live
