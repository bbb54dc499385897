"""The ASGI application routes websockets through the auth stack to the consumer."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator

from agentsite.asgi import application
from conversations.services import conversation_create

pytestmark = [pytest.mark.django_db(transaction=True)]


def session_cookie(client, user) -> bytes:
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def connect(path: str, cookie: bytes | None) -> tuple[WebsocketCommunicator, bool]:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if cookie:
        headers.append((b"cookie", cookie))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect()
    return communicator, connected


async def test_owner_connects_to_conversation_socket(client, user):
    from asgiref.sync import sync_to_async

    conversation = await sync_to_async(conversation_create)(owner=user)
    cookie = await sync_to_async(session_cookie)(client, user)
    communicator, connected = await connect(f"/ws/conversations/{conversation.pk}/", cookie)
    assert connected
    await communicator.disconnect()


async def test_anonymous_and_other_users_are_refused(client, user, other_user):
    from asgiref.sync import sync_to_async

    conversation = await sync_to_async(conversation_create)(owner=user)
    path = f"/ws/conversations/{conversation.pk}/"
    communicator, connected = await connect(path, None)
    assert not connected
    await communicator.disconnect()
    cookie = await sync_to_async(session_cookie)(client, other_user)
    communicator, connected = await connect(path, cookie)
    assert not connected
    await communicator.disconnect()


async def test_foreign_origin_is_refused(client, user):
    from asgiref.sync import sync_to_async

    conversation = await sync_to_async(conversation_create)(owner=user)
    cookie = await sync_to_async(session_cookie)(client, user)
    communicator = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"http://evil.example"), (b"cookie", cookie)],
    )
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()


async def test_a_session_ended_by_logging_out_is_refused(client, user):
    from asgiref.sync import sync_to_async

    conversation = await sync_to_async(conversation_create)(owner=user)
    cookie = await sync_to_async(session_cookie)(client, user)
    await sync_to_async(client.logout)()  # the session row is deleted; the cookie stays
    communicator, connected = await connect(f"/ws/conversations/{conversation.pk}/", cookie)
    assert not connected
    await communicator.disconnect()
