"""A very long message is collapsed on the page with a "Show all" button (issue 47: a
100,000-character message filled screens); a short one is shown whole."""

from __future__ import annotations

import re

import pytest

from conversations import services

pytestmark = pytest.mark.django_db


def test_a_long_message_is_collapsed_with_a_button_to_show_it_all(
    user_client, user, chat_model, no_launch
) -> None:
    conversation = services.conversation_create(owner=user)
    long_text = "word " * 20_000  # 100,000 characters
    long, _, _ = services.message_post(conversation=conversation, user=user, content=long_text)
    page = user_client.get(f"/c/{conversation.pk}/").content.decode()
    block = re.search(rf'<div id="msg-{long.pk}" class="msg user">.*?</button>', page, re.S)
    assert block, "the long message is not on the page"
    html = block.group(0)
    assert f'<div class="content collapsed" id="msg-content-{long.pk}">' in html
    assert f'data-expands="#msg-content-{long.pk}" aria-expanded="false"' in html
    assert f"Show all ({len(long.content):,} characters)" in html
    assert long_text.strip() in page  # all of it is there, for copying and searching


def test_a_short_message_is_shown_whole(user_client, user, chat_model, no_launch) -> None:
    conversation = services.conversation_create(owner=user)
    short, _, _ = services.message_post(conversation=conversation, user=user, content="Hi")
    page = user_client.get(f"/c/{conversation.pk}/").content.decode()
    assert f'<div id="msg-{short.pk}" class="msg user"><div class="content">Hi</div>' in page
    assert "data-expands" not in page
