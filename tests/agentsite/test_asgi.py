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


def test_every_async_view_is_routed_to_djangos_asgi_handler():
    """Sync views run on the WSGI handler's threads; an async view routed there would be
    run to completion in a thread, and a stream would hold that thread for its life."""
    from asgiref.sync import iscoroutinefunction
    from django.urls import URLPattern, URLResolver, get_resolver, reverse

    from agentsite.asgi import ASYNC_ROUTES

    def patterns(resolver: URLResolver):
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver):
                yield from patterns(entry)
            elif isinstance(entry, URLPattern):
                yield entry

    async_views = [p for p in patterns(get_resolver()) if iscoroutinefunction(p.callback)]
    assert async_views, "the event stream is an async view"
    for pattern in async_views:
        url = reverse(pattern.name, kwargs=dict.fromkeys(pattern.pattern.converters, 1))
        routed = [route for route in ASYNC_ROUTES if route.pattern.match(url.lstrip("/"))]
        assert routed, f"{url} ({pattern.name}) is not in agentsite.asgi.ASYNC_ROUTES"
