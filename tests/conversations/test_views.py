"""HTMX views: ownership on every URL, posting, pinning, list actions."""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations import services
from conversations.models import Conversation, Message, Run
from llms.models import LLMModel, Provider

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_launch(monkeypatch):
    monkeypatch.setattr("conversations.runs.launcher.launch", lambda run_id: None)


@pytest.fixture
def conversation(user, chat_model):
    return services.conversation_create(owner=user, title="Mine")


def test_every_url_is_404_for_another_user(client, other_user, conversation, user):
    message, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
    client.force_login(other_user)
    pk = conversation.pk
    gets = [f"/c/{pk}/"]
    posts = [
        f"/c/{pk}/messages/", f"/c/{pk}/rename/", f"/c/{pk}/archive/", f"/c/{pk}/delete/",
        f"/c/{pk}/model/", f"/runs/{run.pk}/cancel/", f"/runs/{run.pk}/retry/",
        f"/m/{message.pk}/pin/",
    ]  # fmt: skip
    for url in gets:
        assert client.get(url).status_code == 404, url
    for url in posts:
        assert client.post(url, {"content": "x", "title": "x"}).status_code == 404, url
    assert Conversation.objects.filter(pk=pk, title="Mine").exists()
    assert Message.objects.filter(conversation=conversation).count() == 1


def test_post_returns_message_run_block_and_new_title(user_client, user, chat_model):
    conversation = services.conversation_create(owner=user)
    response = user_client.post(
        f"/c/{conversation.pk}/messages/", {"content": "Hello <b>there</b>"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    html = response.content.decode()
    run = Run.objects.get()
    assert f'id="run-{run.pk}"' in html and "Hello &lt;b&gt;there&lt;/b&gt;" in html
    assert f'hx-post="/runs/{run.pk}/cancel/"' in html  # Stop button while active
    assert 'id="conversation-title"' in html and 'value="Hello &lt;b&gt;there&lt;/b&gt;"' in html


def test_followup_while_running_shows_inject_item(user_client, conversation, user):
    services.message_post(conversation=conversation, user=user, content="first")
    response = user_client.post(f"/c/{conversation.pk}/messages/", {"content": "and more"})
    html = response.content.decode()
    inject = Message.objects.get(kind="inject")
    # Below the run's answer (the steps take it in when the agent reads it).
    assert f'id="inject-{inject.pk}"' in html and "beforeend:#followups-" in html


def test_the_composer_has_stop_while_a_run_works_and_send_alone_after(
    user_client, conversation, user
):
    """The page renders the composer's state (templates/conversations/composer_state.html)
    as the live frames leave it: a reload mid-run shows Stop, after the run Send alone."""
    _message, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
    html = user_client.get(f"/c/{conversation.pk}/").content.decode()
    stop = html[html.index('id="composer-stop"') :]
    assert f'data-run="{run.pk}" data-state="running"' in stop.split(">", 1)[0]
    assert f'hx-post="/runs/{run.pk}/cancel/"' in stop.split("</span>", 1)[0]
    assert "Working…" in html[html.index('id="composer-status"') :].split("</div>", 1)[0]

    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)
    html = user_client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'data-state="running"' not in html and "composer-stop" in html


def test_empty_and_oversized_messages_get_clear_errors(user_client, conversation, settings):
    response = user_client.post(f"/c/{conversation.pk}/messages/", {"content": "  "})
    # 422, not 400: in debug mode django-htmx replaces the whole page with a 400 response.
    assert response.status_code == 422 and b"Type a message" in response.content
    assert response["HX-Reswap"] == "none" and b'id="form-error"' in response.content
    settings.AGENTSITE_MESSAGE_MAX_CHARS = 5
    response = user_client.post(f"/c/{conversation.pk}/messages/", {"content": "123456"})
    assert response.status_code == 413 and b"too long" in response.content
    assert Message.objects.count() == 0


def test_chat_page_renders_history_with_markdown_and_footer(user_client, conversation, user):
    message, run, _ = services.message_post(conversation=conversation, user=user, content="q")
    services.message_create(
        conversation=conversation, role="assistant", content="**bold** <script>x</script>", run=run
    )
    Run.objects.filter(pk=run.pk).update(
        status="succeeded", iterations=2, usage={"total_tokens": 42}, elapsed=1.5
    )
    run.events.create(
        conversation=conversation, seq=1, channel="done",
        payload={"answer": "x", "iterations": 2, "usage": {"total_tokens": 42}, "elapsed": 1.5},
    )  # fmt: skip
    html = user_client.get(f"/c/{conversation.pk}/").content.decode()
    assert "<strong>bold</strong>" in html and "<script>x</script>" not in html
    assert "2 steps" in html and "42 tokens" in html
    assert f'ws-connect="/ws/conversations/{conversation.pk}/?after=' in html


def test_pin_toggle_returns_pressed_button(user_client, conversation, user):
    message = services.message_create(conversation=conversation, role="user", content="keep")
    response = user_client.post(reverse("message_pin", args=[message.pk]), {"pinned": "1"})
    assert 'aria-pressed="true"' in response.content.decode()
    message.refresh_from_db()
    assert message.pinned
    user_client.post(reverse("message_pin", args=[message.pk]), {"pinned": "0"})
    message.refresh_from_db()
    assert not message.pinned


def test_list_rename_archive_delete(user_client, conversation):
    item = f'id="conversation-{conversation.pk}"'.encode()
    assert item in user_client.get("/").content
    user_client.post(f"/c/{conversation.pk}/rename/", {"title": "Renamed"})
    conversation.refresh_from_db()
    assert conversation.title == "Renamed"
    user_client.post(f"/c/{conversation.pk}/archive/", {"archived": "1"})
    assert item not in user_client.get("/").content
    assert item in user_client.get("/?archived=1").content
    user_client.post(f"/c/{conversation.pk}/delete/")
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_model_not_allowed_is_refused(user_client, conversation, chat_model):
    from django.contrib.auth.models import Group

    restricted = LLMModel.objects.create(
        provider=chat_model.provider, model_id="secret-model", enabled=True
    )
    restricted.allowed_groups.add(Group.objects.create(name="vip"))
    response = user_client.post(f"/c/{conversation.pk}/model/", {"model": restricted.pk})
    assert response.status_code == 422 and b'id="form-error"' in response.content
    conversation.refresh_from_db()
    assert conversation.model == chat_model


def test_first_message_titles_the_conversation_in_the_same_response(user_client, user, chat_model):
    untitled = services.conversation_create(owner=user)

    response = user_client.post(f"/c/{untitled.pk}/messages/", {"content": "Plan my  trip\nnow"})

    assert response.status_code == 200
    assert 'id="conversation-title" name="title" value="Plan my trip now"' in response.text
    assert 'hx-swap-oob="true"' in response.text
    second = user_client.post(f"/c/{untitled.pk}/messages/", {"content": "and more"})
    assert 'id="conversation-title"' not in second.text


def test_retry_answers_the_question_again_beside_the_failed_answer(client, user, conversation):
    client.force_login(user)
    message, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.INCOMPLETE)

    response = client.post(f"/runs/{run.pk}/retry/")

    assert response.status_code == 200
    retry = Run.objects.exclude(pk=run.pk).get(conversation=conversation)
    assert retry.trigger_message_id == message.pk and retry.status == Run.Status.QUEUED
    assert f'id="run-{retry.pk}"' in response.content.decode()
    assert Message.objects.filter(conversation=conversation).count() == 1  # no new question
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    # The new answer is shown; the attempt is one switch away.
    assert f'id="run-{retry.pk}"' in page and f'id="run-{run.pk}"' not in page
    assert "2/2" in page and f'hx-post="/runs/{run.pk}/select/"' in page


def test_retry_refuses_a_complete_answer_or_while_a_run_is_active(client, user, conversation):
    client.force_login(user)
    _, first, _ = services.message_post(conversation=conversation, user=user, content="one")
    Run.objects.filter(pk=first.pk).update(status=Run.Status.FAILED)
    _, second, _ = services.message_post(conversation=conversation, user=user, content="two")

    # "two" is still being answered; then it is answered completely.
    response = client.post(f"/runs/{first.pk}/retry/")
    assert (
        response.status_code == 409 and "Wait for the current answer" in response.content.decode()
    )
    Run.objects.filter(pk=second.pk).update(status=Run.Status.SUCCEEDED)
    response = client.post(f"/runs/{second.pk}/retry/")
    assert response.status_code == 422 and "Only a failed, stopped" in response.content.decode()
    assert Run.objects.filter(conversation=conversation).count() == 2


def test_the_demo_model_notice_follows_a_model_switch(user_client, conversation, chat_model):
    local = LLMModel.objects.create(
        provider=Provider.objects.create(name="bundled", kind="local", base_url="http://x/v1"),
        model_id="smollm2",
        display_name="SmolLM2 135M",
    )
    to_local = user_client.post(f"/c/{conversation.pk}/model/", {"model": local.pk})
    assert to_local.status_code == 200
    assert 'id="model-notice" hx-swap-oob="true"' in to_local.content.decode()
    assert "tiny offline demo model" in to_local.content.decode()

    back = user_client.post(f"/c/{conversation.pk}/model/", {"model": chat_model.pk})
    assert 'id="model-notice" hx-swap-oob="true"' in back.content.decode()
    assert "offline" not in back.content.decode()  # the notice is emptied
