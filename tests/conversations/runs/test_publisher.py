"""The publisher: an event is in the log before its frame goes out, deltas merge under
load and are never lost, the runs of one loop share their writes."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import DatabaseError

from conversations import services
from conversations.models import RunEvent
from conversations.runs import publisher
from engine.events import AnswerDelta, AnswerDone, ThinkingStart

pytestmark = pytest.mark.django_db(transaction=True)


class RecordingLayer:
    """A channel layer that records what was sent, whether it was logged by then, and can
    hold a send open."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []
        self.logged_when_sent: list[bool] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.entered = asyncio.Event()

    async def group_send(self, group: str, message: dict) -> None:
        self.entered.set()
        logged = await sync_to_async(
            RunEvent.objects.filter(run_id=message["run_id"], seq=message["seq"]).exists
        )()
        self.logged_when_sent.append(logged)
        await self.hold.wait()
        self.sent.append((message["channel"], message["payload"]))

    def text(self) -> str:
        return "".join(p.get("content", "") for c, p in self.sent if c == "answer")


@pytest.fixture
def new_run(user, no_launch):
    def make() -> tuple[int, int]:
        conversation = services.conversation_create(owner=user)
        _, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
        return conversation.pk, run.pk

    return sync_to_async(make)


async def make_publisher(new_run, layer: RecordingLayer) -> publisher.RunPublisher:
    conversation_id, run_id = await new_run()
    pub = publisher.RunPublisher(run_id=run_id, conversation_id=conversation_id, start_seq=0)
    pub.layer = layer
    return pub


async def logged_contents(run_id: int) -> list[str]:
    return [
        e.payload.get("content", "")
        async for e in RunEvent.objects.filter(run_id=run_id, channel="answer").order_by("seq")
    ]


async def test_every_frame_is_logged_before_it_is_sent(new_run):
    layer = RecordingLayer()
    pub = await make_publisher(new_run, layer)

    await pub.on_event(ThinkingStart(1))
    await pub.on_event(AnswerDelta("Hello"))
    await pub.on_event(AnswerDone())
    await pub.close()

    assert [c for c, _p in layer.sent] == ["step", "answer", "answer"]
    assert layer.logged_when_sent == [True, True, True]


async def test_a_burst_is_merged_into_few_frames_and_nothing_is_lost(new_run):
    layer = RecordingLayer()
    pub = await make_publisher(new_run, layer)

    for i in range(200):  # all at once: far faster than one frame per interval
        await pub.on_event(AnswerDelta(f"t{i} "))
    await pub.close()

    expected = "".join(f"t{i} " for i in range(200))
    assert layer.text() == expected
    assert len(layer.sent) < 10  # the first delta alone, then merged
    assert "".join(await logged_contents(pub.run_id)) == expected


async def test_a_delta_mid_send_is_not_lost_when_the_answer_ends(new_run):
    layer = RecordingLayer()
    pub = await make_publisher(new_run, layer)
    await pub.on_event(AnswerDelta("a"))  # a trickle: written and sent at once
    layer.hold.clear()
    layer.entered.clear()
    await asyncio.wait_for(layer.entered.wait(), 5)  # "a" is being sent now
    await pub.on_event(AnswerDelta("b"))  # arrives meanwhile
    ended = asyncio.ensure_future(pub.on_event(AnswerDone()))  # and the answer ends
    await asyncio.sleep(0.05)
    layer.hold.set()
    await asyncio.wait_for(ended, 5)
    await pub.close()

    assert layer.text() == "ab"
    assert layer.sent[-1] == ("answer", {"status": "done"})


async def test_while_a_write_is_slow_the_deltas_behind_it_merge(new_run, monkeypatch):
    """Under load a run sends fewer, larger frames instead of queueing them."""
    layer = RecordingLayer()
    pub = await make_publisher(new_run, layer)
    real_write = publisher.write_events
    writing, release = threading.Event(), threading.Event()

    def slow_write(batches):
        writing.set()
        assert release.wait(10)
        real_write(batches)

    monkeypatch.setattr(publisher, "write_events", slow_write)
    await pub.on_event(AnswerDelta("first "))
    assert await asyncio.to_thread(writing.wait, 10)
    for word in ("second ", "third ", "fourth"):
        await asyncio.sleep(2 * publisher.IDLE_GAP)  # each a trickle of its own
        await pub.on_event(AnswerDelta(word))
    release.set()
    await pub.close()

    assert [p["content"] for _c, p in layer.sent] == ["first ", "second third fourth"]


async def test_runs_of_one_loop_share_a_write(new_run, monkeypatch):
    calls: list[list[int]] = []
    real_write = publisher.write_events

    def counting_write(batches):
        calls.append([conversation_id for conversation_id, _entries in batches])
        real_write(batches)

    monkeypatch.setattr(publisher, "write_events", counting_write)
    pubs = [await make_publisher(new_run, RecordingLayer()) for _ in range(3)]

    await asyncio.gather(*(pub.publish("step", {"type": "thinking"}) for pub in pubs))

    assert calls == [[pub.conversation_id for pub in pubs]]
    for pub in pubs:
        assert await RunEvent.objects.filter(run_id=pub.run_id).acount() == 1


async def test_an_event_that_cannot_be_logged_is_not_sent_and_the_run_hears_of_it(
    new_run, monkeypatch
):
    def failing_write(batches):
        raise DatabaseError("the database went away")

    monkeypatch.setattr(publisher, "write_events", failing_write)
    monkeypatch.setattr(publisher, "WRITE_RETRY_DELAYS", (0.0,))
    layer = RecordingLayer()
    pub = await make_publisher(new_run, layer)

    with pytest.raises(RuntimeError, match="could not be saved"):
        await pub.publish("step", {"type": "thinking"})

    assert layer.sent == []
