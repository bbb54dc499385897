"""The Settings page and a chat's Settings panel (issue 46) through the real URLconf,
middleware and templates: what is saved, every refusal beside its field with what was
typed kept and nothing changed, another user's chat a 404."""

from __future__ import annotations

import html
import re

import pytest

from conversations import services, user_settings
from conversations.models import Conversation
from tools.services import toolconfig_sync

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def text(response) -> str:
    body = re.sub(r"<[^>]+>", " ", response.content.decode())
    return " ".join(html.unescape(body).split())


def test_the_settings_page_saves_and_the_nav_links_it(user_client, user) -> None:
    page = user_client.get("/settings/")
    assert page.status_code == 200
    assert '<a href="/settings/">Settings</a>' in page.content.decode()
    assert '<option value="" selected>As my browser says</option>' in page.content.decode()
    saved = user_client.post(
        "/settings/",
        {"instructions": "Call me Al.", "language": "zh-hans", "timezone": "Europe/Paris",
         "theme": "dark"},
    )  # fmt: skip
    assert saved.status_code == 302 and saved["Location"] == "/settings/"
    row = user_settings.settings_for(user)
    assert (row.instructions, row.language, row.timezone, row.theme) == (
        "Call me Al.", "zh-hans", "Europe/Paris", "dark"
    )  # fmt: skip
    again = user_client.get("/settings/").content.decode()
    assert "Settings saved." in again
    assert "<option selected>Europe/Paris</option>" in again
    assert ">Call me Al.</textarea>" in again


def test_a_refused_setting_shows_beside_its_field_and_keeps_what_was_typed(
    user_client, user
) -> None:
    refused = user_client.post(
        "/settings/",
        {"instructions": "Keep this text.", "language": "", "timezone": "Mars/Base",
         "theme": "system"},
    )  # fmt: skip
    assert refused.status_code == 422
    body = refused.content.decode()
    assert re.search(r'id="settings-timezone-error"[^>]*>Unknown time zone', body)
    assert ">Keep this text.</textarea>" in body
    assert user_settings.settings_for(user).pk is None  # nothing saved


def test_the_chat_panel_shows_the_chat_settings_and_saves_them(user_client, user, chat_model):
    toolconfig_sync()
    conversation = services.conversation_create(owner=user)
    path = f"/c/{conversation.pk}/settings/"
    assert f'hx-get="{path}"' in user_client.get(f"/c/{conversation.pk}/").content.decode()
    panel = user_client.get(path, headers=HTMX)
    assert panel.status_code == 200
    body = panel.content.decode()
    assert 'value="calculator" checked' in body  # every tool, until the chat narrows them
    assert "Temperature 0–2" in text(panel)

    saved = user_client.post(
        path,
        {"system_prompt": "Be a pirate.", "temperature": "0.4", "top_p": "", "max_tokens": "500",
         "tools": ["calculator"]},
        headers=HTMX,
    )  # fmt: skip
    assert saved.status_code == 200, saved.content
    assert "Saved: the next answer uses these settings." in text(saved)
    conversation.refresh_from_db()
    assert conversation.system_prompt == "Be a pirate."
    assert conversation.params == {"temperature": 0.4, "max_tokens": 500}
    assert conversation.tools == ["calculator"]


def test_a_refused_chat_setting_changes_nothing(user_client, user, chat_model) -> None:
    toolconfig_sync()
    conversation = services.conversation_create(owner=user)
    path = f"/c/{conversation.pk}/settings/"
    for temperature, says in [("9", "temperature must be between 0 and 2"),
                              ("warm", "temperature must be a number.")]:  # fmt: skip
        refused = user_client.post(
            path,
            {"system_prompt": "Changed?", "temperature": temperature, "tools": ["calculator"]},
            headers=HTMX,
        )
        assert refused.status_code == 422
        body = refused.content.decode()
        assert re.search(rf'id="chat-temperature-error-{conversation.pk}"[^>]*>{says}', body)
        assert ">Changed?</textarea>" in body and f'value="{temperature}"' in body
    fresh = Conversation.objects.get(pk=conversation.pk)
    assert (fresh.system_prompt, fresh.params, fresh.tools) == ("", {}, None)


def test_another_users_chat_panel_is_a_404(client, other_user, user) -> None:
    conversation = services.conversation_create(owner=user)
    client.force_login(other_user)
    assert client.get(f"/c/{conversation.pk}/settings/", headers=HTMX).status_code == 404
    assert client.post(f"/c/{conversation.pk}/settings/", {}).status_code == 404


@pytest.mark.parametrize(
    ("theme", "root", "light_css", "dark_css"),
    [
        ("system", '<html lang="en">',
         'a11y-light.min.css" media="not all and (prefers-color-scheme: dark)"',
         'a11y-dark.min.css" media="(prefers-color-scheme: dark)"'),
        ("dark", '<html lang="en" data-theme="dark">', None, 'a11y-dark.min.css">'),
        ("light", '<html lang="en" data-theme="light">', 'a11y-light.min.css">', None),
    ],
)  # fmt: skip
def test_the_chosen_theme_pins_the_pages_colours(
    user_client, user, theme, root, light_css, dark_css
) -> None:
    user_settings.settings_update(user, theme=theme)
    page = user_client.get("/").content.decode()
    assert root in page
    assert (light_css in page) if light_css else ("a11y-light" not in page)
    assert (dark_css in page) if dark_css else ("a11y-dark" not in page)
