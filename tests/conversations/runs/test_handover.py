"""A run whose process stops for a restart (issue 44): ended saying so, or handed back and
gone on with from its trace, on the test's loop against the real scripted HTTP server.
The processes themselves are stopped in tests/integration/test_restarts.py."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import override_settings
from django.utils import timezone

from conversations import services
from conversations.models import Message, Run, RunEvent
from conversations.runs import handover, lifecycle
from conversations.runs.control import LoopControl
from conversations.runs.execution import execute_run
from conversations.runs.publisher import conversation_group
from conversations.runs.shutdown import drain
from core import runtime
from engine import ChatMessage, Tool, ToolCall
from tools.registry import register, spec_for_tool

pytestmark = pytest.mark.django_db(transaction=True)

TEAM = override_settings(AGENTSITE_EXECUTION="celery")
dawdling = threading.Event()
dawdle_done = threading.Event()


def _dawdle(text: str) -> str:
    dawdling.set()
    dawdle_done.wait(10)
    return text


register(
    spec_for_tool(
        Tool(
            name="dawdle",
            description="Takes its time (test tool).",
            parameters={"type": "object", "properties": {"text": {"type": "string"}}},
            func=_dawdle,
        )
    )
)


async def started_answering(conversation_id: int) -> None:
    """Until the run's first answer words went out (the stream then hangs)."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group(conversation_id), channel)
    while True:
        frame = await asyncio.wait_for(layer.receive(channel), 10)
        if frame["channel"] == "answer" and frame["payload"].get("content"):
            return


async def stop_for_restart() -> None:
    """What a stopping process does with runs still going when the grace period ends."""
    now = time.monotonic()
    await drain(finish_by=now, end_by=now + 10)


async def posted(user, content: str) -> Run:
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content=content
    )
    return run


async def test_a_run_its_server_stops_ends_saying_so_with_the_answer_kept(
    user, chat_model, llm_server, no_launch
):
    llm_server.push({"chunks": ["Half an answer", " never sent"], "hang": 30})
    run = await posted(user, "tell me")
    running = asyncio.ensure_future(execute_run(run.pk))
    await started_answering(run.conversation_id)
    await stop_for_restart()
    outcome = await asyncio.wait_for(running, 10)

    assert outcome.status == "failed" and not outcome.handed_back
    run = await Run.objects.aget(pk=run.pk)
    assert run.error == handover.SERVER_RESTARTED
    kept = await Message.objects.aget(run=run, role=Message.Role.ASSISTANT)
    assert kept.incomplete and kept.content == "Half an answer"
    error = await RunEvent.objects.filter(run=run, channel="error").aget()
    assert error.payload["message"] == handover.SERVER_RESTARTED
    assert error.payload["answer"] == "Half an answer"


@TEAM
async def test_a_worker_hands_a_stopped_run_back_and_the_next_goes_on_from_its_last_step(
    user, chat_model, llm_server, no_launch
):
    """The tool call completed, the answer was streaming: handed back, the run goes on
    from after the tool's result (no new user turn, the tool not run again), and its one
    answer is the second worker's."""
    llm_server.push(
        {"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]},
        {"chunks": ["The answer", " is cut"], "hang": 30},
        {"content": "The answer is HI."},
    )
    run = await posted(user, "Shout hi")
    running = asyncio.ensure_future(execute_run(run.pk))
    await started_answering(run.conversation_id)
    await stop_for_restart()
    outcome = await asyncio.wait_for(running, 10)

    assert outcome.status == "queued" and outcome.handed_back
    row = await Run.objects.aget(pk=run.pk)
    assert row.status == Run.Status.QUEUED and row.task_id == ""
    trace = [m["role"] for m in json.loads(row.resume_trace)]
    assert trace == ["user", "assistant", "tool"]  # the question, the call, its result
    report = await RunEvent.objects.filter(run=run, channel="handover").aget()
    assert report.payload["message"] == handover.HANDED_OVER
    assert not await Message.objects.filter(run=run, role=Message.Role.ASSISTANT).aexists()

    runtime.part(LoopControl).restarting = False  # the loop of another worker, as it were
    second = await execute_run(run.pk)  # claims the same run

    assert second.status == "succeeded"
    answers = [m async for m in Message.objects.filter(run=run, role=Message.Role.ASSISTANT)]
    assert [(m.content, m.incomplete) for m in answers] == [("The answer is HI.", False)]
    went_on = llm_server.requests[-1]["messages"]
    assert [m["role"] for m in went_on] == ["system", "user", "assistant", "tool"]
    channels = [e.channel async for e in RunEvent.objects.filter(run=run).order_by("seq")]
    assert channels.count("handover") == 1 and channels[-1] == "done"
    assert channels.count("step") >= 2  # the tool's card once: not called again


@TEAM
async def test_a_run_stopped_while_a_tool_runs_is_not_run_again_elsewhere(
    user, chat_model, llm_server, no_launch
):
    dawdling.clear()
    dawdle_done.clear()
    llm_server.push({"tool_calls": [{"name": "dawdle", "arguments": {"text": "x"}}]})
    run = await posted(user, "take your time")
    running = asyncio.ensure_future(execute_run(run.pk))
    try:
        await asyncio.to_thread(dawdling.wait, 10)
        await stop_for_restart()
        outcome = await asyncio.wait_for(running, 10)
    finally:
        dawdle_done.set()

    assert outcome.status == "failed" and not outcome.handed_back
    row = await Run.objects.aget(pk=run.pk)
    assert row.error == handover.WORKER_RESTARTED_IN_TOOL


def test_the_follow_ups_a_handed_back_run_never_took_in_go_to_the_next_worker(user, no_launch):
    """Taken in: in the trace, still delivered; handed to the loop only: undelivered again,
    so the next claim hands them over; a Stop saved first: nothing is handed back."""
    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="q")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    taken, _, _ = services.message_post(conversation=conversation, user=user, content="taken")
    handed, _, _ = services.message_post(conversation=conversation, user=user, content="handed")
    waiting, _, _ = services.message_post(conversation=conversation, user=user, content="waiting")
    Message.objects.filter(pk__in=[taken.pk, handed.pk]).update(delivered_at=timezone.now())
    trace = [ChatMessage("user", "q", pinned=True), ChatMessage("user", "taken", pinned=True)]

    assert handover.run_hand_back(run=run, trace=trace, taken_in=[taken.pk], events=[])

    delivered = dict(Message.objects.filter(run=run).values_list("content", "delivered_at"))
    assert delivered["taken"] is not None
    assert delivered["handed"] is None and delivered["waiting"] is None
    assert handover.taken_in_before(run.pk) == [taken.pk]
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED

    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, cancel_requested=True)
    assert not handover.run_hand_back(run=run, trace=trace, taken_in=[], events=[])


def test_which_runs_are_handed_back():
    with override_settings(AGENTSITE_EXECUTION="celery"):
        go = {"react": True, "tool_cut": False, "steps_begun": True, "handovers": 0}
        assert handover.refusal(**go) is None
        assert handover.refusal(**{**go, "tool_cut": True}) == handover.WORKER_RESTARTED_IN_TOOL
        assert handover.refusal(**{**go, "react": False}) == handover.WORKER_RESTARTED_IN_PLAN
        assert handover.refusal(**{**go, "react": False, "steps_begun": False}) is None
        again = {**go, "handovers": handover.MAX_HANDOVERS}
        assert handover.refusal(**again) == handover.WORKER_RESTARTED_AGAIN
    with override_settings(AGENTSITE_EXECUTION="embedded"):
        assert handover.refusal(**go) == handover.SERVER_RESTARTED


def test_a_trace_goes_on_after_its_last_completed_step():
    call = ChatMessage("assistant", "", tool_calls=[ToolCall("c1", "shout", {"text": "hi"})])
    steps = [ChatMessage("user", "q"), call, ChatMessage("tool", "HI", tool_call_id="c1")]
    assert handover.go_on_from([*steps, ChatMessage("assistant", "HI it is.")]) == steps
    assert handover.go_on_from(steps) == steps


async def test_a_run_starting_after_the_grace_period_stops_at_once(
    user, chat_model, llm_server, no_launch
):
    """A run launched once the process is stopping (a follow-up run, a late task) does not
    start an answer it could not finish: it ends at once, saying why."""
    await stop_for_restart()  # nothing was running
    assert runtime.part(LoopControl).restarting
    llm_server.push("never asked")
    run = await posted(user, "too late")

    outcome = await asyncio.wait_for(execute_run(run.pk), 10)

    assert outcome.status == "failed"
    assert (await Run.objects.aget(pk=run.pk)).error == handover.SERVER_RESTARTED


def test_a_handed_back_run_no_worker_takes_is_reported_as_such(user, no_launch):
    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="q")
    long_ago = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=long_ago, resume_trace="[]")

    assert lifecycle.run_sweep_stale() == 1

    row = Run.objects.get(pk=run.pk)
    assert row.status == Run.Status.FAILED and row.error == lifecycle.never_taken_over()
    assert "restarted and no other worker took it over" in row.error
