"""The websocket consumer: owner only, catch-up on connect, live frames once each."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from agentsite.asgi import application
from conversations import services
from conversations.publisher import RunPublisher
from engine.events import AnswerDelta, IterationDone, IterationStart, ThinkingStart
from tests.conversations.statements import Statements

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
    monkeypatch.setattr("conversations.launcher.launch", lambda run_id: None)

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
    assert f"beforeend:#answer-{run.pk}" in frame and "&lt;script&gt;" in frame
    await publisher.close()
    await socket.disconnect()


async def test_reconnect_catches_up_then_streams_without_duplicates(client, user, setup_run):
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(IterationStart(1, "calculator", {"expression": "1+1"}))
    await publisher.on_event(AnswerDelta("Part one. "))
    await publisher.send_pending_delta()  # sent (in the tail), not yet written to the DB
    assert publisher.db_writes == 1  # only the tool call was written at once

    socket = await open_socket(conversation.pk, cookie, after=0)
    catch_up = await socket.receive_from(timeout=2)
    assert f'id="run-{run.pk}"' in catch_up and 'hx-swap-oob="outerHTML"' in catch_up
    assert "Part one." in catch_up and f'id="card-{run.pk}-1"' in catch_up
    assert catch_up.count("hx-swap-oob") == 1  # one idempotent block, no nested swaps

    await publisher.on_event(AnswerDelta("Part two."))
    live = await socket.receive_from(timeout=2)
    assert "Part two." in live and "Part one." not in live
    assert await socket.receive_nothing(timeout=0.2)
    await publisher.close()
    await socket.disconnect()


@override_settings(DEBUG=True)  # statements are logged
async def test_a_connect_reads_the_log_only_when_something_is_new(client, user, setup_run):
    """The page shows everything up to its last event: a connect then sends nothing and
    costs one query. Events written since (none left in the tail) are caught up."""
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await publisher.on_event(ThinkingStart(1))
    await publisher.on_event(AnswerDelta("All written."))
    await publisher.close()  # every event in the rows, none in the tail
    last_seq = publisher.seq

    socket = await open_socket(conversation.pk, cookie, after=0)
    catch_up = await socket.receive_from(timeout=2)
    assert f'id="run-{run.pk}"' in catch_up and "All written." in catch_up
    await socket.disconnect()

    with Statements() as statements:
        socket = await open_socket(conversation.pk, cookie, after=last_seq)
    assert await socket.receive_nothing(timeout=0.2)
    await socket.disconnect()
    reads = [sql for sql in statements.statements if "conversations_" in sql]
    assert len(reads) == 1 and "last_event_seq" in reads[0], statements.statements


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
    assert 1 < len(frames) < 50  # first delta at once, the rest batched
    assert publisher.db_writes <= 2
    stored = await sync_to_async(list)(run.events.order_by("seq").values_list("payload", flat=True))
    assert [p["content"] for p in stored] == [f["payload"]["content"] for f in frames]


async def test_events_stay_readable_while_their_batch_is_being_written(
    user, setup_run, monkeypatch
):
    """A reader during a flush must see every event (in the tail or in the rows)."""
    import threading

    from conversations import eventlog
    from conversations import publisher as publisher_module

    conversation, run = await sync_to_async(setup_run)()
    real_write = publisher_module._write_event_batches
    writing, release = threading.Event(), threading.Event()

    def gated_write(batches):
        writing.set()
        assert release.wait(10)
        real_write(batches)

    monkeypatch.setattr(publisher_module, "_write_event_batches", gated_write)
    pub = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    await pub.publish("answer", {"status": "delta", "content": "A"})
    await pub.publish("answer", {"status": "delta", "content": "B"})
    flushing = asyncio.ensure_future(pub.flush())
    assert await asyncio.to_thread(writing.wait, 10)
    await pub.publish("answer", {"status": "delta", "content": "C"})

    seen = await sync_to_async(eventlog.events_after)(conversation.pk, 0)
    assert [e[3]["content"] for e in seen] == ["A", "B", "C"]

    release.set()
    await flushing
    seen = await sync_to_async(eventlog.events_after)(conversation.pk, 0)
    assert [e[3]["content"] for e in seen] == ["A", "B", "C"]
    assert eventlog.tail_get(conversation.pk)[0][3]["content"] == "C"
    await pub.close()


async def test_frames_keep_flowing_while_a_sync_view_holds_the_sync_thread(client, user, setup_run):
    """A slow sync view (Django's one sync thread busy) must not stall a streamed answer."""
    conversation, run = await sync_to_async(setup_run)()
    cookie = await sync_to_async(login_cookie)(client, user)
    socket = await open_socket(conversation.pk, cookie)
    entered, release = threading.Event(), threading.Event()

    def slow_view() -> None:
        entered.set()
        release.wait(10)

    busy = asyncio.ensure_future(sync_to_async(slow_view)())  # thread_sensitive, like views
    assert await asyncio.to_thread(entered.wait, 5)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    try:
        await publisher.on_event(AnswerDelta("still streaming"))
        frame = await socket.receive_from(timeout=2)
        assert "still streaming" in frame
    finally:
        release.set()
        await busy
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
        lambda: services.run_create_followup(run=run, message_ids=[message.pk])
    )()
    assert second is not None
    cookie = await sync_to_async(login_cookie)(client, user)
    publisher = RunPublisher(run_id=run.pk, conversation_id=conversation.pk, start_seq=0)
    payload = {"run_id": second[0].pk, "messages": [{"id": message.pk, "content": message.content}]}
    await publisher.publish("followup", payload)
    await publisher.close()

    socket = await open_socket(conversation.pk, cookie, after=0)
    block = await socket.receive_from(timeout=2)
    slot = await socket.receive_from(timeout=2)

    assert f'id="run-{run.pk}"' in block
    assert f'id="next-{run.pk}"' in slot and 'hx-swap-oob="outerHTML"' in slot
    assert slot.index(f'id="msg-{message.pk}"') < slot.index(f'id="run-{second[0].pk}"')
    assert "and &lt;why&gt;?" in slot
    assert f'id="next-{second[0].pk}"' in slot  # where a follow-up of that run would go
    await socket.disconnect()
