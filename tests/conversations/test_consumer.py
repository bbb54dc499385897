"""The websocket consumer: owner only, catch-up on connect, live frames once each."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.utils import timezone

from agentsite.asgi import application
from conversations import selectors, services
from conversations.models import Run, RunEvent
from conversations.runs import lifecycle
from conversations.runs.control import mark_followup_delivered
from conversations.runs.launcher import Sweeper
from conversations.runs.publisher import IDLE_GAP, RunPublisher
from engine.events import AnswerDelta, IterationDone, IterationStart, ThinkingStart

pytestmark = pytest.mark.django_db(transaction=True)


def login_cookie(client, user) -> bytes:
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def open_socket(conversation_id: int, cookie: bytes, after: int = 0):
    communicator = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation_id}/?after={after}",
        headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)],
    )
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.fixture
def setup_run(user, monkeypatch):
    monkeypatch.setattr("conversations.runs.launcher.launch", lambda run_id: None)

    def make():
        conversation = services.conversation_create(owner=user)
        _, run, _ = services.message_post(conversation=conversation, user=user, content="hi")
        return conversation, run

    return make


async def test_live_events_arrive_rendered_with_stable_ids(client, user, setup_run):
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    socket = await open_socket(conversation.pk, cookie)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)

    await publisher.on_event(ThinkingStart(1))
    frame = await socket.receive_from(timeout=2)
    assert f'id="status-{run.pk}"' in frame and "Thinking" in frame

    await publisher.on_event(IterationStart(1, "calculator", {"expression": "<b>1+1</b>"}))
    frame = await socket.receive_from(timeout=2)
    assert f"beforeend:#steps-{run.pk}" in frame
    assert f'id="card-{run.pk}-1"' in frame
    assert "&lt;b&gt;1+1&lt;/b&gt;" in frame and "<b>1+1</b>" not in frame  # escaped
    assert "Running calculator" in frame  # the status line travels in the same frame

    await publisher.on_event(IterationDone(1, "calculator", "2", None, 0.01))
    frame = await socket.receive_from(timeout=2)
    assert f'id="card-{run.pk}-1"' in frame and 'hx-swap-oob="true"' in frame and ">2<" in frame

    await publisher.on_event(AnswerDelta("Hello <script>"))
    frame = await socket.receive_from(timeout=2)
    assert f"beforeend:#answer-src-{run.pk}" in frame and "&lt;script&gt;" in frame
    await publisher.close()
    await socket.disconnect()


async def test_reconnect_catches_up_then_streams_without_duplicates(client, user, setup_run):
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(IterationStart(1, "calculator", {"expression": "1+1"}))
    await publisher.on_event(AnswerDelta("Part one. "))
    await publisher.close()  # logged and sent before the page connects

    socket = await open_socket(conversation.pk, cookie, after=0)
    catch_up = await socket.receive_from(timeout=2)
    assert f'id="run-{run.pk}"' in catch_up and 'hx-swap-oob="outerHTML"' in catch_up
    assert "Part one." in catch_up and f'id="card-{run.pk}-1"' in catch_up
    # One idempotent block (no nested swaps), then the composer's status line and Stop.
    block, _, composer = catch_up.partition('<div id="composer-status"')
    assert block.count("hx-swap-oob") == 1 and composer.count("hx-swap-oob") == 2
    assert "Running calculator" in composer and f'data-run="{run.pk}"' in composer

    await publisher.on_event(AnswerDelta("Part two."))
    live = await socket.receive_from(timeout=2)
    assert "Part two." in live and "Part one." not in live
    assert await socket.receive_nothing(timeout=0.2)
    await publisher.close()
    await socket.disconnect()


async def test_a_connect_after_the_last_event_sends_nothing(client, user, setup_run):
    """The page shows everything up to its last event: a connect from there sends nothing;
    from before, it catches up."""
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(ThinkingStart(1))
    await publisher.on_event(AnswerDelta("All written."))
    await publisher.close()
    last_seq = publisher.seq

    socket = await open_socket(conversation.pk, cookie, after=0)
    catch_up = await socket.receive_from(timeout=2)
    assert f'id="run-{run.pk}"' in catch_up and "All written." in catch_up
    await socket.disconnect()

    socket = await open_socket(conversation.pk, cookie, after=last_seq)
    assert await socket.receive_nothing(timeout=0.2)
    await socket.disconnect()


async def test_a_socket_joining_mid_stream_gets_what_was_sent_before_it(client, user, setup_run):
    """Frames sent before the page joined, not yet in the log when it read it: the next
    frame shows the gap, and the page is caught up once they are logged."""
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(AnswerDelta("Sent before "))
    await publisher.drain()  # out, not yet logged
    socket = await open_socket(conversation.pk, cookie, after=0)
    await asyncio.sleep(2 * IDLE_GAP)
    await publisher.on_event(AnswerDelta("the page joined."))

    seen = ""
    while "the page joined." not in seen:
        seen += await socket.receive_from(timeout=5)

    # The answer's markdown source, as the page assembles it: the caught-up run block's,
    # then the deltas appended to it; nothing missing, nothing twice.
    source = re.search(rf'id="answer-src-{run.pk}"[^>]*>(.*?)</div>', seen, re.S)
    appended = re.findall(rf'beforeend:#answer-src-{run.pk}">(.*?)</span>', seen, re.S)
    assert source is not None, seen
    assert source.group(1) + "".join(appended) == "Sent before the page joined."
    await publisher.close()
    await socket.disconnect()


async def test_a_socket_joining_while_the_run_waits_is_caught_up_from_the_log(
    client, user, setup_run
):
    """No frame follows (the run waits on a tool): the page reads the log again."""
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(AnswerDelta("Sent before the page joined."))
    await publisher.drain()  # sent (not written) before the socket joins
    socket = await open_socket(conversation.pk, cookie, after=0)

    frame = await socket.receive_from(timeout=5)

    assert f'id="run-{run.pk}"' in frame and "Sent before the page joined." in frame
    await publisher.close()
    assert await socket.receive_nothing(timeout=0.2)
    await socket.disconnect()


async def test_other_users_cannot_subscribe(client, user, other_user, setup_run):
    conversation, _ = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, other_user)
    communicator = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)],
    )
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()
    # The consumer joined the group before its ownership check, and left it on refusal.
    assert not get_channel_layer().groups.get(f"conversation.{conversation.pk}")


async def test_deltas_are_coalesced_while_streaming(user, setup_run):
    conversation, run = await sync_to_async(setup_run)()
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(f"conversation.{conversation.pk}", channel)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    for i in range(50):
        await publisher.on_event(AnswerDelta(f"t{i} "))
    await publisher.close()
    frames = []
    while True:
        try:
            frames.append(await asyncio.wait_for(layer.receive(channel), timeout=0.2))
        except TimeoutError:
            break
    text = "".join(f["payload"]["content"] for f in frames)
    assert text == "".join(f"t{i} " for i in range(50))
    assert 1 <= len(frames) < 50  # merged while they arrive faster than frames go out
    stored = await sync_to_async(list)(run.events.order_by("seq").values_list("payload", flat=True))
    assert [p["content"] for p in stored] == [f["payload"]["content"] for f in frames]


async def test_frames_keep_flowing_while_a_page_is_slow(client, user, setup_run, monkeypatch):
    """A slow page (its sync view on a thread of its own) must not stall a streamed answer."""
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    socket = await open_socket(conversation.pk, cookie)
    entered, release = threading.Event(), threading.Event()
    listed = selectors.conversation_list

    def slow_list(**kwargs):
        entered.set()
        release.wait(10)
        return listed(**kwargs)

    monkeypatch.setattr(selectors, "conversation_list", slow_list)
    page = HttpCommunicator(
        application, "GET", "/", headers=[(b"host", b"127.0.0.1"), (b"cookie", cookie)]
    )
    loading = asyncio.ensure_future(page.get_response(timeout=15))
    assert await asyncio.to_thread(entered.wait, 5)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    try:
        await publisher.on_event(AnswerDelta("still streaming"))
        frame = await socket.receive_from(timeout=2)
        assert "still streaming" in frame
    finally:
        release.set()
        response = await loading
    assert response["status"] == 200
    await publisher.close()
    await socket.disconnect()


async def test_reconnect_after_a_followup_run_started_shows_it_after_its_questions(
    client, user, setup_run
):
    """The follow-up run's block reaches a page that missed the live frame (it has no
    such block), in the slot after the run that left the follow-up over."""
    conversation, run = await sync_to_async(setup_run)()
    followup = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="and <why>?"
    )
    message, _, injected = followup
    assert injected
    second = await sync_to_async(
        lambda: lifecycle.run_create_followup(run=run, message_ids=[message.pk])
    )()
    assert second is not None
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    payload = {"run_id": second.pk, "messages": [{"id": message.pk, "content": message.content}]}
    await publisher.publish("followup", payload)
    await publisher.close()

    socket = await open_socket(conversation.pk, cookie, after=0)
    block = await socket.receive_from(timeout=2)
    slot = await socket.receive_from(timeout=2)

    assert f'id="run-{run.pk}"' in block
    assert f'id="next-{run.pk}"' in slot and 'hx-swap-oob="outerHTML"' in slot
    assert slot.index(f'id="msg-{message.pk}"') < slot.index(f'id="run-{second.pk}"')
    assert "and &lt;why&gt;?" in slot
    assert f'id="next-{second.pk}"' in slot  # where a follow-up of that run would go
    await socket.disconnect()


async def test_a_catch_up_keeps_a_follow_up_not_yet_delivered(client, user, setup_run):
    """A reload before the run took the follow-up in: the socket's catch-up re-renders
    the run block, and the pending follow-up must stay in it."""
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(ThinkingStart(1))
    await publisher.flush()
    followup, _run, injected = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="also check Paris"
    )
    assert injected

    socket = await open_socket(conversation.pk, cookie, after=0)
    catch_up = await socket.receive_from(timeout=2)

    assert f'id="run-{run.pk}"' in catch_up
    assert f'id="inject-{followup.pk}"' in catch_up and "also check Paris" in catch_up
    await publisher.close()
    await socket.disconnect()


async def test_a_reload_shows_a_follow_up_delivered_but_not_yet_taken_in(client, user, setup_run):
    """The run received the follow-up (marked delivered) but its model has not read it
    yet (no inject event): a page load and a reconnect's catch-up still show it waiting."""
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(ThinkingStart(1))
    await publisher.flush()
    followup, _run, injected = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="also check Paris"
    )
    assert injected
    assert await sync_to_async(mark_followup_delivered)(run.pk, followup.pk)
    waiting = "the agent will read it after its current step"

    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    socket = await open_socket(conversation.pk, cookie, after=0)
    catch_up = await socket.receive_from(timeout=2)

    for html in (page, catch_up):
        assert f'id="inject-{followup.pk}"' in html and "also check Paris" in html
        assert waiting in html
    await publisher.close()
    await socket.disconnect()


async def test_the_server_reports_a_dead_run_without_a_page_load(
    user, setup_run, settings, runtime
):
    """A run whose process died is reported by the server's own periodic sweep: no page
    load, no post, no worker needed (an API client or an open socket sees it)."""
    settings.AGENTSITE_RUN_SWEEP_SECONDS = 0.1
    settings.AGENTSITE_RUN_STALE_SECONDS = 0.5  # it judges once the database answered so long
    runtime.add(Sweeper()).start(asyncio.get_running_loop())  # as a server's runtime has
    conversation, run = await sync_to_async(setup_run)()

    def die() -> None:  # claimed, then its process stopped heart-beating long ago
        lifecycle.run_claim(run_id=run.pk)
        stale = timezone.now() - timedelta(hours=1)
        Run.objects.filter(pk=run.pk).update(heartbeat_at=stale)

    await sync_to_async(die)()
    deadline = time.monotonic() + 10
    while (await Run.objects.aget(pk=run.pk)).status == Run.Status.RUNNING:
        assert time.monotonic() < deadline, "the server never swept the dead run"
        await asyncio.sleep(0.05)

    swept = await Run.objects.aget(pk=run.pk)
    assert swept.status == Run.Status.FAILED and "interrupted" in swept.error


async def test_a_dead_runs_sent_numbers_are_never_reused(client, user, setup_run, monkeypatch):
    """The run's process died after sending frames it never wrote: the sweep's report is
    numbered after them, so the open page shows it instead of dropping it as seen, and the
    numbers the page saw only ever increase."""
    from conversations.runs import publisher as publishing

    conversation, run = await sync_to_async(setup_run)()
    claimed = await sync_to_async(lifecycle.run_claim)(run_id=run.pk)
    dying = RunPublisher(
        run_id=run.pk,
        conversation_id=conversation.pk,
        start_seq=claimed.last_event_seq,
        reserved=claimed.reserved_event_numbers,
    )

    def never_written(batches):
        raise RuntimeError("the process died before writing")

    monkeypatch.setattr(publishing, "write_events", never_written)
    cookie = await sync_to_async(login_cookie)(client, user)
    socket = await open_socket(conversation.pk, cookie)
    await dying.on_event(ThinkingStart(1))
    await dying.on_event(AnswerDelta("Half of"))
    seen = [await socket.receive_from(timeout=2) for _ in range(2)]
    monkeypatch.undo()

    def die() -> None:
        stale = timezone.now() - timedelta(hours=1)
        Run.objects.filter(pk=run.pk).update(heartbeat_at=stale)
        assert lifecycle.run_sweep_stale() == 1

    await sync_to_async(die)()
    report = await socket.receive_from(timeout=2)

    assert "Half of" in seen[-1]
    assert "interrupted" in report  # shown, not dropped as already seen
    swept = [e async for e in RunEvent.objects.filter(run_id=run.pk).values_list("seq", flat=True)]
    assert min(swept) > dying.seq  # after every number the dead run sent
    await socket.disconnect()
