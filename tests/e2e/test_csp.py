"""The Content-Security-Policy in a real browser (issue 28): real Chromium, real daphne.

Every main page loads with the policy and without one violation (Chromium reports each
as a ``securitypolicyviolation`` event and a console error); the chat still streams over
its websocket (``connect-src 'self'``); the behaviours that were inline handlers still
work; and a remote image in an answer is shown as a link: a real loopback server the
image points at receives nothing, live or after a reload.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Page, WebSocket, expect

from tests.csp import parse_policy
from tests.e2e.conftest import ScriptedLLM, _manage, log_in
from tests.e2e.test_chat_flows import (
    Screenshot,
    calculator_call,
    latest_run,
    new_conversation,
    send,
    wait_finished,
)

pytestmark = pytest.mark.e2e

ADMIN = ("root", "root-e2e-pw-5520")

# Runs in every document before its own scripts: records the violations Chromium reports.
WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(
    `${e.effectiveDirective} blocked ${e.blockedURI || "(inline)"}` +
      ` at ${e.sourceFile}:${e.lineNumber}`
  );
});
"""


# -------------------------------------------------------------------------- helpers


class Violations:
    """The CSP violations of one tab: its console errors and the pages' own reports."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.console: list[str] = []
        page.add_init_script(WATCH_VIOLATIONS)
        page.on("console", self._console)

    def _console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
            self.console.append(message.text)

    def assert_none(self, where: str) -> None:
        # Reports are queued as tasks: let the page run the ones already due.
        reported = self.page.evaluate(
            "() => new Promise((r) => setTimeout(() => r(window.__cspViolations || []), 50))"
        )
        assert not reported and not self.console, f"{where}: {reported + self.console}"


def visit(page: Page, violations: Violations, url: str) -> None:
    """Open ``url``: a 200 with the strict policy, loaded without a violation."""
    response = page.goto(url)
    assert response is not None and response.status == 200, (url, response and response.status)
    policy = parse_policy(response.headers.get("content-security-policy", ""))
    assert policy.get("script-src") == ["'self'"] and policy.get("style-src") == ["'self'"], (
        url,
        policy,
    )
    assert policy.get("connect-src") == ["'self'"] and policy.get("frame-ancestors") == ["'none'"]
    page.wait_for_load_state("load")
    violations.assert_none(url)


class RemoteHost:
    """A real HTTP server on loopback standing for another host: it records every request."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                host.requests.append(self.path)
                body = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c")
                body += bytes.fromhex("00000000010001000002024401003b")  # a 1x1 GIF
                self.send_response(200)
                self.send_header("Content-Type", "image/gif")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def remote_host() -> Iterator[RemoteHost]:
    host = RemoteHost()
    try:
        yield host
    finally:
        host.close()


@pytest.fixture(scope="module")
def admin_user(app_server: str, server_env: dict[str, str]) -> tuple[str, str]:
    """A superuser in the app's database (the shared fixtures create plain users only)."""
    name, password = ADMIN
    env = server_env | {"DJANGO_SUPERUSER_PASSWORD": password}
    _manage(env, "createsuperuser", "--noinput", "--username", name, "--email", "root@e2e.test")
    return ADMIN


@pytest.fixture
def admin_page(
    new_context: Callable[[], BrowserContext], admin_user: tuple[str, str]
) -> Iterator[tuple[Page, Violations]]:
    """A tab of a new browser context, watched for violations, logged in as the superuser."""
    context = new_context()
    page = context.new_page()
    violations = Violations(page)
    visit(page, violations, "/accounts/login/")
    log_in(page, *admin_user)
    violations.assert_none("logging in")
    try:
        yield page, violations
    finally:
        context.close()


# ---------------------------------------------------------------------------- flows


def test_remote_image_in_an_answer_is_a_link_and_never_loads(
    chat_page: Page, llm: ScriptedLLM, remote_host: RemoteHost, screenshot: Screenshot
) -> None:
    leak = remote_host.url("/leak.gif?q=the+conversation+text")
    raw = remote_host.url("/raw.gif")
    chunks = [
        "Here is the chart: ",
        f"![sales chart]({leak})",
        f'\n\nand the raw one: <img src="{raw}">',
        "\n\nand a local one: ![dot](data:image/gif;base64,R0lGODlhAQABAAAAACw=)",
    ]
    llm.script("".join(chunks), {"chunks": chunks})  # the agent's step, then the answer
    violations = Violations(chat_page)
    conversation_id = new_conversation(chat_page)
    send(chat_page, "Show me the chart")
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)

    for moment in ("live", "after a reload"):
        answer = chat_page.locator(f"#answer-{run_id}")
        link = answer.locator("a.remote-image")
        expect(link).to_have_text("sales chart")
        expect(link).to_have_attribute("href", leak)
        expect(link).to_have_attribute("target", "_blank")
        expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
        expect(answer).to_contain_text(f'<img src="{raw}">')  # raw HTML stays text
        expect(answer.locator("img")).to_have_count(1)  # the data: image only
        expect(answer.locator("img")).to_have_attribute("src", re.compile(r"^data:image/gif"))
        violations.assert_none(moment)  # the renderer, not the CSP, kept the image out
        assert remote_host.requests == [], moment
        if moment == "live":
            chat_page.goto(f"/c/{conversation_id}/")
            chat_page.wait_for_load_state("load")
    screenshot(chat_page)

    # The server does answer: had the page asked it for the image, it would be recorded.
    urllib.request.urlopen(remote_host.url("/control"), timeout=5).read()
    assert remote_host.requests == ["/control"]


def test_app_pages_load_without_a_violation_and_the_chat_streams(
    admin_page: tuple[Page, Violations], llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    page, violations = admin_page
    visit(page, violations, "/")
    visit(page, violations, "/?archived=1")
    visit(page, violations, "/settings/tokens/")

    sockets: list[str] = []
    frames: list[str | bytes] = []

    def opened(ws: WebSocket) -> None:
        sockets.append(ws.url)
        ws.on("framereceived", lambda payload: frames.append(payload))

    page.on("websocket", opened)
    chunks = [
        "6 × 7 is **42**:\n\n",
        "```python\nprint(6 * 7)  # 42\n```\n\n",
        "Maths: $6 \\times 7 = 42$ and\n\n$$\n\\sqrt{1764} = 42\n$$\n\n",
        "| a | b |\n|:--|--:|\n| 6 | 7 |\n\n- [x] done\n\n",
        "```mermaid\ngraph LR\n  Six --> Product\n  Seven --> Product\n```\n",
    ]
    llm.script(calculator_call("6*7"), "".join(chunks), {"chunks": chunks})
    conversation_id = new_conversation(page)
    violations.assert_none("a new conversation")
    send(page, "What is 6*7?")
    run_id = latest_run(page)
    wait_finished(page, run_id)
    answer = page.locator(f"#answer-{run_id}")
    expect(answer.locator("strong")).to_have_text("42")
    # Highlighted (highlight.js) with classes its stylesheet colours, typeset by KaTeX and
    # drawn by mermaid (in its own sandboxed frame), without a violation of the policy.
    keyword = answer.locator("pre code span.hljs-built_in").first
    expect(keyword).to_have_text("print")
    expect(answer.locator(".katex")).to_have_count(2)
    expect(answer.locator(".mermaid-diagram img")).to_be_visible()
    expect(answer.locator("input[type=checkbox][checked]")).to_be_disabled()
    # The frame mermaid draws in has its own, sandboxed policy, and breaks it neither.
    (frame,) = [f for f in page.frames if "/markdown/mermaid-frame/" in f.url]
    assert frame.evaluate("() => window.__cspViolations") == []
    assert keyword.evaluate("(el) => getComputedStyle(el).color") != answer.evaluate(
        "(el) => getComputedStyle(el).color"
    )
    expect(page.locator(f"#card-{run_id}-1")).to_have_class(re.compile(r"\bok\b"))
    expect(page.locator("#composer textarea")).to_have_value("")  # the listener reset it
    violations.assert_none("the streamed answer")
    # The frames came over the page's websocket to this origin: connect-src 'self' covers it.
    origin = page.url.split("/c/")[0]
    assert [url.split("/ws/")[0] for url in sockets] == [origin.replace("http", "ws", 1)]
    assert any("42" in str(frame) for frame in frames), frames[:5]

    visit(page, violations, f"/c/{conversation_id}/")
    expect(answer.locator("pre code span.hljs-built_in").first).to_have_text("print")
    expect(answer.locator(".mermaid-diagram img")).to_be_visible()
    violations.assert_none("the answer after a page load")
    screenshot(page)


def test_behaviours_that_were_inline_handlers_still_work(
    admin_page: tuple[Page, Violations],
) -> None:
    page, violations = admin_page
    conversation_id = new_conversation(page)

    title = page.locator("#conversation-title")  # data-autosubmit: a change renames
    title.fill("Renamed under the CSP")
    with page.expect_response(lambda r: r.url.endswith("/rename/") and r.status == 302):
        title.press("Tab")
    page.wait_for_load_state("load")
    page.reload()
    expect(page.locator("#conversation-title")).to_have_value("Renamed under the CSP")

    visit(page, violations, "/")  # data-confirm: nothing is deleted unless the user agrees
    row = page.locator(f"#conversation-{conversation_id}")
    page.once("dialog", lambda dialog: dialog.dismiss())
    row.locator("summary").click()
    row.get_by_role("button", name="Delete").click()
    expect(row).to_be_visible()
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete").click()
    expect(page.locator(f"#conversation-{conversation_id}")).to_have_count(0)

    visit(page, violations, "/settings/tokens/")  # data-select-on-focus: ready to copy
    page.get_by_label("Name").fill("csp-e2e")
    page.get_by_role("button", name="Create token").click()
    page.wait_for_load_state("load")  # the behaviours are a deferred script
    token = page.get_by_label("New API token")
    token.focus()
    selected = token.evaluate("(el) => el.value.substring(el.selectionStart, el.selectionEnd)")
    assert selected and selected == token.input_value()
    violations.assert_none("the behaviours")


def test_admin_pages_load_without_a_violation(admin_page: tuple[Page, Violations]) -> None:
    page, violations = admin_page
    visit(page, violations, "/admin/")
    # Every model's list and add form, then the first object's change form of each list.
    links = page.locator("#content-main a[href^='/admin/']").evaluate_all(
        "(links) => [...new Set(links.map((a) => a.getAttribute('href')))]"
    )
    assert any(link.endswith("/llmmodel/") for link in links), links
    changes: list[str] = []
    for link in links:
        visit(page, violations, link)
        first = page.locator("#result_list tbody th a").first
        if link.endswith("/") and not link.endswith("/add/") and first.count():
            changes.append(first.get_attribute("href") or "")
    for link in changes:
        visit(page, violations, link)
    assert any("/llmmodel/" in link for link in changes), changes  # capabilities.html
    visit(page, violations, "/admin/llms/usagerecord/")  # its totals tables


def test_the_watch_sees_what_the_policy_refuses(admin_page: tuple[Page, Violations]) -> None:
    """The checks above would catch a violation: an inline style and script are refused."""
    page, violations = admin_page
    visit(page, violations, "/")
    page.evaluate(
        """() => {
            document.body.insertAdjacentHTML("beforeend", '<p style="color: red">x</p>');
            const script = document.createElement("script");
            script.textContent = "window.__ran = true";
            document.body.append(script);
        }"""
    )
    with pytest.raises(AssertionError) as refused:
        violations.assert_none("injected")
    assert "style-src-attr" in str(refused.value) and "script-src-elem" in str(refused.value)
    assert page.evaluate("() => window.__ran === undefined")
    assert any("Content Security Policy" in line for line in violations.console)


ARTIFACTS_SCRIPT = """
import json
import engine
from tools.artifacts import artifact_save

def save(name, mime, content):
    data = content.encode()
    row = artifact_save(
        conversation_id={conversation}, run_id={run}, tool_name="python",
        artifact=engine.Artifact(name, mime, len(data), None, data),
    )
    return row.pk

print(json.dumps({{
    "markdown": save("notes.md", "text/markdown", "# Notes\\n\\n```python\\nprint(1)\\n```\\n"),
    "html": save("report.html", "text/html", (
        "<h1 style='color: rgb(255, 0, 0)'>Report</h1>"
        "<script>window.parent.document.title = 'pwned'; document.title = 'ran';</script>"
    )),
}}))
"""


def test_artifact_previews_run_nothing_and_load_only_their_stylesheets(
    chat_page: Page, llm: ScriptedLLM, server_env: dict[str, str]
) -> None:
    llm.script({"chunks": ["Done."]})
    conversation_id = new_conversation(chat_page)
    send(chat_page, "Make a report")
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    output = _manage(
        server_env, "shell", "-c", ARTIFACTS_SCRIPT.format(conversation=conversation_id, run=run_id)
    )
    ids = json.loads(output.strip().splitlines()[-1])
    violations = Violations(chat_page)

    # A markdown document on its own: sandboxed, yet its stylesheets ('self') apply.
    visit_artifact = chat_page.goto(f"/artifacts/{ids['markdown']}/preview/")
    assert visit_artifact is not None and visit_artifact.status == 200
    policy = parse_policy(visit_artifact.headers["content-security-policy"])
    assert policy["sandbox"] == [] and policy["default-src"] == ["'none'"]
    expect(chat_page.locator("pre code span.nb")).to_have_text("print")
    expect(chat_page.locator("body")).to_have_css("margin-top", "16px")  # artifact.css
    # No page script runs in a sandboxed document (not even the watch): the console tells.
    assert violations.console == [], violations.console

    # In the chat page, as a tool card loads them (the artifact-list partial, through htmx):
    # the markdown inline and highlighted, the tool's HTML in its sandboxed frame, shown but
    # with its script and inline style refused.
    chat_page.goto(f"/c/{conversation_id}/")
    chat_page.evaluate(
        "(url) => htmx.ajax('GET', url, {target: '#messages', swap: 'beforeend'})",
        f"/runs/{run_id}/artifacts/?tool=python",
    )
    expect(chat_page.locator(".artifact__markdown pre code span.nb")).to_have_text("print")
    heading = chat_page.frame_locator(".artifact__frame").locator("h1")
    expect(heading).to_have_text("Report")
    assert heading.evaluate("(el) => getComputedStyle(el).color") != "rgb(255, 0, 0)"
    assert heading.evaluate("(el) => el.ownerDocument.title") == ""  # its script never ran
    assert chat_page.title() != "pwned"
