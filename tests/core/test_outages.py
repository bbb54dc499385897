"""An outage of the database or Redis answers 503 with a message a user can act on; the
composer keeps the typed text (the page is not swapped)."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from conversations import services
from conversations.http.tokens import token_create
from conversations.models import Message

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(user, chat_model, monkeypatch):
    monkeypatch.setattr("conversations.runs.launcher.launch", lambda run_id: None)
    return services.conversation_create(owner=user)


def database_down(*args, **kwargs):
    raise OperationalError("could not connect to server: Connection refused")


def test_a_message_posted_during_an_outage_gets_a_clear_503(user_client, conversation, monkeypatch):
    monkeypatch.setattr(services, "message_post", database_down)

    response = user_client.post(
        f"/c/{conversation.pk}/messages/", {"content": "still here?"}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 503 and response["Retry-After"]
    assert response["HX-Reswap"] == "none"  # the composer and the page stay as they are
    html = response.content.decode()
    assert 'id="form-error"' in html and "Nothing you typed was lost" in html
    assert "Connection refused" not in html
    assert not Message.objects.filter(content="still here?").exists()


def test_the_api_answers_503_json_during_an_outage(client, user, conversation, monkeypatch):
    def redis_down(*args, **kwargs):
        raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379")

    monkeypatch.setattr(services, "message_post", redis_down)
    _token, raw = token_create(user=user, name="script")

    response = client.post(
        f"/api/conversations/{conversation.pk}/messages",
        {"content": "hi"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )

    assert response.status_code == 503
    assert "briefly unavailable" in response.json()["error"]
    assert "6379" not in response.content.decode()


def test_a_page_load_during_an_outage_is_a_short_503_page(user_client, conversation, monkeypatch):
    monkeypatch.setattr("conversations.pages.timeline.conversation_timeline", database_down)

    response = user_client.get(f"/c/{conversation.pk}/")

    assert response.status_code == 503
    assert b"Briefly unavailable" in response.content
