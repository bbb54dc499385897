"""Automatic titles (issue 46): after a conversation's first answer, one small call to a
model titles it from the question; a title the user gave is never replaced.

Real runs against the scripted HTTP server (its replies in order: the answer, then the
title call's), real SQLite. A reply scripted with ``after_release`` holds the title call
until the test lets it go, so what happens meanwhile is ordered, not timed.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from conversations import services, titles
from conversations.models import Conversation, Run, RunEvent
from conversations.pages import timeline
from conversations.runs import titling
from conversations.runs.publisher import conversation_group
from llms.models import LLMModel
from llms.services import role_assignment_set
from tests.conversations.running import execute, rendered

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "What is the capital of France, and why did it become the capital?"
ANSWER = "Paris is the capital of France. It grew around the Île de la Cité."


@pytest.fixture
def auto_titles(settings):
    """The tests' settings turn automatic titles off (tests/conftest.py): on here."""
    settings.AGENTSITE_AUTO_TITLES = True


async def start(user, content: str = QUESTION, **create) -> tuple[Conversation, Run]:
    """A conversation (``create``: conversation_create's arguments) with its first
    question saved and its run queued (the test executes it)."""
    conversation = await sync_to_async(services.conversation_create)(owner=user, **create)
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content=content
    )
    return conversation, run


async def answered_and_titled(run: Run) -> str:
    """Execute the run, then await its title task; the run's status."""
    status = await execute(run.pk)
    await titling.wait_for(run.pk)
    return status


async def title_events(conversation: Conversation) -> list[dict]:
    rows = RunEvent.objects.filter(conversation=conversation, channel="title").order_by("seq")
    return [payload async for payload in rows.values_list("payload", flat=True)]


async def wait_for_requests(llm_server, count: int) -> None:
    assert await asyncio.to_thread(llm_server.wait_for_requests, count, 10)


async def test_a_first_answer_gets_a_title_made_from_its_question(
    user, chat_model, llm_server, no_launch, auto_titles
):
    llm_server.push(ANSWER, {"content": "**“Capital of France.”**", "after_release": "title"})
    conversation, run = await start(user)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group(conversation.pk), channel)

    # The answer is complete, and its run closed, while the title call is still held.
    assert await execute(run.pk) == "succeeded"
    await wait_for_requests(llm_server, 2)
    await conversation.arefresh_from_db()
    assert conversation.title == QUESTION[:59] + "…"  # the first message's, for now
    llm_server.release("title")
    await titling.wait_for(run.pk)

    await conversation.arefresh_from_db()
    assert conversation.title == "Capital of France"
    assert not conversation.title_by_user
    assert (await Run.objects.aget(pk=run.pk)).status == "succeeded"
    # One small call, not streamed, asking for a title from the question and the answer.
    request = llm_server.requests[-1]
    assert "stream" not in request
    assert request["max_tokens"] == titles.TITLE_MAX_TOKENS
    system, prompt = request["messages"]
    assert "title" in system["content"] and "language of the user's question" in system["content"]
    assert QUESTION in prompt["content"] and ANSWER in prompt["content"]
    # Announced as an event of the run, after its done, which pages render as the
    # header's title marked for the sidebar to reload.
    assert await title_events(conversation) == [{"title": "Capital of France"}]
    frames = []
    while not frames or frames[-1]["channel"] != "title":
        frames.append(await layer.receive(channel))
    assert [f["channel"] for f in frames].index("done") < len(frames) - 1
    html = (await rendered(frames))[-1]
    assert 'id="conversation-title"' in html and 'value="Capital of France"' in html
    assert "data-retitled" in html and 'hx-swap-oob="true"' in html
    # A page whose socket was away when it came gets it when it catches up.
    done_seq = next(f["seq"] for f in frames if f["channel"] == "done")
    caught_up, _ = await sync_to_async(timeline.catch_up_frames)(
        conversation_id=conversation.pk, after_seq=done_seq
    )
    assert any('value="Capital of France"' in html for html in caught_up)


async def test_a_title_given_on_creating_the_conversation_is_kept(
    user, chat_model, llm_server, no_launch, auto_titles
):
    llm_server.push(ANSWER, "Capital of France")
    conversation, run = await start(user, title="Trip planning")
    assert conversation.title_by_user

    assert await answered_and_titled(run) == "succeeded"

    await conversation.arefresh_from_db()
    assert conversation.title == "Trip planning"
    assert len(llm_server.requests) == 1  # no title call at all
    assert await title_events(conversation) == []


async def test_a_conversation_renamed_before_its_first_answer_is_not_retitled(
    user, chat_model, llm_server, no_launch, auto_titles
):
    llm_server.push(ANSWER, "Capital of France")
    conversation, run = await start(user)
    await sync_to_async(services.conversation_rename)(conversation=conversation, title="Mine")

    assert await answered_and_titled(run) == "succeeded"

    await conversation.arefresh_from_db()
    assert (conversation.title, conversation.title_by_user) == ("Mine", True)
    assert len(llm_server.requests) == 1
    assert await title_events(conversation) == []


async def test_a_rename_while_the_title_call_is_under_way_wins(
    user, chat_model, llm_server, no_launch, auto_titles
):
    llm_server.push(ANSWER, {"content": "Capital of France", "after_release": "title"})
    conversation, run = await start(user)
    assert await execute(run.pk) == "succeeded"
    await wait_for_requests(llm_server, 2)  # the title call is out, its reply held

    renamed = await Conversation.objects.aget(pk=conversation.pk)
    await sync_to_async(services.conversation_rename)(conversation=renamed, title="Paris notes")
    llm_server.release("title")
    await titling.wait_for(run.pk)

    await conversation.arefresh_from_db()
    assert (conversation.title, conversation.title_by_user) == ("Paris notes", True)
    assert await title_events(conversation) == []


@pytest.mark.parametrize(
    "reply",
    [
        {"status": 500, "error_body": {"error": {"message": "overloaded"}}},
        {"content": ""},
        {"content": "“ ” ..."},  # nothing left once cleaned
    ],
    ids=["failing", "empty", "only-punctuation"],
)
async def test_a_failing_or_empty_title_reply_keeps_the_first_message_title(
    user, chat_model, llm_server, no_launch, auto_titles, caplog, reply
):
    llm_server.push(ANSWER, reply)
    conversation, run = await start(user, content="Plan a weekend in Lyon")

    with caplog.at_level(logging.INFO, logger="conversations.titles"):
        assert await answered_and_titled(run) == "succeeded"

    assert len(llm_server.requests) == 2  # asked once, never again
    await conversation.arefresh_from_db()
    assert (conversation.title, conversation.title_by_user) == ("Plan a weekend in Lyon", False)
    assert (await Run.objects.aget(pk=run.pk)).status == "succeeded"
    assert await title_events(conversation) == []
    kept = [r for r in caplog.records if "keeps its title" in r.getMessage()]
    assert [r.levelno for r in kept] == [logging.INFO]


async def test_a_title_call_past_its_time_limit_keeps_the_title(
    user, chat_model, llm_server, no_launch, caplog
):
    llm_server.push({"content": "Too late", "delay": 5})
    job = titles.TitleJob(
        conversation_id=1, owner=user, question=QUESTION, answer=ANSWER, model=chat_model
    )

    with caplog.at_level(logging.INFO, logger="conversations.titles"):
        reply = await titles.title_reply(job, timeout=0.2)

    assert reply == titles.TitleReply()
    assert "no reply in time" in caplog.text


async def test_the_second_answer_does_not_retitle(
    user, chat_model, llm_server, no_launch, auto_titles
):
    llm_server.push(ANSWER, "Capital of France", "Lyon is the third city.")
    conversation, run = await start(user)
    assert await answered_and_titled(run) == "succeeded"
    _, second, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="And which city is the third largest?"
    )

    assert await answered_and_titled(second) == "succeeded"

    assert len(llm_server.requests) == 3  # two answers and one title call
    await conversation.arefresh_from_db()
    assert conversation.title == "Capital of France"
    assert await title_events(conversation) == [{"title": "Capital of France"}]


async def test_a_first_answer_that_failed_is_not_titled(
    user, chat_model, llm_server, no_launch, auto_titles
):
    llm_server.push({"status": 400, "error_body": {"error": {"message": "bad request"}}})
    conversation, run = await start(user, content="Plan a weekend in Lyon")

    assert await answered_and_titled(run) == "failed"

    assert len(llm_server.requests) == 1
    await conversation.arefresh_from_db()
    assert conversation.title == "Plan a weekend in Lyon"


async def test_a_title_made_while_another_run_streams_is_saved_without_an_event(
    user, chat_model, llm_server, no_launch, auto_titles
):
    """The streaming run numbers its events from a block reserved before: a title event
    numbered after that block would make readers drop the run's next frames."""
    llm_server.push(
        ANSWER,
        {"content": "Capital of France", "after_release": "title"},
        {"content": "Lyon is the third city.", "after_release": "second"},
    )
    conversation, run = await start(user)
    assert await execute(run.pk) == "succeeded"
    await wait_for_requests(llm_server, 2)
    _, second, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="And the third largest city?"
    )
    streaming = asyncio.ensure_future(execute(second.pk))
    await wait_for_requests(llm_server, 3)  # the second run is claimed and streaming

    llm_server.release("title")
    await titling.wait_for(run.pk)
    await conversation.arefresh_from_db()
    assert conversation.title == "Capital of France"
    assert await title_events(conversation) == []

    llm_server.release("second")
    assert await streaming == "succeeded"


async def test_the_title_call_goes_to_the_users_fast_model(
    user, chat_model, llm_server, no_launch, auto_titles
):
    fast = await LLMModel.objects.acreate(
        provider=chat_model.provider, model_id="scripted-fast", display_name="Fast"
    )
    await sync_to_async(role_assignment_set)(role="fast", group=None, model=fast)
    llm_server.push(ANSWER, "Capital of France")
    conversation, run = await start(user)

    assert await answered_and_titled(run) == "succeeded"

    assert [r["model"] for r in llm_server.requests] == ["scripted-model", "scripted-fast"]
    await conversation.arefresh_from_db()
    assert conversation.title == "Capital of France"


async def test_no_title_call_when_automatic_titles_are_off(
    user, chat_model, llm_server, no_launch, settings
):
    settings.AGENTSITE_AUTO_TITLES = False
    llm_server.push(ANSWER, "Capital of France")
    conversation, run = await start(user, content="Plan a weekend in Lyon")

    assert await answered_and_titled(run) == "succeeded"

    assert len(llm_server.requests) == 1
    await conversation.arefresh_from_db()
    assert conversation.title == "Plan a weekend in Lyon"


@pytest.mark.parametrize(
    ("reply", "title"),
    [
        ("Capital of France", "Capital of France"),
        ('"Capital of France."', "Capital of France"),
        ("**Title:** _Capital of France_!", "Capital of France"),
        ("# Weekend in Lyon\n\nA plan for two days.", "Weekend in Lyon"),
        ("<think>The user asks about Paris.</think>\nParis,  the   capital?", "Paris, the capital"),
        ("「東京の観光スポット」。", "東京の観光スポット"),
        ("标题：巴黎旅行计划", "巴黎旅行计划"),
        ("[Lyon guide](https://example.com) …", "Lyon guide"),
        ("snake_case naming in Python", "snake_case naming in Python"),
        ("", ""),
        (None, ""),
        ("  \n  ", ""),
    ],
)
def test_a_reply_is_cleaned_into_a_title(reply, title):
    assert titles.clean_title(reply) == title


def test_a_long_reply_is_cut_at_a_word_under_80_characters():
    reply = "A very long title " + "that keeps going " * 10
    title = titles.clean_title(reply)
    assert len(title) <= titles.TITLE_MAX_CHARS
    assert reply.startswith(title) and not title.endswith(" ")
    assert titles.clean_title("x" * 200) == "x" * titles.TITLE_MAX_CHARS


def test_titles_the_user_gives_are_marked_theirs(user, token, client, chat_model):
    """Creating with a title, renaming on the page, in the sidebar or through the API."""
    assert services.conversation_create(owner=user, title="Mine").title_by_user
    assert not services.conversation_create(owner=user, title="  ").title_by_user
    headers = {"Authorization": f"Bearer {token}"}

    created = client.post(
        "/api/conversations", {"title": "From the API"}, "application/json", headers=headers
    )
    assert created.status_code == 201 and created.json()["title_by_user"] is True
    untitled = client.post("/api/conversations", {}, "application/json", headers=headers)
    assert untitled.json()["title_by_user"] is False
    patched = client.patch(
        f"/api/conversations/{untitled.json()['id']}",
        {"title": "Renamed"},
        "application/json",
        headers=headers,
    )
    assert patched.status_code == 200 and patched.json()["title_by_user"] is True

    client.force_login(user)
    for form in ({"title": "On the page"}, {"title": "In the sidebar", "next": "sidebar"}):
        chat = services.conversation_create(owner=user)
        client.post(f"/c/{chat.pk}/rename/", form, headers={"HX-Request": "true"})
        chat.refresh_from_db()
        assert (chat.title, chat.title_by_user) == (form["title"], True)
