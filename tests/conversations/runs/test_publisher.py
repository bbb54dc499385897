"""The publisher: frames go out at once and every event reaches the log; a tool call is
logged before the run goes on; deltas merge and are never lost; the runs of one loop
share their log writes."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import DatabaseError

from conversations import services
from conversations.models import RunEvent
from conversations.runs import publisher
from engine.events import AnswerDelta, AnswerDone, IterationStart, ThinkingStart, ThoughtDelta

pytestmark = pytest.mark.django_db(transaction=True)


class GatedLayer:
    """A channel layer that records what was sent and can hold a send open."""

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


@pytest.fixture
def new_run(user, no_launch):
    def make() -> tuple[int, int]:
        conversation = services.conversation_create(owner=user)
        _, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
        return conversation.pk, run.pk

    return sync_to_async(make)


async def make_publisher(new_run, layer: GatedLayer | None = None) -> publisher.RunPublisher:
    conversation_id, run_id = await new_run()
    pub = publisher.RunPublisher(run_id=run_id, conversation_id=conversation_id, start_seq=0)
    pub.layer = layer or GatedLayer()
    return pub


async def logged(run_id: int) -> list[tuple[int, str, dict]]:
    rows = RunEvent.objects.filter(run_id=run_id).order_by("seq")
    return [(row.seq, row.channel, row.payload) async for row in rows]


async def test_frames_go_out_at_once_and_every_event_reaches_the_log(new_run):
    layer = GatedLayer()
    pub = await make_publisher(new_run, layer)

    await pub.on_event(ThinkingStart(1))
    await pub.on_event(AnswerDelta("Hello"))
    await pub.on_event(AnswerDone())
    assert [c for c, _p in layer.sent] == ["step", "answer", "answer"]
    assert await logged(pub.run_id) == []  # sent before any write
    await pub.close()

    assert [(seq, channel) for seq, channel, _p in await logged(pub.run_id)] == [
        (1, "step"),
        (2, "answer"),
        (3, "answer"),
    ]


async def test_a_tool_call_is_logged_before_the_run_goes_on(new_run):
    pub = await make_publisher(new_run)

    await pub.on_event(ThinkingStart(1))
    await pub.on_event(IterationStart(1, "calculator", {"expression": "1+1"}))

    rows = await logged(pub.run_id)  # no flush round has passed yet
    assert [(channel, payload.get("type")) for _s, channel, payload in rows] == [
        ("step", "thinking"),
        ("step", "iteration"),
    ]
    await pub.close()


async def test_a_burst_is_merged_into_few_frames_and_nothing_is_lost(new_run):
    layer = GatedLayer()
    pub = await make_publisher(new_run, layer)

    for i in range(200):  # all at once: far faster than one frame per interval
        await pub.on_event(AnswerDelta(f"t{i} "))
    await pub.close()

    expected = "".join(f"t{i} " for i in range(200))
    assert layer.text() == expected
    assert len(layer.sent) < 10  # the first delta alone, then merged
    assert "".join(p["content"] for _s, _c, p in await logged(pub.run_id)) == expected


async def test_a_delta_mid_send_is_not_lost_when_the_answer_ends(new_run):
    layer = GatedLayer()
    pub = await make_publisher(new_run, layer)
    await pub.on_event(AnswerDelta("a"))  # a quiet stream: sent at once
    await pub.on_event(AnswerDelta("b"))  # right behind it: held, a timed send scheduled
    layer.hold.clear()
    layer.entered.clear()
    await asyncio.wait_for(layer.entered.wait(), 5)  # the timed send is now inside publish()
    ended = asyncio.ensure_future(pub.on_event(AnswerDone()))  # the answer ends meanwhile
    await asyncio.sleep(0)
    layer.hold.set()
    await asyncio.wait_for(ended, 5)
    await pub.close()

    assert layer.text() == "ab"
    assert layer.sent[-1] == ("answer", {"status": "done"})


async def test_deltas_arriving_while_a_frame_is_sent_go_out_together_after_it(new_run):
    """A slow send (a saturated process or channel layer) holds neither the engine nor a
    queue of one-token frames: what arrives meanwhile goes out as one frame."""
    layer = GatedLayer()
    layer.hold.clear()
    pub = await make_publisher(new_run, layer)

    await asyncio.wait_for(pub.on_event(AnswerDelta("a")), 5)  # a quiet stream: sent at once
    await asyncio.wait_for(layer.entered.wait(), 5)  # ... and the send is slow
    for piece in "bcd":  # the engine goes on while "a" is still being sent
        await asyncio.wait_for(pub.on_event(AnswerDelta(piece)), 5)
    layer.hold.set()
    await pub.close()

    assert layer.sent == [
        ("answer", {"status": "delta", "content": "a"}),
        ("answer", {"status": "delta", "content": "bcd"}),
    ]


async def test_runs_of_one_loop_share_a_log_write(new_run, monkeypatch):
    calls: list[list[int]] = []
    real_write = publisher.write_events

    def counting_write(batches):
        calls.append([conversation_id for conversation_id, _entries in batches])
        real_write(batches)

    monkeypatch.setattr(publisher, "write_events", counting_write)
    pubs = [await make_publisher(new_run) for _ in range(3)]

    for pub in pubs:
        await pub.on_event(AnswerDelta(f"answer of run {pub.run_id}"))
        await pub.send_pending_delta()  # sent now, not by the run's delta sender
    await publisher.writer()._timer  # the shared round, FLUSH_INTERVAL later

    assert calls == [[pub.conversation_id for pub in pubs]]
    for pub in pubs:
        assert [p["content"] for _s, _c, p in await logged(pub.run_id)] == [
            f"answer of run {pub.run_id}"
        ]
        await pub.close()
    assert len(calls) == 1  # nothing was left to write


async def test_events_a_failed_write_kept_are_written_by_the_next(new_run, monkeypatch):
    real_write = publisher.write_events
    failures = [DatabaseError("the database went away")]

    def failing_once(batches):
        if failures:
            raise failures.pop()
        real_write(batches)

    monkeypatch.setattr(publisher, "write_events", failing_once)
    pub = await make_publisher(new_run)
    await pub.on_event(AnswerDelta("kept "))
    await pub.send_pending_delta()
    await publisher.writer()._timer  # this round fails
    assert pub.unwritten and not await logged(pub.run_id)

    await pub.on_event(AnswerDelta("and written"))
    await pub.close()

    assert [p["content"] for _s, _c, p in await logged(pub.run_id)] == ["kept ", "and written"]


async def test_thought_and_answer_text_merge_apart_and_keep_their_order(new_run):
    layer = GatedLayer()
    pub = await make_publisher(new_run, layer)

    for piece in ("Let ", "me ", "think."):
        await pub.on_event(ThoughtDelta(1, piece))
    for piece in ("The ", "answer."):
        await pub.on_event(AnswerDelta(piece))
    await pub.close()

    texts = [(c, p.get("type"), p["content"]) for c, p in layer.sent]
    assert "".join(t for c, _k, t in texts if c == "step") == "Let me think."
    assert "".join(t for c, _k, t in texts if c == "answer") == "The answer."
    kinds = [c for c, _k, _t in texts]
    assert kinds == sorted(kinds, key=lambda c: c == "answer")  # no thought after the answer
    assert all(layer.sent[i][1]["iteration"] == 1 for i, k in enumerate(kinds) if k == "step")
