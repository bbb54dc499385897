"""Continue a paused run over real processes: daphne (embedded mode, SQLite) and the
scripted LLM server, driven through the JSON API and its event stream the way a client
does. The run pauses after three identical tool errors; ``POST /api/runs/<id>/resume``
with a note goes on from its trace, and the LLM's recorded request shows it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.integration.observers import EventStream
from tests.integration.stack import Browser, Stack, async_wait_for, running_stack

pytestmark = pytest.mark.integration

NOTE = "I unlocked the database; try again."


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with running_stack(mode="embedded") as stack:
        yield stack


def ghost_call(n: int) -> dict:
    """A call to a tool nobody has: the same error each time (the arguments differ)."""
    return {"tool_calls": [{"name": "count_rows", "arguments": {"attempt": n}}]}


async def api_post(browser: Browser, path: str, body: dict) -> dict:
    headers = {"X-CSRFToken": browser.http.cookies["csrftoken"]}
    response = await browser.http.post(path, json=body, headers=headers)
    assert response.status_code in (201, 202), (response.status_code, response.text[:300])
    return response.json()


def ends(stream: EventStream, count: int):
    """The first ``count`` run ends (``done``/``error``) the stream received, once there."""

    def check():
        found = [e for e in stream.events if e[1] in ("done", "error")]
        return found[:count] if len(found) >= count else None

    return check


async def test_a_paused_run_goes_on_from_its_trace_with_the_note(stack: Stack) -> None:
    marker = f"RESUME-{secrets.token_hex(3)}"
    question = f"{marker}: how many rows has the orders table?"
    answer = "The orders table has 1,204 rows."
    calls = [ghost_call(1), ghost_call(2), ghost_call(3), answer]
    stack.script(reset=True, rules=[{"contains": marker, "in": "any", "responses": calls}])
    async with Browser(stack.base_url) as browser:
        await browser.login()
        conversation_id = await browser.new_conversation()
        async with EventStream(browser, conversation_id) as stream:
            posted = await api_post(
                browser, f"/api/conversations/{conversation_id}/messages", {"content": question}
            )
            paused_id = posted["run_id"]
            (first_end,) = await async_wait_for(
                ends(stream, 1), timeout=30, what="the run to pause", detail=stack.logs
            )
            assert first_end[1] == "done" and first_end[2]["status"] == "paused"

            resumed = await api_post(browser, f"/api/runs/{paused_id}/resume", {"content": NOTE})
            _first, second_end = await async_wait_for(
                ends(stream, 2), timeout=30, what="the continued run's end", detail=stack.logs
            )

    assert resumed["parent_run_id"] == paused_id and resumed["status"] == "queued"
    assert second_end[1] == "done" and second_end[2]["status"] == "succeeded"
    assert second_end[2]["answer"] == answer
    continued = [e for e in stream.events if e[2].get("branch", {}).get("run_id") == resumed["id"]]
    assert continued[0][1] == "resume"  # the continuation says so first
    assert continued[0][2]["resumed_run_id"] == paused_id
    assert continued[0][2]["branch"] == {"run_id": resumed["id"], "parent_run_id": paused_id}

    requests = [r["body"] for r in stack.llm_requests() if marker in str(r["body"])]
    assert len(requests) == 4
    last_paused, first_resumed = requests[2]["messages"], requests[3]["messages"]
    # The paused run's trace exactly as it sent it, its last call and result, the note.
    assert first_resumed[: len(last_paused)] == last_paused
    third_call, third_result, note = first_resumed[len(last_paused) :]
    assert third_call["tool_calls"][0]["function"]["arguments"] == '{"attempt": 3}'
    assert third_result["role"] == "tool" and "Unknown tool" in third_result["content"]
    assert note == {"role": "user", "content": NOTE}
    rows = stack.query(
        "SELECT status, parent_id, resumes_parent FROM conversations_run WHERE id = %s",
        resumed["id"],
    )
    assert rows == [("succeeded", paused_id, 1)]
