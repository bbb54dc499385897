"""Knowledge bases as a user meets them (issue 45): real Chromium, real daphne (whose run
loop indexes in the background), the scripted LLM server.

A base is created on the Knowledge page, a text file holding a fact nobody could guess is
uploaded and becomes "ready" while the page stays open (the list polls), another file is
dropped on the upload box; the base is attached to a chat from its header, where it stays
after a reload; the model searches it, answers citing [1], and the answer's Sources open
the passage with the fact.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import Screenshot, latest_run, new_conversation, send, wait_finished

pytestmark = pytest.mark.e2e

BASE = "Lighthouse facts"
FACT = "The Quillmoor lighthouse is repainted teal every seven years."
QUERY = "Quillmoor lighthouse colour"

# A file dropped on an element, as the browser's drag and drop delivers it.
DROP = """([selector, name, text]) => {
  const data = new DataTransfer();
  data.items.add(new File([text], name, { type: "text/plain" }));
  const target = document.querySelector(selector);
  for (const type of ["dragover", "drop"]) {
    target.dispatchEvent(
      new DragEvent(type, { dataTransfer: data, bubbles: true, cancelable: true })
    );
  }
}"""


def document_row(page: Page, name: str):
    return page.locator("#documents tr").filter(has_text=name)


def test_a_base_is_filled_attached_to_a_chat_and_cited(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    page = chat_page
    page.goto("/")
    page.get_by_role("link", name="Knowledge", exact=True).click()
    expect(page.get_by_role("heading", name="Knowledge", exact=True)).to_be_visible()

    # A base without a name is refused beside the field, the description kept.
    page.get_by_label("Description").fill("Facts about lighthouses")
    page.get_by_role("button", name="Create knowledge base").click()
    expect(page.locator("#kb-name-error")).to_have_text("Give the knowledge base a name.")
    expect(page.get_by_label("Description")).to_have_value("Facts about lighthouses")
    page.get_by_label("Name").fill(BASE)
    page.get_by_role("button", name="Create knowledge base").click()
    expect(page.get_by_role("heading", name=BASE)).to_be_visible()

    # Uploaded, then ready without a reload: the page's own window object survives.
    page.evaluate("() => { window.__samePage = true; }")
    page.get_by_label("Files to add").set_input_files(
        {
            "name": "lighthouse.md",
            "mimeType": "text/markdown",
            "buffer": f"# Quillmoor\n\n{FACT}\n".encode(),
        }
    )
    page.get_by_role("button", name="Upload").click()
    expect(document_row(page, "lighthouse.md").locator(".status-badge")).to_have_text("ready")
    expect(document_row(page, "lighthouse.md").locator(".kb-chunks")).to_have_text("1")
    expect(page.locator("#upload-status")).to_have_text("Added 1 of 1 file.")

    # Dropped on the upload box, it is added too; an image is refused beside the field.
    page.evaluate(DROP, ["form[data-knowledge-upload]", "tides.txt", "High tide at noon."])
    expect(document_row(page, "tides.txt").locator(".status-badge")).to_have_text("ready")
    page.get_by_label("Files to add").set_input_files(
        {"name": "photo.png", "mimeType": "image/png", "buffer": b"\x89PNG\r\n\x1a\n" + b"\0" * 64}
    )
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#upload-errors")).to_contain_text("photo.png: An image has no text")
    expect(page.locator("#documents tbody tr")).to_have_count(2)
    # Removing a document asks first.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Remove tides.txt").click()
    expect(page.locator("#documents tbody tr")).to_have_count(1)
    assert page.evaluate("() => window.__samePage") is True
    screenshot(page)

    # Attached from the chat's header; the chip stays after a reload.
    new_conversation(page)
    page.get_by_label("Knowledge bases of this chat").click()
    page.get_by_role("checkbox", name=BASE).check()
    page.locator(".knowledge-picker").get_by_role("button", name="Save").click()
    chips = page.locator("#knowledge-chips")
    expect(chips).to_have_text(BASE)
    page.reload()
    expect(chips).to_have_text(BASE)

    llm.script(
        {"tool_calls": [{"name": "search_knowledge", "arguments": {"query": QUERY}}]},
        "It is repainted teal every seven years [1].",
    )
    send(page, "What colour is the Quillmoor lighthouse painted?")
    run_id = latest_run(page)
    wait_finished(page, run_id)
    [first, second] = llm.requests()
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert "search_knowledge" in offered
    result = [m for m in second["messages"] if m["role"] == "tool"][-1]["content"]
    assert result.startswith("[1] lighthouse.md, Quillmoor") and FACT in result

    # The numbered sources under the answer, live and after a reload; the inline [1] is
    # a link to the same passage.
    sources = page.get_by_role("list", name="Sources")
    expect(sources).to_contain_text("lighthouse.md")
    expect(page.get_by_role("link", name="Source 1: lighthouse.md")).to_be_visible()
    page.reload()
    expect(sources).to_contain_text("lighthouse.md")
    with page.context.expect_page() as opened:
        sources.get_by_role("link").first.click()
    passage = opened.value
    expect(passage.locator(".passage")).to_contain_text(FACT)
    expect(passage.get_by_role("heading", name="lighthouse.md")).to_be_visible()
    passage.close()


def test_the_header_control_works_by_keyboard_at_phone_width(
    chat_page: Page, screenshot: Screenshot
) -> None:
    page = chat_page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/knowledge/")
    page.get_by_label("Name").fill("Phone base")
    page.get_by_label("Name").press("Enter")
    expect(page.get_by_role("heading", name="Phone base")).to_be_visible()

    new_conversation(page)
    menu = page.get_by_label("Knowledge bases of this chat")
    menu.focus()
    page.keyboard.press("Enter")
    box = page.get_by_role("checkbox", name="Phone base")
    expect(box).to_be_visible()
    box.focus()
    page.keyboard.press("Space")
    expect(box).to_be_checked()
    page.locator(".knowledge-picker").get_by_role("button", name="Save").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#knowledge-chips")).to_contain_text("Phone base")
    # The menu fits the phone's width.
    body = page.locator(".chat-knowledge .chat-menu-body").bounding_box()
    assert body is not None and body["x"] >= 0 and body["x"] + body["width"] <= 390
    screenshot(page)
    assert re.search(r"/c/\d+/$", page.url)
