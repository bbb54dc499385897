"""Services and selectors: messages are saved first, runs start or absorb follow-ups."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import selectors, services
from conversations.models import Conversation, Message, Run
from conversations.pages import timeline
from conversations.runs import lifecycle
from core.errors import ApplicationError

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_launch(monkeypatch):
    """Record launches instead of executing runs (the runner is tested separately)."""
    launched: list[int] = []
    monkeypatch.setattr("conversations.runs.launcher.launch", launched.append)
    return launched


def test_first_message_saves_creates_run_and_titles(
    user, chat_model, no_launch, django_capture_on_commit_callbacks
):
    conversation = services.conversation_create(owner=user)
    assert conversation.model == chat_model
    with django_capture_on_commit_callbacks(execute=True):
        message, run, injected = services.message_post(
            conversation=conversation, user=user, content="  What is 2+2?  "
        )
    assert not injected
    assert message.content == "What is 2+2?" and message.seq == 1
    assert run.status == Run.Status.QUEUED and run.trigger_message == message
    assert no_launch == [run.pk]  # enqueued only after commit
    conversation.refresh_from_db()
    assert conversation.title == "What is 2+2?"


def test_a_new_chats_first_message_does_not_look_for_an_active_run(user, chat_model, no_launch):
    """No run can exist before the first message: the lookup cost a query per new chat."""
    conversation = services.conversation_create(owner=user)

    with CaptureQueriesContext(connection) as queries:
        services.message_post(conversation=conversation, user=user, content="hello")

    run_reads = [
        q["sql"] for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and 'FROM "conversations_run"' in q["sql"]
    ]  # fmt: skip
    assert run_reads == []


def test_a_first_message_never_overwrites_a_title_given_meanwhile(user, chat_model, no_launch):
    conversation = services.conversation_create(owner=user)
    loaded_before_rename = Conversation.objects.get(pk=conversation.pk)
    services.conversation_rename(conversation=conversation, title="Renamed")

    services.message_post(conversation=loaded_before_rename, user=user, content="hello there")

    conversation.refresh_from_db()
    assert conversation.title == "Renamed"
    assert loaded_before_rename.title == "Renamed"  # what the page's title field shows


def test_message_during_active_run_becomes_pinned_inject(user, chat_model, no_launch):
    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="first")
    message, same_run, injected = services.message_post(
        conversation=conversation, user=user, content="also this"
    )
    assert injected and same_run == run
    assert message.kind == Message.Kind.INJECT and message.pinned and message.run == run
    assert Run.objects.count() == 1


@pytest.mark.parametrize("content", ["", "   "])
def test_empty_message_is_refused(user, chat_model, content):
    conversation = services.conversation_create(owner=user)
    with pytest.raises(ApplicationError):
        services.message_post(conversation=conversation, user=user, content=content)
    assert Message.objects.count() == 0


def test_oversized_message_refused_and_nothing_saved(user, chat_model, settings):
    settings.AGENTSITE_MESSAGE_MAX_CHARS = 10
    conversation = services.conversation_create(owner=user)
    with pytest.raises(ApplicationError) as info:
        services.message_post(conversation=conversation, user=user, content="x" * 11)
    assert info.value.code == "too_large"
    assert Message.objects.count() == 0 and Run.objects.count() == 0


def test_sequence_numbers_increase_per_conversation(user, chat_model, no_launch):
    a = services.conversation_create(owner=user)
    b = services.conversation_create(owner=user)
    seqs = [
        services.message_create(conversation=a, role="user", content=str(i)).seq for i in range(3)
    ]
    assert seqs == [1, 2, 3]
    assert services.message_create(conversation=b, role="user", content="x").seq == 1


def test_cancel_queued_run_not_in_this_process(user, chat_model, no_launch):
    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="go")
    services.run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.cancel_requested


def test_stale_running_run_is_swept_as_interrupted(user, chat_model, no_launch):
    from datetime import timedelta

    from django.utils import timezone

    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="go")
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(minutes=10)
    )
    assert lifecycle.run_sweep_stale(conversation=conversation) == 1
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and "interrupted" in run.error
    channels = list(run.events.values_list("channel", flat=True))
    assert channels[-1] == "error"


def test_a_message_to_a_conversation_whose_run_died_starts_a_new_run(user, chat_model, no_launch):
    """A run whose worker stopped heart-beating must not swallow the follow-up."""
    from datetime import timedelta

    from django.utils import timezone

    conversation = services.conversation_create(owner=user)
    _, dead, _ = services.message_post(conversation=conversation, user=user, content="go")
    Run.objects.filter(pk=dead.pk).update(
        status=Run.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(minutes=10)
    )
    message, run, injected = services.message_post(
        conversation=conversation, user=user, content="are you there?"
    )
    dead.refresh_from_db()
    assert dead.status == Run.Status.FAILED and "interrupted" in dead.error
    assert not injected and run.pk != dead.pk and run.status == Run.Status.QUEUED
    assert message.run_id == run.pk and message.kind == "chat"
    assert list(conversation.messages.values_list("seq", flat=True)) == [1, 2]


def test_search_by_title_and_content(user, chat_model, no_launch):
    a = services.conversation_create(owner=user, title="Trip planning")
    b = services.conversation_create(owner=user, title="Other")
    services.message_create(conversation=b, role="user", content="the word zebra")
    assert list(selectors.conversation_list(user=user, search="trip")) == [a]
    assert list(selectors.conversation_list(user=user, search="zebra")) == [b]


def test_pin_toggle(user, chat_model):
    conversation = services.conversation_create(owner=user)
    message = services.message_create(conversation=conversation, role="user", content="keep")
    services.message_set_pinned(message=message, pinned=True)
    message.refresh_from_db()
    assert message.pinned


def test_queued_run_that_never_started_is_failed(user, chat_model, no_launch):
    from datetime import timedelta

    from django.utils import timezone

    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="go")
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    lifecycle.run_sweep_stale(conversation=conversation)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and "never started" in run.error
    # the next message starts a fresh run instead of being injected into a dead one
    _, new_run, injected = services.message_post(
        conversation=conversation, user=user, content="again"
    )
    assert not injected and new_run.pk != run.pk


def test_quota_exceeded_keeps_message_and_refuses_run(user, chat_model, no_launch, client):
    from core import configcache
    from llms.models import UsageQuota
    from llms.services import usage_record

    UsageQuota.objects.create(user=user, daily_token_limit=100)
    usage_record(user=user, model=chat_model, usage={"prompt_tokens": 80, "completion_tokens": 30})
    conversation = services.conversation_create(owner=user)
    message, run, injected = services.message_post(
        conversation=conversation, user=user, content="hi"
    )
    assert not injected and no_launch == []
    assert Message.objects.filter(pk=message.pk).exists()
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and "of your 100 tokens" in run.error
    client.force_login(user)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert run.error.split(".")[0] in page  # the refusal is shown in the conversation
    # No Retry while the quota still refuses (issue 47); once it allows, Retry is back.
    assert f'hx-post="/runs/{run.pk}/retry/"' not in page
    UsageQuota.objects.filter(user=user).update(daily_token_limit=1_000_000)
    configcache.bump()  # an update() sends no signal to the configuration cache
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert f'hx-post="/runs/{run.pk}/retry/"' in page


def test_stop_cancels_the_follow_ups_queued_for_the_run(user, chat_model, no_launch):
    """Stopped before it took them in: they stay as typed, unpinned, and start nothing."""
    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="first")
    followup, _same, injected = services.message_post(
        conversation=conversation, user=user, content="and this"
    )
    assert injected

    services.run_cancel(run=run)  # still queued: stopped at once

    followup.refresh_from_db()
    assert followup.kind == Message.Kind.CHAT and not followup.pinned
    assert followup.content == "and this"
    assert Run.objects.filter(conversation=conversation).count() == 1


def test_a_stop_before_the_start_shows_its_follow_ups_as_ordinary_messages(
    user, chat_model, no_launch, django_capture_on_commit_callbacks
):
    """The "Stopped." report of a run stopped while queued also takes its follow-ups out
    of the run block, where the page showed them waiting, as a reload shows them."""
    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="first")
    followup, _same, _injected = services.message_post(
        conversation=conversation, user=user, content="and this"
    )

    with django_capture_on_commit_callbacks(execute=True):
        services.run_cancel(run=run)

    channels = list(run.events.order_by("seq").values_list("channel", "payload"))
    assert channels[-1] == (
        "unanswered",
        {"messages": [{"id": followup.pk, "content": "and this", "pinned": False}]},
    )
    frames, _seq = timeline.catch_up_frames(conversation_id=conversation.pk, after_seq=0)
    assert f'id="msg-{followup.pk}"' in frames[-1]
    assert f'id="inject-{followup.pk}" hx-swap-oob="delete"' in frames[-1]
