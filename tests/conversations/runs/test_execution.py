"""A run end to end in embedded mode against the real scripted HTTP server."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import override_settings
from django.utils import timezone

from conversations import services
from conversations.history.numbering import last_event_seq
from conversations.models import Message, Run, RunEvent
from conversations.pages import timeline
from conversations.runs import execution, lifecycle
from conversations.runs.execution import execute_run
from conversations.runs.publisher import conversation_group, write_events
from engine import Tool
from tests.conversations.running import execute, rendered
from tools.registry import register, spec_for_tool

pytestmark = pytest.mark.django_db(transaction=True)

shout_called = threading.Event()


def _shout(text: str) -> str:
    shout_called.set()
    return text.upper()


def register_text_tool(name: str, description: str, func) -> None:
    """Register a test tool that takes one ``text`` argument."""
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    tool = Tool(name=name, description=description, parameters=parameters, func=func)
    register(spec_for_tool(tool))


register_text_tool("shout", "Upper-cases text (test tool).", _shout)


def wait_until_delivered(message: Message) -> None:
    """Until the run took the follow-up in (a tool waiting mid-run)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and message.delivered_at is None:
        time.sleep(0.02)
        message.refresh_from_db()


def post(conversation, user, content):
    """message_post without launching (the test awaits the runner itself)."""
    return services.message_post(conversation=conversation, user=user, content=content)


def event_list(run):
    return [
        (e.channel, e.payload.get("type"), e.payload.get("status"))
        for e in RunEvent.objects.filter(run=run).order_by("seq")
    ]


async def test_tool_call_then_streamed_answer(user, chat_model, llm_server, no_launch):
    llm_server.push(
        {"tool_calls": [{"name": "shout", "arguments": {"text": "hi"}}]},
        {"content": "The answer is **HI**.", "usage": {"prompt_tokens": 7, "completion_tokens": 5}},
    )
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    message, run, _ = await sync_to_async(post)(conversation, user, "Shout hi")

    status = await execute(run.pk)

    assert status == "succeeded"
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "succeeded" and run.iterations == 2 and run.elapsed > 0
    assert run.usage["total_tokens"] > 0
    answer = await Message.objects.filter(run=run, role="assistant").aget()
    assert answer.content == "The answer is **HI**."
    events = await sync_to_async(event_list)(run)
    assert events[:4] == [
        ("step", "thinking", "start"),
        ("step", "thinking", "done"),
        ("step", "iteration", "start"),
        ("step", "iteration", "done"),
    ]
    assert ("answer", None, "start") in events
    assert events[-1] == ("done", None, "succeeded")
    assert events[-2] == ("answer", None, "done")
    seqs = [
        e
        async for e in RunEvent.objects.filter(run=run)
        .order_by("seq")
        .values_list("seq", flat=True)
    ]
    assert seqs == list(range(1, len(seqs) + 1))
    done = await RunEvent.objects.filter(run=run, channel="done").aget()
    assert done.payload["answer"] == "The answer is **HI**."
    tool_request = llm_server.requests[1]
    assert [m["role"] for m in tool_request["messages"]][-2:] == ["assistant", "tool"]
    assert tool_request["messages"][-1]["content"] == "HI"


async def test_llm_failure_ends_failed_and_keeps_message(user, chat_model, llm_server, no_launch):
    """The user is told in plain words what to do; the provider's answer (and its URL)
    is kept for the admin."""
    llm_server.push({"status": 401, "error_body": {"error": {"message": "Invalid API key"}}})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    message, run, _ = await sync_to_async(post)(conversation, user, "hello?")

    assert await execute(run.pk) == "failed"

    run = await Run.objects.aget(pk=run.pk)
    told = "The model's provider refused its API key. An administrator needs to check"
    assert run.status == "failed" and run.error.startswith(told)
    assert "Invalid API key" in run.error_detail and "Invalid API key" not in run.error
    assert await Message.objects.filter(pk=message.pk).aexists()
    error = await RunEvent.objects.filter(run=run, channel="error").aget()
    assert error.payload["message"] == run.error
    assert "http" not in error.payload["message"] and "Error: Error" not in run.error


async def test_an_unreachable_model_server_is_reported_without_its_url(user, chat_model, no_launch):
    provider = chat_model.provider
    provider.base_url = "http://127.0.0.1:9/v1"  # nothing listens there
    await provider.asave(update_fields=["base_url"])
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "hello?")

    assert await execute(run.pk) == "failed"

    run = await Run.objects.aget(pk=run.pk)
    assert run.error == (
        "The model's server could not be reached (no connection). Retry, or an administrator "
        "can check that it is running at the provider's address."
    )
    assert "127.0.0.1:9" in run.error_detail


@override_settings(AGENTSITE_RUN_HEARTBEAT_SECONDS=600)  # only a wake-up can deliver it
async def test_stop_cancels_inflight_request(user, chat_model, llm_server, no_launch):
    llm_server.push({"content": "never", "delay": 30})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "take your time")

    def stop_when_requested():
        llm_server.wait_for_requests(1, timeout=10)
        services.run_cancel(run=Run.objects.get(pk=run.pk))

    stopper = threading.Thread(target=stop_when_requested)
    stopper.start()
    started = time.monotonic()
    status = await execute(run.pk)
    stopper.join()

    assert status == "cancelled"
    assert time.monotonic() - started < 10  # far less than the scripted 30 s
    assert llm_server.wait_for_disconnect(timeout=5)
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "cancelled"


@override_settings(AGENTSITE_RUN_HEARTBEAT_SECONDS=600)  # only a wake-up can deliver it
async def test_followup_during_tool_is_injected(user, chat_model, llm_server, no_launch):
    conversation = await sync_to_async(services.conversation_create)(owner=user)

    def slow_tool(text: str) -> str:
        message, _, injected = post(conversation, user, "Also say bye")
        assert injected
        wait_until_delivered(message)
        return text.upper()

    register_text_tool("slow_shout", "Upper-cases text slowly.", slow_tool)
    llm_server.push(
        {"tool_calls": [{"name": "slow_shout", "arguments": {"text": "hi"}}]},
        {"content": "HI and bye."},
        {"content": "HI, and bye!"},
    )
    _, run, _ = await sync_to_async(post)(conversation, user, "Shout hi")

    assert await execute(run.pk) == "succeeded"

    second = llm_server.requests[1]["messages"]
    assert second[-1]["role"] == "user"
    assert second[-1]["content"].startswith("[USER INTERRUPT]")
    assert "Also say bye" in second[-1]["content"]
    channels = await sync_to_async(event_list)(run)
    assert ("inject", "inject", None) in channels
    assert await Run.objects.filter(conversation=conversation).acount() == 1


@override_settings(AGENTSITE_RUN_HEARTBEAT_SECONDS=600)  # only the start-up check can deliver it
async def test_a_followup_sent_while_the_run_was_queued_reaches_it(
    user, chat_model, llm_server, no_launch
):
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "Shout hi")
    followup, same_run, injected = await sync_to_async(post)(conversation, user, "Also say bye")
    assert injected and same_run.pk == run.pk

    def patient_shout(text: str) -> str:
        wait_until_delivered(followup)  # the follow-up reaches the run while the tool runs
        return text.upper()

    register_text_tool("patient_shout", "Upper-cases text once follow-ups arrived.", patient_shout)
    llm_server.push(
        {"tool_calls": [{"name": "patient_shout", "arguments": {"text": "hi"}}]},
        {"content": "HI and bye."},
        {"content": "HI, and bye!"},
    )

    assert await execute(run.pk) == "succeeded"

    second = llm_server.requests[1]["messages"]
    assert "Also say bye" in second[-1]["content"]


async def test_a_failing_close_leaves_the_log_whole_and_the_run_failed(
    user, chat_model, llm_server, no_launch, monkeypatch
):
    """The close writes the run's last events in its own transaction: when it fails, the
    run ends failed saying so, those events are written with the error, numbered without
    a gap, and the answer the page showed is kept, marked incomplete."""

    def failing_close(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(lifecycle, "run_close_with_answer", failing_close)
    llm_server.push({"content": "Final answer.", "chunks": ["Final ", "answer."]})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    message, run, _ = await sync_to_async(post)(conversation, user, "hi")

    assert await execute(run.pk) == "failed"

    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "failed" and run.error == execution.UNSAVED_ANSWER
    assert await Message.objects.filter(pk=message.pk).aexists()
    kept = await Message.objects.aget(run=run, role="assistant")
    assert kept.incomplete and kept.content == "Final answer."
    events = await sync_to_async(event_list)(run)
    assert ("answer", None, "delta") in events
    assert events[-1] == ("error", None, "failed") and not any(e[0] == "done" for e in events)
    seqs = [
        seq
        async for seq in RunEvent.objects.filter(run=run)
        .order_by("seq")
        .values_list("seq", flat=True)
    ]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


async def test_unconfigured_model_fails_with_clear_message(user, no_launch, db):
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "anyone?")
    assert await execute(run.pk) == "failed"
    run = await Run.objects.aget(pk=run.pk)
    assert "No language model is configured" in run.error


async def test_model_disabled_after_pick_is_refused_at_run_start(user, chat_model, no_launch):
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "hi")
    chat_model.enabled = False
    await chat_model.asave()
    assert await execute(run.pk) == "failed"
    run = await Run.objects.aget(pk=run.pk)
    assert "Pick another model" in run.error


async def posted_run_with_listener(user, llm_server):
    """A queued run answering "Final answer.", and a channel in its conversation's group."""
    llm_server.push("Final answer.")
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "hi")
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group(conversation.pk), channel)
    return conversation, run, layer, channel


async def frames_through_done(layer, channel) -> list[dict]:
    """The channel's next messages, up to and including a done frame."""
    frames = [await layer.receive(channel)]
    while frames[-1]["channel"] != "done":
        frames.append(await layer.receive(channel))
    return frames


async def test_done_frame_already_carries_the_answer_pin(user, chat_model, llm_server, no_launch):
    _, run, layer, channel = await posted_run_with_listener(user, llm_server)

    assert await execute(run.pk) == "succeeded"

    frames = await frames_through_done(layer, channel)
    answer = await Message.objects.filter(run=run, role="assistant").aget()
    assert f'id="pin-{answer.pk}"' in (await rendered(frames))[-1]


async def test_run_is_closed_before_its_done_frame(user, chat_model, llm_server, no_launch):
    """A message sent by someone who has seen "done" must start a new run, not join it."""
    conversation, run, layer, channel = await posted_run_with_listener(user, llm_server)

    running = asyncio.ensure_future(execute(run.pk))
    while (await layer.receive(channel))["channel"] != "done":
        pass
    status_at_done = (await Run.objects.aget(pk=run.pk)).status
    _, second, injected = await sync_to_async(post)(conversation, user, "next question")
    await running

    assert status_at_done == "succeeded"
    assert not injected and second.pk != run.pk


async def test_a_failed_run_is_closed_before_its_error_frame(
    user, chat_model, llm_server, no_launch
):
    """A client that saw the error finds the run failed (with its report in the log), not
    still running, whether it reloads or asks the API."""
    llm_server.push(*[{"status": 500}] * 8)
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "hi")
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group(conversation.pk), channel)

    running = asyncio.ensure_future(execute(run.pk))
    while (frame := await layer.receive(channel))["channel"] != "error":
        pass
    at_error = await Run.objects.aget(pk=run.pk)
    logged = await RunEvent.objects.filter(run=run, channel="error").aexists()
    await running

    assert at_error.status == "failed" and at_error.error == frame["payload"]["message"]
    assert logged


async def test_a_run_started_at_the_previous_ones_done_numbers_its_events_after_it(
    user, chat_model, llm_server, no_launch
):
    """A message sent the moment a run is closed starts the next run while the closed
    run's last events may still be unwritten: the new run's events are numbered after
    them (same numbers collide in the log and live clients drop the later frame)."""
    conversation, run, layer, channel = await posted_run_with_listener(user, llm_server)

    running = asyncio.ensure_future(execute(run.pk))
    while (done := await layer.receive(channel))["channel"] != "done":
        pass
    # Read the moment the done frame arrived.
    marked = await sync_to_async(last_event_seq, thread_sensitive=False)(conversation.pk)
    llm_server.push("Second answer.")
    _, second, _ = await sync_to_async(post)(conversation, user, "next question")
    assert await execute(second.pk) == "succeeded"
    await running

    assert marked >= done["seq"]
    second_frames = await frames_through_done(layer, channel)
    assert {m["run_id"] for m in second_frames} == {second.pk}
    assert min(m["seq"] for m in second_frames) > done["seq"]
    stored = [e.seq async for e in RunEvent.objects.filter(conversation=conversation)]
    assert len(stored) == len(set(stored))


async def test_a_followup_sent_while_the_answer_streams_starts_the_next_run(
    user, chat_model, llm_server, no_launch
):
    """The answer is already being written when it arrives: the model never sees it in
    this run, so it becomes the next run's question (it is not marked as taken in)."""
    frames: list[dict] = []
    llm_server.push(
        {"content": "Final answer.", "chunks": ["Final ", "answer."], "chunk_delay": 0.3}
    )
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "hi")
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group(conversation.pk), channel)

    async def listen() -> None:
        while True:
            frames.append(await layer.receive(channel))

    listening = asyncio.ensure_future(listen())
    running = asyncio.ensure_future(execute_run(run.pk))
    while not any(f["channel"] == "answer" for f in frames):
        await asyncio.sleep(0.01)
    followup, same_run, injected = await sync_to_async(post)(conversation, user, "And why?")
    assert injected and same_run.pk == run.pk
    outcome = await running
    await asyncio.sleep(0)  # the listener takes what was sent before the run returned
    announced_before_return = [f for f in frames if f["channel"] == "followup"]
    listening.cancel()

    assert outcome.status == "succeeded"
    followup_run = await Run.objects.exclude(pk=run.pk).aget(conversation=conversation)
    assert followup_run.trigger_message_id == followup.pk
    assert len(llm_server.requests) == 1  # this run's one call, which never saw it
    # The page gets the question and the new run's block before the new run is launched
    # (its launcher launches outcome.followup_run_id once the run returned).
    assert outcome.followup_run_id == followup_run.pk
    assert len(announced_before_return) == 1
    announced = announced_before_return[0]
    assert announced["run_id"] == run.pk
    html = (await rendered(frames[: frames.index(announced) + 1]))[-1]
    assert f'id="inject-{followup.pk}" hx-swap-oob="delete"' in html
    assert f'id="msg-{followup.pk}"' in html
    assert f'id="run-{followup_run.pk}"' in html
    assert announced["seq"] > max(f["seq"] for f in frames if f["channel"] == "done")


async def test_a_stopped_answer_keeps_the_text_the_page_showed(
    user, chat_model, llm_server, no_launch, client
):
    """Stop mid-answer: what streamed stays, as an incomplete answer, on a reload (the
    page), in the API and in what the model sees next."""
    llm_server.push({"chunks": ["Half an answer", " never sent"], "hang": 30})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "tell me")
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group(conversation.pk), channel)
    running = asyncio.ensure_future(execute_run(run.pk))
    shown = ""
    while not shown:  # the stream stalls after its first piece
        frame = await asyncio.wait_for(layer.receive(channel), 10)
        if frame["channel"] == "answer":
            shown += frame["payload"].get("content", "")
    await sync_to_async(services.run_cancel)(run=await Run.objects.aget(pk=run.pk))
    outcome = await asyncio.wait_for(running, 10)

    assert outcome.status == "cancelled"
    kept = await Message.objects.aget(run=run, role=Message.Role.ASSISTANT)
    assert kept.incomplete and kept.content == "Half an answer"

    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert "Half an answer" in page and "Stopped." in page
    api = await sync_to_async(client.get)(f"/api/conversations/{conversation.pk}")
    answer = [m for m in api.json()["messages"] if m["role"] == "assistant"]
    assert [(m["content"], m["incomplete"]) for m in answer] == [("Half an answer", True)]


async def test_an_interrupted_runs_logged_answer_is_kept_by_the_sweep(user, chat_model, no_launch):
    """The worker died mid-answer: the sweep keeps what reached the log."""
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "tell me")

    def die_mid_answer() -> None:
        claimed = lifecycle.run_claim(run_id=run.pk)
        assert claimed is not None
        write_events(
            [(conversation.pk, [(1, run.pk, "answer", {"status": "delta", "content": "Cut "}),
                                (2, run.pk, "answer", {"status": "delta", "content": "off"})])]
        )  # fmt: skip
        Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))

    await sync_to_async(die_mid_answer)()
    assert await sync_to_async(lifecycle.run_sweep_stale)() == 1

    kept = await Message.objects.aget(run=run, role=Message.Role.ASSISTANT)
    assert kept.incomplete and kept.content == "Cut off"
    assert (await Run.objects.aget(pk=run.pk)).status == "failed"
    # The report carries what was kept: a client that assembled more (frames the dead
    # worker sent but never logged) takes this instead.
    report = await RunEvent.objects.filter(run=run, channel="error").aget()
    assert report.payload["answer"] == "Cut off" and report.seq > 2


async def test_the_sweep_turns_a_dead_runs_waiting_follow_up_into_a_plain_message(
    user, chat_model, no_launch, client
):
    """A follow-up the dead run never took in does not wait for ever: like after a Stop,
    it stays as typed (unpinned, unanswered), on open pages too, after the report."""
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "tell me")
    assert await sync_to_async(lifecycle.run_claim)(run_id=run.pk) is not None
    followup, _, injected = await sync_to_async(post)(conversation, user, "and also")
    assert injected
    await Run.objects.filter(pk=run.pk).aupdate(heartbeat_at=timezone.now() - timedelta(hours=1))

    assert await sync_to_async(lifecycle.run_sweep_stale)() == 1

    followup = await Message.objects.aget(pk=followup.pk)
    assert followup.kind == Message.Kind.CHAT and not followup.pinned
    channels = [e.channel async for e in RunEvent.objects.filter(run=run).order_by("seq")]
    assert channels[-2:] == ["error", "unanswered"]
    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert f'id="inject-{followup.pk}"' not in page and f'id="msg-{followup.pk}"' in page


async def test_a_run_reported_interrupted_while_alive_drops_its_late_answer(
    user, chat_model, llm_server, no_launch
):
    """Its process could not heartbeat (say, the database was away) and a sweep reported
    it interrupted: when it then finishes, what the user was told stands. No answer is
    saved over the report, no done event follows it."""
    llm_server.push({"chunks": ["Late ", "answer"], "after_release": "answer"})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "tell me")
    running = asyncio.ensure_future(execute(run.pk))
    assert await asyncio.to_thread(llm_server.wait_for_requests, 1, 10)  # the answer waits
    await Run.objects.filter(pk=run.pk).aupdate(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert await sync_to_async(lifecycle.run_sweep_stale)() == 1

    llm_server.release("answer")
    await asyncio.wait_for(running, 10)

    run = await Run.objects.aget(pk=run.pk)
    assert run.status == "failed" and "interrupted" in run.error
    assert not await Message.objects.filter(run=run, role=Message.Role.ASSISTANT).aexists()
    channels = [e.channel async for e in RunEvent.objects.filter(run=run).order_by("seq")]
    assert "done" not in channels and channels[-1] == "error"


async def test_an_answer_whose_stream_breaks_off_is_saved_incomplete_with_a_retry(
    user, chat_model, llm_server, no_launch, client
):
    """Not "succeeded" with part of the text: incomplete, saying why, with a Retry."""
    provider = chat_model.provider
    provider.timeout = 0.5  # the read timeout that cuts the stalled stream
    await provider.asave(update_fields=["timeout"])
    llm_server.push({"chunks": ["The first half", " never comes"], "hang": 10})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "explain")

    assert await execute(run.pk) == "incomplete"

    run = await Run.objects.aget(pk=run.pk)
    assert "stopped sending the answer partway" in run.error
    kept = await Message.objects.aget(run=run, role=Message.Role.ASSISTANT)
    assert kept.incomplete and kept.content == "The first half"
    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert "The first half" in page and "stopped sending the answer partway" in page
    assert f"/runs/{run.pk}/retry/" in page


@override_settings(AGENTSITE_RUN_DEADLINE_SECONDS=0.5)
async def test_a_run_past_its_deadline_is_stopped_saying_so(
    user, chat_model, llm_server, no_launch
):
    llm_server.push({"content": "too late", "delay": 10})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "take forever")
    started = time.monotonic()

    assert await execute(run.pk) == "failed"

    assert time.monotonic() - started < 5
    run = await Run.objects.aget(pk=run.pk)
    assert run.error == "The run reached its time limit (0.5 seconds) and was stopped."
    error = await RunEvent.objects.filter(run=run, channel="error").aget()
    assert error.payload == {"message": run.error, "status": "failed", "answer": ""}


@override_settings(AGENTSITE_RUN_HEARTBEAT_SECONDS=600)
async def test_stop_mid_run_cancels_the_follow_up_it_had_not_taken_in(
    user, chat_model, llm_server, no_launch
):
    llm_server.push({"content": "never", "delay": 30})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "take your time")

    def follow_up_then_stop() -> Message:
        llm_server.wait_for_requests(1, timeout=10)
        followup, _same, injected = post(conversation, user, "also this")
        assert injected
        services.run_cancel(run=Run.objects.get(pk=run.pk))
        return followup

    stopping = asyncio.ensure_future(sync_to_async(follow_up_then_stop)())
    outcome = await execute_run(run.pk)
    followup = await stopping

    assert outcome.status == "cancelled" and outcome.followup_run_id is None
    followup = await Message.objects.aget(pk=followup.pk)
    assert followup.kind == Message.Kind.CHAT and not followup.pinned
    assert await Run.objects.filter(conversation=conversation).acount() == 1


async def frames_sent(layer, channel) -> list[dict]:
    """Every message the channel holds (the run has returned: all of them are sent)."""
    frames = []
    while True:
        try:
            frames.append(await asyncio.wait_for(layer.receive(channel), timeout=0.2))
        except TimeoutError:
            return frames


@override_settings(AGENTSITE_RUN_HEARTBEAT_SECONDS=600)
async def test_a_stop_shows_the_follow_up_it_had_not_taken_in_as_an_ordinary_message(
    user, chat_model, llm_server, no_launch, client
):
    """The live page showed the follow-up as sent and waiting for the agent: the frames
    of the Stop take that away and show it as the ordinary message a reload shows, and a
    reconnect's catch-up shows the same (issue 27)."""
    llm_server.push({"content": "never", "delay": 30})
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    _, run, _ = await sync_to_async(post)(conversation, user, "take your time")
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(conversation_group(conversation.pk), channel)

    def follow_up_then_stop() -> Message:
        llm_server.wait_for_requests(1, timeout=10)
        followup, _same, injected = post(conversation, user, "also <this>")
        assert injected
        services.run_cancel(run=Run.objects.get(pk=run.pk))
        return followup

    stopping = asyncio.ensure_future(sync_to_async(follow_up_then_stop)())
    assert (await execute_run(run.pk)).status == "cancelled"
    followup = await stopping
    frames = await frames_sent(layer, channel)

    stopped = next(i for i, f in enumerate(frames) if f["channel"] == "error")
    live = "".join((await rendered(frames))[stopped:])
    assert f'id="inject-{followup.pk}" hx-swap-oob="delete"' in live  # no longer pending
    assert f'id="msg-{followup.pk}"' in live and "also &lt;this&gt;" in live
    assert "the agent will read it" not in live
    await sync_to_async(client.force_login)(user)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert f'id="msg-{followup.pk}"' in page and f'id="inject-{followup.pk}"' not in page
    caught_up, _seq = await sync_to_async(timeline.catch_up_frames)(
        conversation_id=conversation.pk, after_seq=0
    )
    caught_up_html = "".join(caught_up)
    assert f'id="msg-{followup.pk}"' in caught_up_html
    assert "the agent will read it" not in caught_up_html
