"""The SSE stream against the real ASGI app, and runs driven entirely through the API.

The LLM is the scripted OpenAI-compatible server over loopback HTTP; runs execute as
tasks on the test's event loop (embedded mode, in-memory channel layer), exactly as
under daphne. Synchronisation is by awaiting events (with timeouts), never by sleeping.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import override_settings

from conversations.models import Message, Run, RunEvent
from conversations.runs import launcher
from conversations.runs.publisher import conversation_group
from conversations.services import conversation_create
from engine import Tool
from tools import registry as tool_registry
from tools.registry import spec_for_tool

from .conftest import HEARTBEAT, Event

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gates():
    """A test tool ``gate`` that blocks until the test opens the named gate."""
    opened: dict[str, asyncio.Event] = {}

    def gate(name: str) -> asyncio.Event:
        return opened.setdefault(name, asyncio.Event())

    async def wait_at_gate(name: str) -> str:
        await asyncio.wait_for(gate(name).wait(), 20)
        return f"gate {name} passed"

    spec = spec_for_tool(
        Tool(
            name="gate",
            description="Waits at a named gate (test tool).",
            parameters={
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
            func=wait_at_gate,
        )
    )
    tool_registry.register(spec)
    yield gate
    tool_registry._SPECS.pop("gate", None)


def kinds(events: list[Event]) -> list[tuple]:
    return [(e.event, e.data.get("type"), e.data.get("status")) for e in events]


def is_done(event: Event) -> bool:
    return event.event in ("done", "error")


async def post_message(http: httpx.AsyncClient, conversation_id: int, content: str) -> dict:
    response = await http.post(
        f"/api/conversations/{conversation_id}/messages", json={"content": content}
    )
    assert response.status_code == 202, response.text
    http.run_ids.append(response.json()["run_id"])  # type: ignore[attr-defined]
    return response.json()


async def new_conversation(http: httpx.AsyncClient) -> int:
    response = await http.post("/api/conversations", json={"title": "api run"})
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def stored_events(http: httpx.AsyncClient, conversation_id: int) -> list[Event]:
    """The durable log, once the runs started by ``http`` have finished writing it."""
    for run_id in http.run_ids:  # type: ignore[attr-defined]
        await asyncio.wait_for(launcher.wait_for(run_id), 10)
    rows = RunEvent.objects.filter(conversation_id=conversation_id).order_by("seq")
    return [Event(r.seq, r.channel, r.payload) async for r in rows]


async def wait_until(condition, timeout: float = 10) -> None:
    """Wait for an async condition to hold (polled; fails after ``timeout``)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


def as_tuples(events: list[Event]) -> list[tuple]:
    return [(e.id, e.event, e.data) for e in events]


# ------------------------------------------------------------------ a run through the API


async def test_run_through_the_api_streams_the_documented_events_in_order(
    http, sse, token, chat_model, llm_server
):
    llm_server.push(
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
        {
            "content": "The answer is **42**.",
            "reasoning_content": "multiply",
            "chunks": ["The answer ", "is ", "**42**."],
        },
    )
    conversation_id = await new_conversation(http)
    posted = await post_message(http, conversation_id, "What is 6*7?")
    assert posted["injected"] is False

    stream = await sse(f"/api/conversations/{conversation_id}/events", token=token)
    assert stream.status == 200
    assert stream.headers["content-type"].startswith("text/event-stream")
    assert stream.headers["cache-control"] == "no-cache"
    assert stream.headers["x-accel-buffering"] == "no"
    events = await stream.rest()  # ends by itself after `done`

    assert kinds(events)[:7] == [
        ("step", "thinking", "start"),
        ("step", "thinking", "done"),
        ("step", "iteration", "start"),
        ("step", "iteration", "done"),
        ("step", "thinking", "start"),
        ("step", "thinking", "delta"),  # the reasoning, as it streams
        ("answer", None, "start"),  # the answer streams from the same call
    ]
    assert events[5].data == {
        "type": "thinking",
        "status": "delta",
        "iteration": 2,
        "content": "multiply",
    }
    answer = [e for e in events if e.event == "answer"]
    assert answer[0].data == {"status": "start"} and answer[-1].data == {"status": "done"}
    assert all(e.data["status"] == "delta" for e in answer[1:-1]) and len(answer) >= 3
    assert ("step", "thinking", "done") in kinds(events)[7:]
    assert events[-1].event == "done"
    assert events[-2].data == {"status": "done"} and events[-2].event == "answer"
    tool_start, tool_done = events[2].data, events[3].data
    assert tool_start["tool_name"] == "calculator" and tool_start["tool_args"] == {
        "expression": "6*7"
    }
    assert tool_done["observation"].endswith("42") and tool_done["error"] is None
    streamed = "".join(e.data["content"] for e in answer[1:-1])
    done = events[-1].data
    assert streamed == done["answer"] == "The answer is **42**."
    assert done["iterations"] == 2 and done["usage"]["total_tokens"] > 0
    ids = [e.id for e in events]
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # no gaps, no duplicates
    # What was streamed is exactly what the durable log holds.
    assert as_tuples(events) == as_tuples(await stored_events(http, conversation_id))

    detail = (await http.get(f"/api/conversations/{conversation_id}")).json()
    assert detail["runs"][0]["status"] == "succeeded"
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]
    assert detail["messages"][1]["content"] == "The answer is **42**."


async def test_replay_after_reconnect_equals_the_live_stream(
    http, sse, token, chat_model, llm_server, gates
):
    """A client that hangs up mid-run and resumes with Last-Event-ID misses nothing."""
    llm_server.push(
        {"tool_calls": [{"name": "gate", "arguments": {"name": "one"}}]},
        {"tool_calls": [{"name": "gate", "arguments": {"name": "two"}}]},
        {"content": "Both gates are open.", "chunks": ["Both ", "gates ", "are ", "open."]},
    )
    conversation_id = await new_conversation(http)
    await post_message(http, conversation_id, "Pass the gates")
    path = f"/api/conversations/{conversation_id}/events"
    reference = await sse(path, token=token)  # stays connected throughout
    flaky = await sse(path, token=token)

    def at_gate(name):
        return lambda e: (
            e.data.get("type") == "iteration" and e.data.get("tool_args") == {"name": name}
        )

    first_part = await flaky.events_until(at_gate("one"))
    group = get_channel_layer().groups[conversation_group(conversation_id)]
    assert len(group) == 2
    await flaky.disconnect()  # the run is blocked inside the first tool call
    assert len(group) == 1  # the hung-up stream left the group
    gates("one").set()
    seen = await reference.events_until(at_gate("two"))  # the run moved on meanwhile
    assert len(seen) > len(first_part) + 2

    resumed = await sse(path, token=token, headers={"Last-Event-ID": str(first_part[-1].id)})
    replayed = await resumed.events_until(at_gate("two"))  # from the durable log / tail
    gates("two").set()
    second_part = replayed + await resumed.rest()  # then live, until `done`
    live = seen + await reference.rest()

    assert as_tuples(first_part + second_part) == as_tuples(live)
    ids = [e.id for e in live]
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    assert live[-1].event == "done" and live[-1].data["answer"] == "Both gates are open."
    assert as_tuples(live) == as_tuples(await stored_events(http, conversation_id))
    # ?after=N is the same as Last-Event-ID, also once the run is over.
    after = await sse(f"{path}?after={first_part[-1].id}", token=token)
    assert as_tuples(await after.rest()) == as_tuples(second_part)


async def test_message_during_a_run_is_injected_and_streamed(
    http, sse, token, chat_model, llm_server, gates
):
    llm_server.push(
        {"tool_calls": [{"name": "gate", "arguments": {"name": "g"}}]},
        {"content": "Done; noted your follow-up."},
    )
    conversation_id = await new_conversation(http)
    first = await post_message(http, conversation_id, "Start")
    stream = await sse(f"/api/conversations/{conversation_id}/events", token=token)
    await stream.events_until(lambda e: e.data.get("tool_name") == "gate")

    followup = await post_message(http, conversation_id, "Also this")
    assert followup["injected"] is True and followup["run_id"] == first["run_id"]
    message = Message.objects.filter(pk=followup["message_id"], delivered_at__isnull=False)
    await wait_until(message.aexists)  # the run picked it up while the tool works
    gates("g").set()
    rest = await stream.rest()
    injects = [e for e in rest if e.event == "inject"]
    assert [e.data for e in injects] == [{"type": "inject", "content": "Also this"}]
    assert rest[-1].event == "done"
    assert len(http.run_ids) == 2 and http.run_ids[0] == http.run_ids[1]  # one run


async def test_cancel_through_the_api_ends_the_stream_with_error(
    http, sse, token, chat_model, llm_server, gates
):
    llm_server.push({"tool_calls": [{"name": "gate", "arguments": {"name": "never"}}]})
    conversation_id = await new_conversation(http)
    run_id = (await post_message(http, conversation_id, "Wait forever"))["run_id"]
    stream = await sse(f"/api/conversations/{conversation_id}/events", token=token)
    await stream.events_until(lambda e: e.data.get("tool_name") == "gate")

    response = await http.post(f"/api/runs/{run_id}/cancel")

    assert response.status_code == 202 and response.json()["cancel_requested"] is True
    events = await stream.rest()
    assert events[-1].event == "error"
    assert events[-1].data == {"message": "Stopped.", "status": "cancelled", "answer": ""}
    await asyncio.wait_for(launcher.wait_for(run_id), 10)  # saved after the event
    run = await Run.objects.aget(pk=run_id)
    assert run.status == "cancelled"


# ------------------------------------------------------------------ stream mechanics


async def test_default_start_is_the_latest_runs_first_event(
    http, sse, token, chat_model, llm_server
):
    llm_server.push("First answer.", "Second answer.")
    conversation_id = await new_conversation(http)
    path = f"/api/conversations/{conversation_id}/events"
    await post_message(http, conversation_id, "one")
    first_run = await (await sse(path, token=token)).rest()
    await post_message(http, conversation_id, "two")
    second_run = await (await sse(path, token=token)).rest()
    assert first_run[-1].data["answer"] == "First answer."
    assert second_run[-1].data["answer"] == "Second answer."
    assert second_run[0].id == first_run[-1].id + 1

    # Later, without Last-Event-ID: only the latest run is replayed, then the stream ends.
    again = await (await sse(path, token=token)).rest()
    assert as_tuples(again) == as_tuples(second_run)
    everything = await (await sse(f"{path}?after=0", token=token)).rest()
    assert as_tuples(everything) == as_tuples(first_run + second_run)
    nothing_new = await sse(path, token=token, headers={"Last-Event-ID": str(again[-1].id)})
    assert await nothing_new.rest() == []


@override_settings(AGENTSITE_SSE_HEARTBEAT=0.05)
async def test_follow_sends_heartbeats_and_leaves_the_group_on_disconnect(sse, token, user):
    conversation = await sync_to_async(conversation_create)(owner=user)
    group = conversation_group(conversation.pk)
    stream = await sse(f"/api/conversations/{conversation.pk}/events?follow=1", token=token)

    assert await stream.next() == HEARTBEAT
    assert await stream.next() == HEARTBEAT
    assert get_channel_layer().groups.get(group)

    await stream.disconnect()
    assert not get_channel_layer().groups.get(group)


async def test_replayed_then_live_events_arrive_once_each(sse, token, user):
    """Events from before the stream (replayed) and after it (live): none lost or doubled."""
    from conversations.runs.publisher import RunPublisher
    from engine.events import AnswerDelta, AnswerStart, Done, ThinkingStart

    conversation = await sync_to_async(conversation_create)(owner=user)
    message = await Message.objects.acreate(
        conversation=conversation, seq=1, role="user", content="q"
    )
    run = await Run.objects.acreate(
        conversation=conversation, trigger_message=message, status=Run.Status.RUNNING
    )
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(ThinkingStart(1))
    await publisher.on_event(AnswerStart())
    stream = await sse(f"/api/conversations/{conversation.pk}/events?after=0", token=token)
    replayed = await stream.events_until(lambda e: e.id == 2)
    for part in ("Hel", "lo"):
        await publisher.on_event(AnswerDelta(part))
    await publisher.on_event(Done("Hello", 1, {}, 0.1))
    await publisher.close()
    events = replayed + await stream.rest()
    assert [e.id for e in events] == [1, 2, *range(3, len(events) + 1)]
    assert "".join(e.data.get("content", "") for e in events if e.event == "answer") == "Hello"
    assert events[-1].event == "done"


async def test_a_run_that_ends_right_after_the_replay_is_still_sent_whole(user):
    """A stream without follow reads the log (nothing yet: the run writes its events as it
    ends), then asks whether a run is still active: the run has ended meanwhile. Its
    events, written after the replay's read, are sent before the stream ends."""
    from conversations.live.sse import events_left
    from conversations.runs.publisher import RunPublisher
    from engine.events import AnswerStart, Done

    conversation = await sync_to_async(conversation_create)(owner=user)
    message = await Message.objects.acreate(
        conversation=conversation, seq=1, role="user", content="q"
    )
    run = await Run.objects.acreate(
        conversation=conversation, trigger_message=message, status=Run.Status.RUNNING
    )
    replay: list = []  # what the stream read: the run had written nothing yet
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(AnswerStart())
    await publisher.on_event(Done("Hello", 1, {}, 0.1))
    await publisher.close()
    run.status = Run.Status.SUCCEEDED
    await run.asave(update_fields=["status"])

    left = await events_left(conversation.pk, replay, 0, False)
    assert left is not None, "the stream would wait on, though no run is active"
    assert [event for _seq, _run, event, _payload in left][-1] == "done"
    # While a run is active, the stream waits for its live events instead.
    run.status = Run.Status.RUNNING
    await run.asave(update_fields=["status"])
    assert await events_left(conversation.pk, replay, 0, False) is None


async def test_stream_refusals(sse, token, other_token, user):
    conversation = await sync_to_async(conversation_create)(owner=user)
    path = f"/api/conversations/{conversation.pk}/events"

    anonymous = await sse(path, token=None)
    assert anonymous.status == 401
    stranger = await sse(path, token=other_token)
    assert stranger.status == 404 and b"Not found" in await stranger.body()
    bad_id = await sse(path, token=token, headers={"Last-Event-ID": "abc"})
    assert bad_id.status == 400 and b"Last-Event-ID" in await bad_id.body()
    bad_after = await sse(f"{path}?after=-3", token=token)
    assert bad_after.status == 400
    # No run and nothing to replay: a stream without follow ends at once.
    empty = await sse(path, token=token)
    assert empty.status == 200 and await empty.rest() == []


@override_settings(AGENTSITE_SSE_HEARTBEAT=0.05)
async def test_a_gap_in_live_ids_is_filled_from_the_log(sse, token, user):
    """If the channel layer drops frames, the stream backfills them from the event log."""
    from conversations.runs.publisher import write_events

    conversation = await sync_to_async(conversation_create)(owner=user)
    message = await Message.objects.acreate(
        conversation=conversation, seq=1, role="user", content="q"
    )
    run = await Run.objects.acreate(conversation=conversation, trigger_message=message)
    stream = await sse(f"/api/conversations/{conversation.pk}/events?after=0&follow=1", token=token)
    assert await stream.next() == HEARTBEAT  # replay done, following live

    logged = [
        (1, run.pk, "step", {"type": "thinking", "status": "start", "iteration": 1}),
        (2, run.pk, "answer", {"status": "start"}),
        (3, run.pk, "answer", {"status": "delta", "content": "hi"}),
    ]
    # Logged, but frames 1-2 "lost" on the channel layer.
    await sync_to_async(write_events)([(conversation.pk, logged)])
    await get_channel_layer().group_send(
        conversation_group(conversation.pk),
        {"type": "run.event", "seq": 3, "run_id": run.pk, "channel": "answer",
         "payload": logged[2][3], "html": ""},
    )  # fmt: skip

    events = await stream.events_until(lambda e: e.id == 3)
    assert as_tuples(events) == [(seq, channel, payload) for seq, _r, channel, payload in logged]


# ------------------------------------------------------------------------------ branches


async def test_events_say_their_branch_and_the_replay_follows_the_selected_one(
    http, sse, token, chat_model, llm_server
):
    """A regenerated answer is a second branch: each event names its run and the run
    that run continues; the replay holds the selected branch (every one with
    ``branch=all``)."""
    llm_server.push("First answer.", "Second answer.")
    conversation_id = await new_conversation(http)
    path = f"/api/conversations/{conversation_id}/events"
    await post_message(http, conversation_id, "one")
    first = await (await sse(path, token=token)).rest()
    first_run = http.run_ids[-1]
    regenerated = await http.post(f"/api/runs/{first_run}/regenerate")
    assert regenerated.status_code == 202, regenerated.text
    second_run = regenerated.json()["id"]
    http.run_ids.append(second_run)
    second = await (await sse(path, token=token)).rest()

    assert {e.branch["run_id"] for e in first} == {first_run}
    assert {e.branch["run_id"] for e in second} == {second_run}
    assert all(e.branch["parent_run_id"] is None for e in first + second)
    assert second[-1].data["answer"] == "Second answer."
    selected = await (await sse(f"{path}?after=0", token=token)).rest()
    assert as_tuples(selected) == as_tuples(second)
    every = await (await sse(f"{path}?after=0&branch=all", token=token)).rest()
    assert as_tuples(every) == as_tuples(first + second)

    # Back on the first answer, the replay follows it.
    switched = await http.post(f"/api/runs/{first_run}/select")
    assert switched.status_code == 200
    assert [run["id"] for run in switched.json()["runs"]] == [first_run]
    assert switched.json()["runs"][0]["answer_versions"] == {
        "ids": [first_run, second_run], "index": 0, "count": 2,
    }  # fmt: skip
    selected = await (await sse(f"{path}?after=0", token=token)).rest()
    assert as_tuples(selected) == as_tuples(first)
