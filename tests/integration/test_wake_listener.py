"""The run poller's wake-up listener on a Redis channel layer (team mode's workers)."""

from __future__ import annotations

import asyncio

import pytest
import redis
from channels.layers import get_channel_layer

from conversations import launcher
from conversations.watcher import WAKE_GROUP, RunPoller
from engine import CancelToken
from tests.integration.stack import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def redis_layer(settings, redis_url):
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "agentsite.channel_layer.RedisPubSubLayer",
            "CONFIG": {"hosts": [redis_url]},
        }
    }
    return redis_url


async def _watch_then_forget(poller: RunPoller, run_id: int) -> asyncio.Task:
    """Watch a run on the running loop until its listener subscribed, then forget it."""
    await poller.watch(run_id, CancelToken(), lambda _id, _text: None)
    listener = poller._listeners[asyncio.get_running_loop()][0]
    poller.forget(run_id)
    return listener


def wake_subscribers(redis_url: str) -> int:
    """Connections subscribed to the wake-up group's Redis channel."""
    channel = f"asgi__group__{WAKE_GROUP}"
    return dict(redis.Redis.from_url(redis_url).pubsub_numsub(channel))[channel.encode()]


@pytest.mark.django_db(transaction=True)
def test_the_process_run_loop_keeps_its_wake_subscription_between_runs(redis_layer):
    poller, loop = RunPoller(), launcher._target_loop()
    assert launcher.is_process_run_loop(loop)

    def on_loop(coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(10)

    first = on_loop(_watch_then_forget(poller, 1))
    try:
        second = on_loop(_watch_then_forget(poller, 2))
        # The next run starts without subscribing again: the same listener, still listening.
        assert second is first
        assert not first.done()
        # (Redis applies the subscription a moment after the listener sent it.)
        wait_for(lambda: wake_subscribers(redis_layer) == 1, timeout=5, what="one subscriber")
    finally:

        async def stop() -> None:
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
            await get_channel_layer().flush()

        on_loop(stop())


@pytest.mark.django_db(transaction=True)
async def test_another_loop_stops_its_listener_with_its_last_run(redis_layer):
    poller = RunPoller()
    assert not launcher.is_process_run_loop(asyncio.get_running_loop())
    try:
        listener = await _watch_then_forget(poller, 1)

        with pytest.raises(asyncio.CancelledError):
            await listener  # no task outlives a loop that may close after its run
        wait_for(lambda: wake_subscribers(redis_layer) == 0, timeout=5, what="no subscriber")
    finally:
        await get_channel_layer().flush()
