"""The interface in Chinese and Japanese (issue 46), as a user switches it: the header's
language menu turns every page, the live answer and the scripts' words into the language
chosen; the choice follows the user to another browser; the model is told to answer in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polib
import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import ScriptedLLM, log_in
from tests.e2e.test_chat_flows import latest_run, new_conversation, wait_finished
from tests.i18n.untranslated import LOCALE, django_untranslated, english_left, kept_words

pytestmark = pytest.mark.e2e

# The test's data: user and model names (scripted-model, scripted-vision), a tool, the
# language menu's "English", the keys the shortcuts name, and "UTC".
ALLOWED = {"agentsite", "bob", "scripted", "model", "vision", "calculator", "english", "esc", "utc"}


def translated(text: str, catalogue: str) -> str:
    for entry in polib.pofile(str(LOCALE / catalogue / "LC_MESSAGES" / "django.po")):
        if entry.msgid == text and not entry.msgctxt:
            return entry.msgstr
    raise AssertionError(f"{text!r} is not in the {catalogue} catalogue")


@pytest.fixture
def bob(new_context: Callable[..., BrowserContext]) -> Iterator[Page]:
    """bob in a browser that asks for English; his language is reset afterwards."""
    context = new_context(locale="en-US")
    page = context.new_page()
    log_in(page, "bob")
    yield page
    token = next(c["value"] for c in context.cookies() if c["name"] == "csrftoken")
    page.request.patch("/api/me/settings", data={"language": ""}, headers={"X-CSRFToken": token})
    context.close()


def assert_no_english(page: Page) -> None:
    left = english_left(page.content(), kept_words() | ALLOWED, django_untranslated("ja"))
    assert not left, "English left on the page:\n" + "\n".join(left)


@pytest.mark.parametrize(("code", "catalogue"), [("zh-hans", "zh_Hans"), ("ja", "ja")])
def test_the_interface_switches_language_everywhere(
    bob: Page, llm: ScriptedLLM, new_context: Callable[..., BrowserContext], code, catalogue
) -> None:
    new_conversation(bob)
    bob.get_by_label("Language").select_option(code)
    expect(bob.locator("html")).to_have_attribute("lang", code)
    expect(bob.get_by_role("link", name=translated("Chats", catalogue), exact=True)).to_be_visible()
    bob.wait_for_load_state()  # the page's deferred scripts (Enter sends) have run

    llm.script(
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+3"}}]},
        "五。",
    )
    box = bob.locator("#composer textarea")
    box.fill("二加三？")
    box.press("Enter")
    run = latest_run(bob)
    wait_finished(bob, run)
    # Live: the tool card, the footer and the scripts' buttons, all in the language.
    assert_no_english(bob)
    system = llm.requests()[-1]["messages"][0]["content"]
    language = {"zh-hans": "Simplified Chinese", "ja": "Japanese"}[code]
    assert f"The user's language is {language}" in system

    bob.reload()
    wait_finished(bob, run)
    assert_no_english(bob)
    bob.goto("/settings/")
    assert_no_english(bob)

    elsewhere = new_context(locale="en-US")
    page = elsewhere.new_page()
    log_in(page, "bob")
    expect(page.locator("html")).to_have_attribute("lang", code)
    elsewhere.close()
