"""Continue a paused run: real runs against the scripted HTTP LLM server pause (three
identical tool errors), then go on from their trace with the user's note."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.branches import branching, resuming
from conversations.models import AgentMode, Message, Run, RunEvent
from conversations.pages import timeline as page_timeline
from core.errors import ApplicationError
from tests.conversations.running import execute

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "How many rows has the orders table?"
NOTE = "I unlocked the database; try again."
TRACE = json.dumps([{"role": "user", "content": QUESTION, "pinned": True}])


def ghost_call(n: int) -> dict:
    """A call to a tool nobody has: the same error every time (its arguments differ, so
    the repeated-call guard does not step in first)."""
    return {"tool_calls": [{"name": "count_rows", "arguments": {"attempt": n}}]}


@pytest.fixture
def chat(user, chat_model, no_launch):
    return services.conversation_create(owner=user)


async def paused_run(chat, user, llm_server) -> Run:
    """A run that asked ``QUESTION`` and paused after three identical tool errors."""
    _message, run, _injected = await sync_to_async(services.message_post)(
        conversation=chat, user=user, content=QUESTION
    )
    llm_server.push(ghost_call(1), ghost_call(2), ghost_call(3))
    assert await execute(run.pk) == Run.Status.PAUSED
    return await sync_to_async(Run.objects.get)(pk=run.pk)


def shown(conversation):
    """The page's timeline: ("user", text) and ("run", id, answer, continue offered?)."""
    from django.template.loader import render_to_string

    timeline = page_timeline.conversation_timeline(conversation=conversation)
    html = render_to_string("conversations/partials.html#timeline", {"timeline": timeline})
    out = []
    for item in timeline["items"]:
        if item["kind"] == "message":
            out.append(("user", item["message"].content))
        else:
            run_id = item["run"].pk
            offered = f'id="continue-{run_id}"' in html
            out.append(("run", run_id, item["view"].answer_text, offered))
    return out


def user_messages(request) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


async def test_continue_goes_on_from_the_trace_then_the_note(chat, user, llm_server):
    paused = await paused_run(chat, user, llm_server)
    last_paused_request = llm_server.requests[-1]["messages"]
    page = await sync_to_async(shown)(chat)
    assert page[-1][1] == paused.pk and page[-1][3] is True  # Continue is offered

    resumed = await sync_to_async(resuming.run_resume)(run=paused, user=user, content=NOTE)

    # The note is saved before any work, as the continuation's question.
    note = await sync_to_async(Message.objects.get)(pk=resumed.trigger_message_id)
    assert (note.role, note.content, note.run_id) == ("user", NOTE, resumed.pk)
    assert resumed.parent_id == paused.pk and resumed.mode == AgentMode.REACT
    llm_server.push("The orders table has 1,204 rows.")
    assert await execute(resumed.pk) == Run.Status.SUCCEEDED

    first = llm_server.requests[3]["messages"]
    assert first[: len(last_paused_request)] == last_paused_request  # the trace, as sent
    third_call, third_result, note_sent = first[len(last_paused_request) :]
    assert third_call["tool_calls"][0]["function"]["arguments"] == '{"attempt": 3}'
    assert third_result["role"] == "tool" and "Unknown tool" in third_result["content"]
    assert note_sent == {"role": "user", "content": NOTE}
    # The pause's explanation is the page's, not the model's.
    assert paused.error not in str(first)
    # The event log says which run it goes on from, first.
    events = await sync_to_async(list)(
        RunEvent.objects.filter(run_id=resumed.pk).order_by("seq").values_list("channel", "payload")
    )
    assert events[0] == ("resume", {"resumed_run_id": paused.pk, "tool_results": 3})
    # The page: the question, the paused run (Continue no longer offered: it goes on below),
    # the note, and the answer.
    page = await sync_to_async(shown)(chat)
    assert [entry[0] for entry in page] == ["user", "run", "user", "run"]
    assert page[1][1:] == (paused.pk, paused.error, False)
    answer = "The orders table has 1,204 rows."
    assert page[2:] == [("user", NOTE), ("run", resumed.pk, answer, False)]


async def test_continue_without_a_note_asks_the_model_to_continue(chat, user, llm_server):
    paused = await paused_run(chat, user, llm_server)

    resumed = await sync_to_async(resuming.run_resume)(run=paused, user=user, content="  ")
    llm_server.push("Done.")
    assert await execute(resumed.pk) == Run.Status.SUCCEEDED

    assert user_messages(llm_server.requests[-1]) == [QUESTION, resuming.CONTINUE_REQUEST]
    note = await sync_to_async(Message.objects.get)(pk=resumed.trigger_message_id)
    assert note.content == resuming.CONTINUE_REQUEST


async def test_the_model_reads_the_history_before_the_question_once(chat, user, llm_server):
    _m, first, _i = await sync_to_async(services.message_post)(
        conversation=chat, user=user, content="Hi"
    )
    llm_server.push("Hello!")
    assert await execute(first.pk) == Run.Status.SUCCEEDED
    paused = await paused_run(chat, user, llm_server)

    resumed = await sync_to_async(resuming.run_resume)(run=paused, user=user, content=NOTE)
    llm_server.push("Done.")
    await execute(resumed.pk)

    sent = [(m["role"], m["content"]) for m in llm_server.requests[-1]["messages"]]
    assert sent[1:4] == [("user", "Hi"), ("assistant", "Hello!"), ("user", QUESTION)]
    assert user_messages(llm_server.requests[-1]) == ["Hi", QUESTION, NOTE]


async def test_a_continued_run_that_pauses_again_continues_from_both(chat, user, llm_server):
    paused = await paused_run(chat, user, llm_server)
    again = await sync_to_async(resuming.run_resume)(run=paused, user=user, content=NOTE)
    llm_server.push(ghost_call(4), ghost_call(5), ghost_call(6))
    assert await execute(again.pk) == Run.Status.PAUSED
    again = await sync_to_async(Run.objects.get)(pk=again.pk)

    last = await sync_to_async(resuming.run_resume)(run=again, user=user, content="Last try.")
    llm_server.push("Done.")
    assert await execute(last.pk) == Run.Status.SUCCEEDED

    request = llm_server.requests[-1]
    assert user_messages(request) == [QUESTION, NOTE, "Last try."]
    assert sum(len(m.get("tool_calls", ())) for m in request["messages"]) == 6


async def test_regenerating_a_continued_answer_goes_on_from_the_same_trace(chat, user, llm_server):
    paused = await paused_run(chat, user, llm_server)
    resumed = await sync_to_async(resuming.run_resume)(run=paused, user=user, content=NOTE)
    llm_server.push("First try.")
    await execute(resumed.pk)

    regenerated = await sync_to_async(branching.run_regenerate)(run=resumed, user=user)
    llm_server.push("Second try.")
    assert await execute(regenerated.pk) == Run.Status.SUCCEEDED

    assert regenerated.parent_id == paused.pk and regenerated.resumes_parent
    assert llm_server.requests[-1]["messages"][1:] == llm_server.requests[-2]["messages"][1:]
    # An edited note goes on from the trace too, with the new words.
    note = await sync_to_async(Message.objects.get)(pk=resumed.trigger_message_id)
    _edited, edited_run = await sync_to_async(branching.message_edit)(
        message=note, user=user, content="Use the replica instead."
    )
    llm_server.push("Third try.")
    assert await execute(edited_run.pk) == Run.Status.SUCCEEDED
    assert edited_run.parent_id == paused.pk and edited_run.resumes_parent
    edited_request = llm_server.requests[-1]["messages"]
    assert edited_request[1:-1] == llm_server.requests[-2]["messages"][1:-1]
    assert edited_request[-1] == {"role": "user", "content": "Use the replica instead."}


async def test_an_unreadable_trace_fails_the_continuation_saying_why(chat, user, llm_server):
    paused = await paused_run(chat, user, llm_server)
    await sync_to_async(Run.objects.filter(pk=paused.pk).update)(resume_trace="{not json")
    resumed = await sync_to_async(resuming.run_resume)(run=paused, user=user, content=NOTE)

    assert await execute(resumed.pk) == Run.Status.FAILED

    resumed = await sync_to_async(Run.objects.get)(pk=resumed.pk)
    assert resumed.error == "The paused run kept no trace to go on from. Ask again instead."
    assert len(llm_server.requests) == 3  # the model was not asked


def test_only_a_paused_run_with_a_trace_can_be_continued(chat, user):
    _m, run, _i = services.message_post(conversation=chat, user=user, content=QUESTION)
    with pytest.raises(ApplicationError) as refused:  # still queued: and busy
        resuming.run_resume(run=run, user=user, content=NOTE)
    assert refused.value.code == "conflict" and "has not started" in refused.value.message

    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)
    with pytest.raises(ApplicationError) as refused:
        resuming.run_resume(run=run, user=user)
    assert refused.value.code == "conflict" and "has answered" in refused.value.message

    # Paused in plan mode: no ReAct trace to go on from.
    Run.objects.filter(pk=run.pk).update(status=Run.Status.PAUSED, mode=AgentMode.PLAN)
    with pytest.raises(ApplicationError) as refused:
        resuming.run_resume(run=run, user=user)
    assert refused.value.code == "conflict" and "plan mode" in refused.value.message
    assert Message.objects.filter(conversation=chat).count() == 1
    assert Run.objects.filter(conversation=chat).count() == 1


def test_continue_waits_for_the_active_run_and_keeps_nothing(chat, user):
    _m, paused, _i = services.message_post(conversation=chat, user=user, content=QUESTION)
    Run.objects.filter(pk=paused.pk).update(status=Run.Status.PAUSED, resume_trace=TRACE)
    services.message_post(conversation=chat, user=user, content="Something else")  # active

    with pytest.raises(ApplicationError) as refused:
        resuming.run_resume(run=paused, user=user, content=NOTE)

    assert refused.value.code == "conflict" and refused.value.message == branching.BUSY
    assert not Message.objects.filter(content=NOTE).exists()


def test_a_note_over_the_limit_is_refused_and_saves_nothing(chat, user, settings):
    settings.AGENTSITE_MESSAGE_MAX_CHARS = 20
    _m, paused, _i = services.message_post(conversation=chat, user=user, content="Short")
    Run.objects.filter(pk=paused.pk).update(status=Run.Status.PAUSED, resume_trace=TRACE)

    with pytest.raises(ApplicationError) as refused:
        resuming.run_resume(run=paused, user=user, content="x" * 21)

    assert refused.value.code == "invalid" and "too long" in refused.value.message
    assert refused.value.extra == {"content": ["At most 20 characters."]}
    assert Message.objects.filter(conversation=chat).count() == 1


# ------------------------------------------------------------------------------ the page


def paused_row(chat, user, **fields) -> Run:
    _m, run, _i = services.message_post(conversation=chat, user=user, content=QUESTION)
    done = {"status": "paused", "answer": "I stopped: the same error 3 times.", "iterations": 3}
    values = {"status": Run.Status.PAUSED, "resume_trace": TRACE}
    Run.objects.filter(pk=run.pk).update(**(values | fields))
    RunEvent.objects.create(run=run, conversation=chat, seq=1, channel="done", payload=done)
    return Run.objects.get(pk=run.pk)


def test_the_page_offers_continue_and_continues_with_the_note(client, chat, user):
    client.force_login(user)
    run = paused_row(chat, user)
    page = client.get(f"/c/{chat.pk}/").content.decode()
    assert f'<form id="continue-{run.pk}"' in page
    assert f'hx-post="/runs/{run.pk}/resume/"' in page and ">Continue</button>" in page

    response = client.post(f"/runs/{run.pk}/resume/", {"content": NOTE}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    resumed = Run.objects.get(parent=run)
    html = response.content.decode()
    assert f'id="run-{resumed.pk}"' in html and NOTE in html
    assert f'id="continue-{run.pk}"' not in html  # it goes on below now
    page = client.get(f"/c/{chat.pk}/").content.decode()  # a reload shows the same
    assert f'id="run-{resumed.pk}"' in page and NOTE in page
    assert f'id="continue-{run.pk}"' not in page


def test_the_page_refuses_in_plain_words_and_keeps_the_note(client, chat, user, other_user):
    client.force_login(user)
    run = paused_row(chat, user)
    services.message_post(conversation=chat, user=user, content="Meanwhile")  # active

    busy = client.post(f"/runs/{run.pk}/resume/", {"content": NOTE}, HTTP_HX_REQUEST="true")
    assert busy.status_code == 409 and branching.BUSY in busy.content.decode()
    assert busy["HX-Reswap"] == "none"  # the form, and the note typed in it, stay
    client.force_login(other_user)
    assert client.post(f"/runs/{run.pk}/resume/", {"content": NOTE}).status_code == 404
    assert not Message.objects.filter(content=NOTE).exists()


def test_a_run_paused_in_plan_mode_offers_no_continue(client, chat, user):
    client.force_login(user)
    run = paused_row(chat, user, mode=AgentMode.PLAN, resume_trace=None)

    page = client.get(f"/c/{chat.pk}/").content.decode()

    assert "I stopped: the same error 3 times." in page
    assert f'id="continue-{run.pk}"' not in page


def test_the_live_end_of_a_paused_run_offers_continue_when_it_kept_its_trace():
    from conversations.pages.rendering import RunView

    done = {"status": "paused", "answer": "I stopped.", "iterations": 3, "usage": {}}
    kept, plan = RunView(run_id=7, resumable=True), RunView(run_id=8)

    assert 'id="continue-7"' in kept.apply(5, "done", done)
    assert "continue-8" not in plan.apply(6, "done", done)
    resumed = RunView(run_id=9).apply(7, "resume", {"resumed_run_id": 7, "tool_results": 3})
    assert 'href="#run-7"' in resumed and "3 earlier tool results" in resumed
