"""Files in a message, as a user attaches them (issue 45): a text file and a PDF reach the
model with the question, an image goes to a model with vision as an image part, and a
model without vision refuses it on the page, keeping the typed text and the file."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import VISION_MODEL, ScriptedLLM
from tests.e2e.test_chat_flows import latest_run, new_conversation, wait_finished
from tests.files.builders import pdf_with_text, png

pytestmark = pytest.mark.e2e


def attach(page: Page, name: str, mime: str, data: bytes) -> None:
    """Pick a file with the composer's Attach button, as a user would, and wait until
    it has uploaded (its chip shows a size)."""
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Attach files").click()
    chooser.value.set_files({"name": name, "mimeType": mime, "buffer": data})
    chip = page.locator(".composer-files .file-chip").filter(has_text=name)
    expect(chip.locator(".file-size")).not_to_have_text("uploading…")


def user_content(request: dict) -> object:
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def test_a_text_file_and_a_pdf_go_with_the_question_and_stay_after_reload(
    chat_page: Page, llm: ScriptedLLM
) -> None:
    llm.script("The notes list two fruits; the report is about figs.")
    new_conversation(chat_page)
    attach(chat_page, "notes.md", "text/markdown", b"- apple\n- pear\n")
    # A name no header could carry as it is: the upload encodes it (RFC 6266).
    report = "Rapport d'été (1).pdf"
    attach(chat_page, report, "application/pdf", pdf_with_text(["Figs grow in June."]))
    chat_page.locator("#composer textarea").fill("What do these say?")
    chat_page.get_by_role("button", name="Send").click()
    wait_finished(chat_page, latest_run(chat_page))
    expect(chat_page.locator(".composer-files .file-chip")).to_have_count(0)

    content = user_content(llm.requests()[-1])
    assert content.startswith("What do these say?")
    assert '<file name="notes.md"' in content and "- apple\n- pear" in content
    assert f'<file name="{report}"' in content and "Figs grow in June." in content

    chat_page.reload()
    chips = chat_page.locator("#messages .msg.user .file-chip")
    expect(chips).to_have_count(2)
    expect(chips.first).to_contain_text("notes.md")
    expect(chips.nth(1)).to_contain_text(report)


def test_an_image_needs_a_model_with_vision(chat_page: Page, llm: ScriptedLLM) -> None:
    llm.script("A red square.")
    new_conversation(chat_page)
    attach(chat_page, "square.png", "image/png", png())
    box = chat_page.locator("#composer textarea")
    box.fill("What is this?")
    chat_page.get_by_role("button", name="Send").click()

    # The default model cannot see: refused on the page, the text and the file kept.
    expect(chat_page.locator("#form-error")).to_contain_text("cannot read images")
    expect(box).to_have_value("What is this?")
    expect(chat_page.locator(".composer-files .file-chip")).to_have_count(1)
    assert llm.requests() == []

    with chat_page.expect_response(lambda r: "/model" in r.url and r.request.method == "POST"):
        chat_page.get_by_label("Model").select_option(label=VISION_MODEL)
    chat_page.get_by_role("button", name="Send").click()
    wait_finished(chat_page, latest_run(chat_page))

    [request] = llm.requests()
    assert request["model"] == VISION_MODEL
    parts = user_content(request)
    assert isinstance(parts, list), json.dumps(request)[:500]
    assert parts[0]["text"].startswith("What is this?")
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    expect(chat_page.locator("#messages .msg.user .file-chip img")).to_have_count(1)
