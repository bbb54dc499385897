"""The Presets pages and a new chat started from a preset (issue 46), through the real
URLconf, middleware and templates: create, refuse beside the field (what was typed kept),
edit your own, view a shared one read-only (a 404 to change it), delete; the new-chat
page set up by a preset offers its starters, and a starter starts the chat with the
preset's settings."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import Group

from conversations.models import Conversation, Preset
from tools.services import toolconfig_sync

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def text(response) -> str:
    body = re.sub(r"<[^>]+>", " ", response.content.decode())
    return " ".join(html.unescape(body).split())


def form(**changes: object) -> dict[str, object]:
    base = {"name": "Pirate", "description": "Talks like a pirate", "model": "", "mode": "react",
            "system_prompt": "Speak like a pirate.", "temperature": "", "top_p": "",
            "max_tokens": "", "starter_1": "Say ahoy", "starter_2": "", "starter_3": "",
            "starter_4": ""}  # fmt: skip
    return base | changes


def test_create_then_start_a_chat_from_a_starter(user_client, user, chat_model, no_launch):
    toolconfig_sync()
    created = user_client.post("/presets/", form(model=str(chat_model.pk), tools=["calculator"]))
    assert created.status_code == 302 and created["Location"] == "/presets/"
    preset = Preset.objects.get()
    assert (preset.owner, preset.tools, preset.starters) == (user, ["calculator"], ["Say ahoy"])
    listing = user_client.get("/presets/")
    assert "Preset “Pirate” created." in text(listing)
    assert f'href="/c/new/?preset={preset.pk}"' in listing.content.decode()

    new_chat = user_client.get(f"/c/new/?preset={preset.pk}").content.decode()
    assert "New chat: Pirate" in new_chat and "Talks like a pirate" in new_chat
    assert f'<input type="hidden" name="preset" value="{preset.pk}">' in new_chat
    assert (
        '<input type="hidden" name="content" value="Say ahoy">'
        '<button type="submit" class="starter">Say ahoy</button>' in new_chat
    )

    started = user_client.post(
        "/c/new/", {"content": "Say ahoy", "preset": str(preset.pk)}, headers=HTMX
    )
    assert started.status_code == 200, started.content
    conversation = Conversation.objects.get()
    assert (conversation.preset, conversation.system_prompt, conversation.tools) == (
        preset, "Speak like a pirate.", ["calculator"]
    )  # fmt: skip
    assert conversation.messages.get().content == "Say ahoy"


def test_a_refused_preset_shows_why_and_keeps_what_was_typed(user_client, chat_model) -> None:
    refused = user_client.post("/presets/", form(temperature="9", system_prompt="Keep me."))
    assert refused.status_code == 422
    body = refused.content.decode()
    assert re.search(
        r'id="preset-temperature-error"[^>]*>temperature must be between 0 and 2', body
    )
    assert ">Keep me.</textarea>" in body and 'value="9"' in body
    assert not Preset.objects.exists()


def test_edit_and_delete_your_preset(user_client, user, chat_model) -> None:
    preset = Preset.objects.create(owner=user, name="Old", starters=["a"])
    saved = user_client.post(f"/presets/{preset.pk}/", form(name="New", starter_1="b"))
    assert saved.status_code == 302
    preset.refresh_from_db()
    assert (preset.name, preset.starters) == ("New", ["b"])
    assert user_client.post(f"/presets/{preset.pk}/delete/").status_code == 302
    assert not Preset.objects.exists()


def test_a_shared_preset_is_read_only(client, user, other_user, chat_model) -> None:
    team = Group.objects.create(name="team")
    user.groups.add(team)
    preset = Preset.objects.create(owner=other_user, name="Bob's", system_prompt="Be Bob.")
    preset.shared_groups.add(team)
    client.force_login(user)
    page = client.get(f"/presets/{preset.pk}/")
    assert page.status_code == 200
    assert "Shared by bob" in text(page) and '<form method="post" action="/presets/' not in (
        page.content.decode()
    )
    assert client.post(f"/presets/{preset.pk}/", form(name="Mine")).status_code == 404
    assert client.post(f"/presets/{preset.pk}/delete/").status_code == 404
    private = Preset.objects.create(owner=other_user, name="Private")
    assert client.get(f"/presets/{private.pk}/").status_code == 404
    assert client.get(f"/c/new/?preset={private.pk}").status_code == 404
