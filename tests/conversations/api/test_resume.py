"""``POST /api/runs/<id>/resume``: continue a paused run, over the real ASGI app; and its
refusals in plain words (409, 404, 400), which save nothing."""

from __future__ import annotations

import json

import pytest

from conversations.models import AgentMode, Message, Run
from conversations.services import conversation_create, message_post

QUESTION = "How many rows has the orders table?"
NOTE = "I unlocked the database; try again."
TRACE = json.dumps([{"role": "user", "content": QUESTION, "pinned": True}])


def ghost_call(n: int) -> dict:
    return {"tool_calls": [{"name": "count_rows", "arguments": {"attempt": n}}]}


def paused(conversation, user, **fields) -> Run:
    """A run of ``conversation`` that a loop guard paused, with a trace by default."""
    _message, run, _injected = message_post(conversation=conversation, user=user, content=QUESTION)
    values = {"status": Run.Status.PAUSED, "resume_trace": TRACE} | fields
    Run.objects.filter(pk=run.pk).update(**values)
    run.refresh_from_db()
    return run


def counts(conversation) -> tuple[int, int]:
    return conversation.messages.count(), conversation.runs.count()


# ------------------------------------------------------------------ a run through the API


@pytest.mark.django_db(transaction=True)
async def test_resume_through_the_api_streams_the_continuation(
    http, sse, token, chat_model, llm_server
):
    llm_server.push(ghost_call(1), ghost_call(2), ghost_call(3))
    conversation = (await http.post("/api/conversations", json={})).json()["id"]
    posted = await http.post(
        f"/api/conversations/{conversation}/messages", json={"content": QUESTION}
    )
    paused_id = posted.json()["run_id"]
    http.run_ids.append(paused_id)  # type: ignore[attr-defined]
    events_url = f"/api/conversations/{conversation}/events"
    first = await (await sse(events_url, token=token)).rest()
    assert first[-1].event == "done" and first[-1].data["status"] == "paused"

    llm_server.push("The orders table has 1,204 rows.")
    response = await http.post(f"/api/runs/{paused_id}/resume", json={"content": NOTE})

    assert response.status_code == 202, response.text
    resumed = response.json()
    http.run_ids.append(resumed["id"])  # type: ignore[attr-defined]
    # The shape of every endpoint answering with a run (retry, regenerate, cancel).
    run_shape = set((await http.post(f"/api/runs/{paused_id}/cancel")).json())
    assert set(resumed) == run_shape and resumed["parent_run_id"] == paused_id
    assert resumed["status"] == "queued" and resumed["mode"] == "react"
    events = await (await sse(f"{events_url}?after={first[-1].id}", token=token)).rest()
    assert events[0].event == "resume"
    assert events[0].data == {"resumed_run_id": paused_id, "tool_results": 3}
    assert events[0].branch == {"run_id": resumed["id"], "parent_run_id": paused_id}
    assert events[-1].event == "done" and events[-1].data["status"] == "succeeded"
    assert events[-1].data["answer"] == "The orders table has 1,204 rows."
    sent = llm_server.requests[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user"] + ["assistant", "tool"] * 3 + ["user"]
    assert sent[-1] == {"role": "user", "content": NOTE}
    detail = (await http.get(f"/api/conversations/{conversation}")).json()
    assert [m["content"] for m in detail["messages"] if m["role"] == "user"] == [QUESTION, NOTE]


# ------------------------------------------------------------------------- refusals


@pytest.fixture
def mine(user, chat_model):
    return conversation_create(owner=user, title="mine")


@pytest.mark.django_db
def test_a_run_that_is_not_paused_is_409(api, mine, user):
    run = paused(mine, user, status=Run.Status.SUCCEEDED)
    before = counts(mine)

    response = api.post(f"/api/runs/{run.pk}/resume", {"content": NOTE})

    assert response.status_code == 409
    assert response.json() == {
        "error": "Only a paused run can be continued; this one has answered.",
        "fields": {},
    }
    assert counts(mine) == before


@pytest.mark.django_db
def test_a_run_paused_in_plan_mode_is_409_saying_why(api, mine, user):
    run = paused(mine, user, mode=AgentMode.PLAN, resume_trace=None)

    response = api.post(f"/api/runs/{run.pk}/resume")

    assert response.status_code == 409
    assert "plan mode" in response.json()["error"]
    assert counts(mine) == (1, 1)


@pytest.mark.django_db
def test_another_active_run_in_the_conversation_is_409(api, mine, user):
    run = paused(mine, user)
    message_post(conversation=mine, user=user, content="Meanwhile")  # a new run, queued

    response = api.post(f"/api/runs/{run.pk}/resume", {"content": NOTE})

    assert response.status_code == 409
    assert "Wait for the current answer" in response.json()["error"]
    assert not Message.objects.filter(content=NOTE).exists()


@pytest.mark.django_db
def test_another_users_run_is_404(api, other_user, chat_model):
    theirs = conversation_create(owner=other_user)
    run = paused(theirs, other_user)

    response = api.post(f"/api/runs/{run.pk}/resume", {"content": NOTE})

    assert response.status_code == 404
    assert counts(theirs) == (1, 1)
    assert api.post("/api/runs/999999/resume").status_code == 404


@pytest.mark.django_db
def test_a_note_over_the_limit_is_400_and_saves_nothing(api, mine, user, settings):
    settings.AGENTSITE_MESSAGE_MAX_CHARS = 50
    run = paused(mine, user)

    response = api.post(f"/api/runs/{run.pk}/resume", {"content": "x" * 51})

    assert response.status_code == 400
    assert response.json() == {
        "error": "The note is too long (51 characters; the limit is 50).",
        "fields": {"content": ["At most 50 characters."]},
    }
    assert counts(mine) == (1, 1)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"), [({"content": 5}, "content"), ({"note": "hi"}, "note"), ("[1]", "__all__")]
)
def test_bad_bodies_are_400(api, mine, user, body, field):
    run = paused(mine, user)

    response = api.post(f"/api/runs/{run.pk}/resume", body)

    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert counts(mine) == (1, 1)


@pytest.mark.django_db
def test_resume_without_a_body_saves_the_request_to_continue(api, mine, user):
    run = paused(mine, user)

    response = api.post(f"/api/runs/{run.pk}/resume", "")

    assert response.status_code == 202
    resumed = Run.objects.get(pk=response.json()["id"])
    assert resumed.parent_id == run.pk and resumed.resumes_parent
    assert resumed.trigger_message.content == "Please continue."
