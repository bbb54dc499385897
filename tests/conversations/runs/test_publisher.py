"""The publisher's coalescing never loses a delta, and batches a fast stream."""

from __future__ import annotations

import asyncio

import pytest

from conversations import publisher
from engine.events import AnswerDelta, AnswerDone


class GatedLayer:
    """A channel layer whose sends can be held open, to catch a frame mid-send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.entered = asyncio.Event()

    async def group_send(self, group: str, message: dict) -> None:
        self.entered.set()
        await self.hold.wait()
        self.sent.append((message["channel"], message["payload"]))

    def text(self) -> str:
        return "".join(p.get("content", "") for c, p in self.sent if c == "answer")


def make_publisher(layer: GatedLayer) -> publisher.RunPublisher:
    pub = publisher.RunPublisher(run_id=1, conversation_id=1, start_seq=0)
    pub.layer = layer

    async def no_flush() -> None:  # the log is not under test here
        return None

    pub.flush = no_flush  # type: ignore[method-assign]
    return pub


async def test_a_delta_mid_send_is_not_lost_when_the_answer_ends():
    layer = GatedLayer()
    pub = make_publisher(layer)
    await pub.on_event(AnswerDelta("a"))  # idle stream: sent at once
    await pub.on_event(AnswerDelta("b"))  # right behind it: batched, a timed send scheduled
    layer.hold.clear()
    layer.entered.clear()
    await asyncio.wait_for(layer.entered.wait(), 5)  # the timed send is now inside publish()
    done = asyncio.ensure_future(pub.on_event(AnswerDone()))  # the answer ends meanwhile
    await asyncio.sleep(0)
    layer.hold.set()
    await asyncio.wait_for(done, 5)
    await pub.close()
    assert layer.text() == "ab"
    assert [c for c, _p in layer.sent][-1] == "answer"


async def test_a_burst_is_coalesced_and_complete():
    layer = GatedLayer()
    pub = make_publisher(layer)
    for i in range(200):  # all at once: far faster than one frame per interval
        await pub.on_event(AnswerDelta(f"t{i} "))
    await pub.close()
    assert layer.text() == "".join(f"t{i} " for i in range(200))
    assert len(layer.sent) < 10  # the first delta alone, then batches


@pytest.mark.django_db(transaction=True)
async def test_concurrent_runs_share_one_log_write(user, monkeypatch):
    """Streaming runs of one process are logged together: one transaction, not one per run."""
    from asgiref.sync import sync_to_async

    from conversations import services
    from conversations.models import Conversation, RunEvent

    monkeypatch.setattr("conversations.launcher.launch", lambda run_id: None)
    calls: list[list[int]] = []
    real_write = publisher._write_event_batches

    def counting_write(batches):
        calls.append([conversation_id for conversation_id, _batch in batches])
        real_write(batches)

    monkeypatch.setattr(publisher, "_write_event_batches", counting_write)

    def start_run():
        conversation = services.conversation_create(owner=user)
        _, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
        return conversation.pk, run.pk

    runs = [await sync_to_async(start_run)() for _ in range(3)]
    pubs = [publisher.RunPublisher(run_id=r, conversation_id=c, start_seq=0) for c, r in runs]
    for pub in pubs:
        await pub.on_event(AnswerDelta(f"answer of run {pub.run_id}"))
    await publisher.log_writer()._task  # the shared write, FLUSH_INTERVAL later

    assert calls == [[c for c, _r in runs]]
    for conversation_id, run_id in runs:
        contents = [
            e.payload["content"]
            async for e in RunEvent.objects.filter(run_id=run_id).order_by("seq")
        ]
        assert contents == [f"answer of run {run_id}"]
        conversation = await Conversation.objects.aget(pk=conversation_id)
        assert conversation.last_event_seq == 1
    for pub in pubs:
        await pub.close()
    assert len(calls) == 1  # nothing left to write on close


async def test_a_saturated_process_batches_even_a_trickle():
    """When sending a frame has become slow, every delta waits for the next batch."""
    layer = GatedLayer()
    pub = make_publisher(layer)
    pub._publish_cost = 2 * publisher.BUSY_PUBLISH_COST  # as measured under overload
    await pub.on_event(AnswerDelta("a"))  # would go out at once on an idle process
    await pub.on_event(AnswerDelta("b"))
    assert layer.sent == []
    await pub.close()
    assert layer.sent == [("answer", {"status": "delta", "content": "ab"})]
