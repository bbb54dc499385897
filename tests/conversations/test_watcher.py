"""The run poller: a woken tick checks the woken runs, every tick heart-beats them all."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from conversations import launcher, services
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


async def _watch_then_forget(poller: RunPoller, run_id: int) -> asyncio.Task:
    """Watch a run on the running loop until its listener subscribed, then forget it."""
    await poller.watch(run_id, CancelToken(), lambda _id, _text: None)
    listener = poller._listeners[asyncio.get_running_loop()][0]
    poller.forget(run_id)
    return listener


def test_the_process_run_loop_keeps_its_wake_subscription_between_runs():
    poller, loop = RunPoller(), launcher._target_loop()
    assert launcher.is_process_run_loop(loop)

    first = asyncio.run_coroutine_threadsafe(_watch_then_forget(poller, 1), loop).result(5)
    second = asyncio.run_coroutine_threadsafe(_watch_then_forget(poller, 2), loop).result(5)

    # The next run starts without subscribing again: the same listener, still listening.
    assert second is first
    assert not first.done()


async def test_another_loop_stops_its_listener_with_its_last_run():
    poller = RunPoller()
    assert not launcher.is_process_run_loop(asyncio.get_running_loop())

    listener = await _watch_then_forget(poller, 1)

    with pytest.raises(asyncio.CancelledError):
        await listener  # no task outlives a loop that may close after its run
