"""A conversation as a tree: edit a question, regenerate an answer, switch between
alternatives; the model reads the selected branch only (real runs against the scripted
HTTP LLM server)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.branches import branching
from conversations.history import compaction
from conversations.history.tree import RunTree
from conversations.models import CompactionSummary, Message, Run
from conversations.pages import timeline as page_timeline
from core.errors import ApplicationError
from tests.conversations.running import execute

pytestmark = pytest.mark.django_db(transaction=True)


def ask(conversation, user, content):
    message, run, injected = services.message_post(
        conversation=conversation, user=user, content=content
    )
    assert not injected
    return message, run


async def answered(llm_server, run, text):
    """Execute ``run`` with the LLM answering ``text``; its final status."""
    llm_server.push({"content": text})
    return await execute(run.pk)


def sent_to_llm(llm_server, index=-1):
    """The (role, content) of the chat the LLM received in request ``index``, system
    prompt left out."""
    return [
        (m["role"], m["content"])
        for m in llm_server.requests[index]["messages"]
        if m["role"] != "system"
    ]


def shown(conversation):
    """What the page shows: ("user", text) and ("answer", text or status) items."""
    timeline = page_timeline.conversation_timeline(conversation=conversation)
    out = []
    for item in timeline["items"]:
        if item["kind"] == "message":
            out.append(("user", item["message"].content))
        else:
            view = item["view"]
            out.append(("answer", view.answer_text or item["run"].status))
    return out


@pytest.fixture
def chat(user, chat_model, no_launch):
    return services.conversation_create(owner=user)


async def test_edit_answers_a_new_branch_and_keeps_the_old_one(chat, user, llm_server):
    q1, r1 = await sync_to_async(ask)(chat, user, "What is the capital of France?")
    await answered(llm_server, r1, "Paris.")
    q2, r2 = await sync_to_async(ask)(chat, user, "And of Spain?")
    await answered(llm_server, r2, "Madrid.")

    edited, r3 = await sync_to_async(branching.message_edit)(
        message=q2, user=user, content="And of Italy?"
    )
    await answered(llm_server, r3, "Rome.")

    # The edit continues after the first answer: the LLM saw the first exchange only.
    assert sent_to_llm(llm_server) == [
        ("user", "What is the capital of France?"),
        ("assistant", "Paris."),
        ("user", "And of Italy?"),
    ]
    assert await sync_to_async(shown)(chat) == [
        ("user", "What is the capital of France?"),
        ("answer", "Paris."),
        ("user", "And of Italy?"),
        ("answer", "Rome."),
    ]
    tree = await sync_to_async(RunTree.load)(chat.pk)
    question = tree.question_siblings(r3.pk)
    assert question.ids == [q2.pk, edited.pk] and question.position == 2

    # Back to the original question: its answer comes back with it.
    await sync_to_async(branching.branch_select_question)(message=q2)
    assert (await sync_to_async(shown)(chat))[2:] == [
        ("user", "And of Spain?"),
        ("answer", "Madrid."),
    ]


async def test_a_new_question_continues_the_selected_branch(chat, user, llm_server):
    q1, r1 = await sync_to_async(ask)(chat, user, "Name a colour.")
    await answered(llm_server, r1, "Red.")
    edited, r2 = await sync_to_async(branching.message_edit)(
        message=q1, user=user, content="Name a fruit."
    )
    await answered(llm_server, r2, "Apple.")
    await sync_to_async(branching.branch_select_question)(message=q1)

    _q, r3 = await sync_to_async(ask)(chat, user, "Another one?")
    await answered(llm_server, r3, "Blue.")

    assert r3.parent_id == r1.pk
    assert sent_to_llm(llm_server) == [
        ("user", "Name a colour."),
        ("assistant", "Red."),
        ("user", "Another one?"),
    ]
    # And the fruit branch, selected again, has no third exchange.
    await sync_to_async(branching.branch_select_question)(message=edited)
    assert await sync_to_async(shown)(chat) == [
        ("user", "Name a fruit."),
        ("answer", "Apple."),
    ]


async def test_regenerate_answers_the_same_history_beside_the_answer(chat, user, llm_server):
    q1, r1 = await sync_to_async(ask)(chat, user, "Tell me a joke.")
    await answered(llm_server, r1, "Joke one.")
    first_request = sent_to_llm(llm_server)

    r2 = await sync_to_async(branching.run_regenerate)(run=r1, user=user)
    await answered(llm_server, r2, "Joke two.")

    assert sent_to_llm(llm_server) == first_request == [("user", "Tell me a joke.")]
    assert r2.trigger_message_id == q1.pk and r2.parent_id is None
    assert await sync_to_async(shown)(chat) == [
        ("user", "Tell me a joke."),
        ("answer", "Joke two."),
    ]
    tree = await sync_to_async(RunTree.load)(chat.pk)
    assert tree.answer_siblings(r2.pk).ids == [r1.pk, r2.pk]

    await sync_to_async(branching.branch_select_run)(run=r1)
    assert await sync_to_async(shown)(chat) == [
        ("user", "Tell me a joke."),
        ("answer", "Joke one."),
    ]
    # A question now continues after the first joke, which the LLM reads.
    _q, r3 = await sync_to_async(ask)(chat, user, "Explain it.")
    await answered(llm_server, r3, "It is a pun.")
    assert sent_to_llm(llm_server) == [
        ("user", "Tell me a joke."),
        ("assistant", "Joke one."),
        ("user", "Explain it."),
    ]


async def test_switching_back_returns_to_the_branch_last_seen_below(chat, user, llm_server):
    q1, r1 = await sync_to_async(ask)(chat, user, "One")
    await answered(llm_server, r1, "A1")
    q2, r2 = await sync_to_async(ask)(chat, user, "Two")
    await answered(llm_server, r2, "A2")
    r2b = await sync_to_async(branching.run_regenerate)(run=r2, user=user)
    await answered(llm_server, r2b, "A2 again")
    await sync_to_async(branching.branch_select_run)(run=r2)  # the user prefers the first
    r1b = await sync_to_async(branching.run_regenerate)(run=r1, user=user)
    await answered(llm_server, r1b, "A1 again")

    assert await sync_to_async(shown)(chat) == [("user", "One"), ("answer", "A1 again")]
    await sync_to_async(branching.branch_select_run)(run=r1)
    assert await sync_to_async(shown)(chat) == [
        ("user", "One"),
        ("answer", "A1"),
        ("user", "Two"),
        ("answer", "A2"),
    ]


async def test_regenerate_with_another_model(chat, user, llm_server, chat_model):
    from llms.models import LLMModel

    other = await sync_to_async(LLMModel.objects.create)(
        provider=chat_model.provider, model_id="scripted-other", display_name="Other",
        abilities=chat_model.abilities, context_window=32_000, max_output_tokens=2_000,
    )  # fmt: skip
    _q, r1 = await sync_to_async(ask)(chat, user, "Hi")
    await answered(llm_server, r1, "Hello.")

    r2 = await sync_to_async(branching.run_regenerate)(run=r1, user=user, model_id=other.pk)
    await answered(llm_server, r2, "Hey.")

    assert llm_server.requests[-1]["model"] == "scripted-other"
    assert llm_server.requests[0]["model"] == "scripted-model"


def test_branch_operations_wait_for_the_active_run(chat, user):
    q1, r1 = ask(chat, user, "Slow question")  # queued: active
    with pytest.raises(ApplicationError) as refused:
        branching.message_edit(message=q1, user=user, content="Other")
    assert refused.value.code == "conflict"
    with pytest.raises(ApplicationError):
        branching.run_regenerate(run=r1, user=user)
    with pytest.raises(ApplicationError):
        branching.branch_select_run(run=r1)
    assert Run.objects.filter(conversation=chat).count() == 1
    assert Message.objects.filter(conversation=chat).count() == 1


def test_an_empty_edit_is_refused_and_saves_nothing(chat, user):
    q1, r1 = ask(chat, user, "Question")
    Run.objects.filter(pk=r1.pk).update(status=Run.Status.SUCCEEDED)
    with pytest.raises(ApplicationError):
        branching.message_edit(message=q1, user=user, content="   ")
    assert Message.objects.filter(conversation=chat).count() == 1


def test_retry_is_a_new_answer_beside_the_failed_one(chat, user):
    q1, r1 = ask(chat, user, "Question")
    Run.objects.filter(pk=r1.pk).update(status=Run.Status.FAILED, error="The LLM broke.")
    r1.refresh_from_db()

    retry = branching.run_retry(run=r1, user=user)

    assert retry.trigger_message_id == q1.pk and retry.parent_id == r1.parent_id
    timeline = page_timeline.conversation_timeline(conversation=chat)
    assert [i["run"].pk for i in timeline["items"] if i["kind"] == "run"] == [retry.pk]
    assert timeline["items"][1]["answers"].ids == [r1.pk, retry.pk]
    # The question is kept, once.
    assert [m.content for m in Message.objects.filter(conversation=chat)] == ["Question"]


async def test_a_summary_is_used_only_on_the_branch_it_was_made_on(chat, user, llm_server):
    q1, r1 = await sync_to_async(ask)(chat, user, "First")
    await answered(llm_server, r1, "One")
    q2, r2 = await sync_to_async(ask)(chat, user, "Second")
    await answered(llm_server, r2, "Two")
    q3, r3 = await sync_to_async(ask)(chat, user, "Third")
    # r3's branch had its history summarised up to "Two".
    await sync_to_async(CompactionSummary.objects.create)(
        conversation=chat, run=r3, summary="They counted.", covers_up_to_seq=q2.seq + 1,
        original_count=4, kept_count=0,
    )  # fmt: skip
    await answered(llm_server, r3, "Three")
    edited, r2b = await sync_to_async(branching.message_edit)(
        message=q2, user=user, content="Second, edited"
    )
    await sync_to_async(Run.objects.filter(pk=r2b.pk).update)(status=Run.Status.CANCELLED)
    r3b = await sync_to_async(branching.run_regenerate)(run=r3, user=user)

    # r2b's branch forks before the summary's run: the summary is not its history.
    run_r2b = await sync_to_async(Run.objects.select_related("trigger_message").get)(pk=r2b.pk)
    history = await sync_to_async(compaction.history_load)(run=run_r2b)
    assert history.summary is None
    assert [m.content for m in history.messages] == ["First", "One"]
    # An answer regenerated on r3's branch reads the same history: the summary applies.
    run_r3b = await sync_to_async(Run.objects.select_related("trigger_message").get)(pk=r3b.pk)
    history = await sync_to_async(compaction.history_load)(run=run_r3b)
    assert history.summary is not None and history.summary.summary == "They counted."
    assert [m.content for m in history.messages] == ["First", "One", "Second", "Two"]


def _page_queries(client, conversation) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/c/{conversation.pk}/").status_code == 200
    return len(queries)


def _grow(conversation, user, model, turns: int) -> None:
    """Finished turns, each with a delivered follow-up and a regenerated answer."""
    from django.utils import timezone

    for i in range(turns):
        tip = RunTree.load(conversation.pk).tip()
        parent = tip.run_id if tip else None
        question = services.message_create(conversation=conversation, role="user", content=f"q{i}")
        for answer in ("first", "again"):
            run = Run.objects.create(
                conversation=conversation, trigger_message=question, parent_id=parent,
                model=model, status=Run.Status.SUCCEEDED, finished_at=timezone.now(),
            )  # fmt: skip
            if question.run_id is None:
                question.run = run
                question.save(update_fields=["run"])
            services.message_create(
                conversation=conversation, role="user", content="also", run=run,
                kind=Message.Kind.INJECT,
            )  # fmt: skip
            Message.objects.filter(run=run, kind=Message.Kind.INJECT).update(
                delivered_at=timezone.now()
            )
            services.message_create(
                conversation=conversation, role="assistant", content=answer, run=run
            )


def test_the_page_reads_the_same_number_of_queries_for_any_number_of_runs(client, user, chat_model):
    client.force_login(user)
    conversation = services.conversation_create(owner=user, title="Long")
    _grow(conversation, user, chat_model, 2)
    _page_queries(client, conversation)  # per-process caches (models, tools) fill once
    few = _page_queries(client, conversation)
    _grow(conversation, user, chat_model, 10)
    assert _page_queries(client, conversation) == few
