"""Compaction on load: one stored summary, a divider, reuse by later runs, pins kept."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.models import CompactionSummary, Message, RunEvent
from tests.conversations.running import execute

pytestmark = pytest.mark.django_db(transaction=True)

PINNED_TEXT = "PINNED-FACT: the launch code is 4242."


@pytest.fixture(autouse=True)
def no_launch(monkeypatch):
    monkeypatch.setattr("conversations.runs.launcher.launch", lambda run_id: None)


@pytest.fixture
def small_model(chat_model):
    chat_model.context_window = 4_100  # budget = max(4_100 - 100, 4_000) = 4,000 tokens
    chat_model.max_output_tokens = 100
    chat_model.save()
    return chat_model


def long_history(conversation, *, pairs: int = 12) -> None:
    for i in range(pairs):
        services.message_create(
            conversation=conversation, role="user", content=f"Q{i} " + "q" * 900
        )
        services.message_create(
            conversation=conversation, role="assistant", content=f"A{i} " + "a" * 900
        )
    first = conversation.messages.order_by("seq").first()
    first.content = PINNED_TEXT
    first.pinned = True
    first.save()


async def run_once(conversation, user, text):
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content=text
    )
    assert await execute(run.pk) == "succeeded"
    return run


async def test_compacts_once_then_reuses_summary(user, small_model, llm_server, client):
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    await sync_to_async(long_history)(conversation)
    llm_server.push("SUMMARY-ONE: users asked 12 questions.", "Answer one.")

    run1 = await run_once(conversation, user, "What now?")

    summarise_request = llm_server.requests[0]["messages"]
    transcript = " ".join(m["content"] for m in summarise_request)
    assert PINNED_TEXT not in transcript  # pinned messages never reach the summariser
    assert "same language" in summarise_request[0]["content"]
    agent_request = llm_server.requests[1]["messages"]
    agent_text = [m["content"] for m in agent_request]
    assert any(t.startswith("[Conversation summary]: SUMMARY-ONE") for t in agent_text)
    assert PINNED_TEXT in agent_text  # kept verbatim
    assert await CompactionSummary.objects.acount() == 1
    summary = await CompactionSummary.objects.aget()
    assert summary.original_count == 24 and summary.kept_count < 24
    compact = await RunEvent.objects.filter(run=run1, channel="compact").aget()
    assert compact.payload == {
        "original_messages": 24,
        "kept_messages": summary.kept_count,
    }

    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert "24 earlier messages summarised" in page
    summary_html = (await sync_to_async(client.get)(f"/runs/{run1.pk}/summary/")).content.decode()
    assert "SUMMARY-ONE" in summary_html

    requests_before = len(llm_server.requests)
    llm_server.push("Answer two.")
    run2 = await run_once(conversation, user, "And then?")

    second_run_requests = llm_server.requests[requests_before:]
    assert len(second_run_requests) == 1  # no new summarisation call
    first_text = [m["content"] for m in second_run_requests[0]["messages"]]
    assert any(t.startswith("[Conversation summary]: SUMMARY-ONE") for t in first_text)
    assert await CompactionSummary.objects.acount() == 1
    assert not await RunEvent.objects.filter(run=run2, channel="compact").aexists()


async def test_resummarises_incrementally(user, small_model, llm_server):
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    await sync_to_async(long_history)(conversation)
    llm_server.push("SUMMARY-ONE", "Answer one.")
    await run_once(conversation, user, "first")
    await sync_to_async(long_history)(conversation)  # the conversation grows again
    start = len(llm_server.requests)
    llm_server.push("SUMMARY-TWO", "Answer two.")
    await run_once(conversation, user, "second")

    resummarise = llm_server.requests[start]["messages"][-1]["content"]
    assert "SUMMARY-ONE" in resummarise  # the stored summary is extended, not redone
    assert await CompactionSummary.objects.acount() == 2
    latest = await CompactionSummary.objects.afirst()
    assert latest.summary == "SUMMARY-TWO"


async def test_summariser_failure_falls_back_to_truncation(user, small_model, llm_server):
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    await sync_to_async(long_history)(conversation)
    llm_server.push({"status": 400, "error_body": {"error": {"message": "nope"}}}, "Ok.")
    await run_once(conversation, user, "go")
    assert await CompactionSummary.objects.acount() == 0
    agent_messages = llm_server.requests[1]["messages"]
    assert PINNED_TEXT in [m["content"] for m in agent_messages]
    assert sum(len(m["content"]) for m in agent_messages) < 4_000 * 4


async def test_pin_passes_to_engine(user, chat_model, llm_server):
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    message = await sync_to_async(services.message_create)(
        conversation=conversation, role="user", content="remember me"
    )
    await sync_to_async(services.message_set_pinned)(message=message, pinned=True)
    from conversations.history.compaction import history_load

    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="next"
    )
    history = await sync_to_async(history_load)(run=run)
    assert [(m.content, m.pinned) for m in history.messages] == [("remember me", True)]
    assert await Message.objects.filter(pinned=True).acount() == 1


def test_a_first_message_runs_with_no_history_and_no_history_queries(
    user, chat_model, django_assert_num_queries
):
    from conversations.history.compaction import history_load
    from conversations.models import Run

    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="hello")
    run = Run.objects.select_related("trigger_message").get(pk=run.pk)

    with django_assert_num_queries(0):
        history = history_load(run=run)

    assert history.messages == [] and history.summary is None
