"""Live events rendered by the web server (conversations/live/frames.py): once per event
for every socket of the server, and right for a run it first sees mid-way."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.live.frames import LiveFrames
from conversations.runs.publisher import RunPublisher
from engine.events import AnswerDelta, Done, IterationDone, IterationStart

pytestmark = pytest.mark.django_db(transaction=True)


class RecordingLayer:
    """The frames a run sends, as a server's group would receive them."""

    def __init__(self) -> None:
        self.frames: list[dict] = []

    async def group_send(self, group: str, message: dict) -> None:
        self.frames.append(message)


async def publisher_for(user, no_launch) -> RunPublisher:
    def new_run() -> tuple[int, int]:
        conversation = services.conversation_create(owner=user)
        _, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
        return conversation.pk, run.pk

    conversation_id, run_id = await sync_to_async(new_run)()
    publisher = RunPublisher(run_id=run_id, conversation_id=conversation_id, start_seq=0)
    publisher.layer = RecordingLayer()
    return publisher


async def test_every_socket_gets_the_same_frames_and_the_run_advances_once(user, no_launch):
    publisher = await publisher_for(user, no_launch)
    for part in ("Hello ", "there"):
        await publisher.on_event(AnswerDelta(part))
        await publisher.drain()
    await publisher.on_event(Done("Hello there", 1, {"total_tokens": 7}, 0.5))
    await publisher.close()
    frames = publisher.layer.frames
    live = LiveFrames()

    first_socket = [await live.html(frame) for frame in frames]
    second_socket = [await live.html(frame) for frame in frames]

    assert second_socket == first_socket
    assert "Hello " in first_socket[0] and "there" in first_socket[1]
    finish = first_socket[-1]
    assert "Hello there" in finish and "Hello thereHello there" not in finish
    assert "7 tokens" in finish


async def test_a_server_that_first_sees_a_run_mid_way_builds_it_from_the_log(user, no_launch):
    """Its first socket joined after the tool call began: the call's end still turns the
    running card into a finished one, as on the page of a socket that saw it all."""
    publisher = await publisher_for(user, no_launch)
    await publisher.on_event(IterationStart(1, "calculator", {"expression": "6*7"}))
    await publisher.flush()  # in the log
    await publisher.on_event(IterationDone(1, "calculator", "42", None, 0.01))
    await publisher.close()
    started, ended = publisher.layer.frames

    seen_from_the_start = LiveFrames()
    await seen_from_the_start.html(started)
    expected = await seen_from_the_start.html(ended)
    mid_way = await LiveFrames().html(ended)

    assert 'class="tool-card ok"' in expected and "42" in expected
    assert mid_way == expected
