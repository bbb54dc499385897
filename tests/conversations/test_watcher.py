"""The run poller: a woken tick checks the woken runs, every tick heart-beats them all."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.models import Message, Run
from conversations.watcher import RunPoller, _Watched
from engine import CancelToken

pytestmark = pytest.mark.django_db(transaction=True)


async def queued_run_with_followup(user, text: str) -> Run:
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    post = sync_to_async(services.message_post)
    _, run, _ = await post(conversation=conversation, user=user, content="start")
    await post(conversation=conversation, user=user, content=text)  # the run is active
    return run


async def test_a_woken_tick_delivers_only_the_woken_runs_follow_ups(user, chat_model, no_launch):
    woken, other = [await queued_run_with_followup(user, text) for text in ("for A", "for B")]
    delivered: list[str] = []
    loop = asyncio.get_running_loop()
    watched = {
        run.pk: _Watched(loop, CancelToken(), lambda _id, text: delivered.append(text))
        for run in (woken, other)
    }

    await sync_to_async(RunPoller()._tick)(watched, {woken.pk: watched[woken.pk]})
    # Deliveries were queued on this loop before the tick returned: they have run.

    assert delivered == ["for A"]
    undelivered = Message.objects.filter(kind="inject", delivered_at__isnull=True)
    assert [m.content async for m in undelivered] == ["for B"]
    beats = [r.heartbeat_at async for r in Run.objects.filter(pk__in=[woken.pk, other.pk])]
    assert all(beats), "every watched run is heart-beaten, checked or not"


async def test_a_full_tick_delivers_every_runs_follow_ups(user, chat_model, no_launch):
    runs = [await queued_run_with_followup(user, text) for text in ("for A", "for B")]
    delivered: list[str] = []
    loop = asyncio.get_running_loop()
    watched = {
        run.pk: _Watched(loop, CancelToken(), lambda _id, text: delivered.append(text))
        for run in runs
    }

    await sync_to_async(RunPoller()._tick)(watched, watched)

    assert sorted(delivered) == ["for A", "for B"]


async def test_an_in_memory_layer_needs_no_wake_listener(settings):
    """Embedded mode: no other process can send a wake-up; the run starts at once."""
    poller = RunPoller()

    await poller.watch(1, CancelToken(), lambda _id, _text: None)
    try:
        assert poller._listeners == {}
    finally:
        poller.forget(1)
