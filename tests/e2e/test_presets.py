"""Presets in a real browser (issue 46): alice makes a preset with a system prompt and a
starter and shares it with her group; bob, in that group, sees it read-only, starts a
chat from its starter, and the model gets the preset's system prompt."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import ScriptedLLM, _manage, log_in
from tests.e2e.test_chat_flows import latest_run, wait_finished

pytestmark = pytest.mark.e2e

GROUP = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from conversations.models import Preset

team, _ = Group.objects.get_or_create(name="e2e crew")
for name in ("alice", "bob"):
    user = get_user_model().objects.get(username=name)
    (user.groups.add if {on} else user.groups.remove)(team)
if not {on}:
    Preset.objects.filter(name="Deck hand").delete()
"""


@pytest.fixture
def crew(server_env: dict[str, str]) -> Iterator[None]:
    """alice and bob in one group (for this test only)."""
    _manage(server_env, "shell", "-c", GROUP.format(on=True))
    try:
        yield
    finally:
        _manage(server_env, "shell", "-c", GROUP.format(on=False))


def test_a_shared_preset_starts_a_colleagues_chat(
    chat_page: Page,
    new_context: Callable[[], BrowserContext],
    llm: ScriptedLLM,
    crew: None,
) -> None:
    page = chat_page
    page.goto("/presets/")
    form = page.locator("form.preset-form")
    form.get_by_label("Name").fill("Deck hand")
    form.get_by_label("System prompt").fill("Answer as a deck hand of the Endeavour.")
    form.get_by_label("Starter prompt 1").fill("Describe the rigging")
    form.get_by_label("e2e crew").check()
    form.get_by_role("button", name="Create preset").click()
    expect(page.get_by_text("Preset “Deck hand” created.")).to_be_visible()

    context = new_context()
    try:
        bob = context.new_page()
        log_in(bob, "bob")
        bob.goto("/presets/")
        card = bob.locator(".preset-card").filter(has_text="Deck hand")
        expect(card).to_contain_text("Shared by alice")
        card.get_by_role("link", name="Start a chat with Deck hand").click()
        expect(bob.get_by_role("heading", name="New chat: Deck hand")).to_be_visible()

        llm.script("The shrouds hold the mast.")
        bob.get_by_role("button", name="Describe the rigging").click()
        expect(bob).to_have_url(re.compile(r"/c/\d+/$"))
        wait_finished(bob, latest_run(bob))
        request = llm.requests()[-1]
        system = request["messages"][0]["content"]
        assert "## This conversation's instructions\n\nAnswer as a deck hand" in system
        assert request["messages"][-1]["content"] == "Describe the rigging"
    finally:
        context.close()
