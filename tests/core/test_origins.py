"""Websocket origins: scheme, host and port must be the site's own (or CSRF-trusted).

Every handshake goes through the real ASGI application with a logged-in owner's cookie,
so a refusal can only come from the origin check.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from agentsite.asgi import application
from conversations.services import conversation_create
from core.origins import parse_origin

pytestmark = [pytest.mark.django_db(transaction=True)]

SITE = "127.0.0.1:8000"


@pytest.fixture
async def socket_path_and_cookie(client, user) -> tuple[str, bytes]:
    def setup() -> tuple[str, bytes]:
        conversation = conversation_create(owner=user)
        client.force_login(user)
        return (
            f"/ws/conversations/{conversation.pk}/",
            f"sessionid={client.cookies['sessionid'].value}".encode(),
        )

    return await sync_to_async(setup)()


async def handshake(path_and_cookie: tuple[str, bytes], *headers: tuple[str, str]) -> bool:
    path, cookie = path_and_cookie
    raw = [(name.encode(), value.encode()) for name, value in headers]
    communicator = WebsocketCommunicator(application, path, headers=[*raw, (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    return connected


async def test_the_sites_own_origin_is_accepted(socket_path_and_cookie):
    assert await handshake(socket_path_and_cookie, ("host", SITE), ("origin", f"http://{SITE}"))


@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:9999",  # same host, another port
        "http://127.0.0.1",  # same host, the default port
        "https://127.0.0.1:8000",  # same host and port, another scheme
        "http://localhost:8000",  # another host on the same machine
        "null",  # sandboxed iframe, file:// page, data: URL
        "http://127.0.0.1:8000.evil.test",
        "http://user@127.0.0.1:8000",
    ],
)
async def test_other_origins_are_refused(socket_path_and_cookie, origin):
    assert not await handshake(socket_path_and_cookie, ("host", SITE), ("origin", origin))


async def test_a_handshake_without_origin_is_refused(socket_path_and_cookie):
    assert not await handshake(socket_path_and_cookie, ("host", SITE))


async def test_two_origin_headers_are_refused(socket_path_and_cookie):
    own = ("origin", f"http://{SITE}")
    assert not await handshake(socket_path_and_cookie, ("host", SITE), own, own)


async def test_a_host_outside_allowed_hosts_is_refused(socket_path_and_cookie):
    """DNS rebinding: the page and the socket share the attacker's name."""
    origin = ("origin", "http://rebound.evil.test:8000")
    assert not await handshake(socket_path_and_cookie, ("host", "rebound.evil.test:8000"), origin)


async def test_behind_a_tls_proxy_the_https_origin_is_accepted(socket_path_and_cookie):
    """The proxy says it terminated TLS (SECURE_PROXY_SSL_HEADER), as for Django's CSRF."""
    host, proto = ("host", "127.0.0.1"), ("x-forwarded-proto", "https")
    assert await handshake(socket_path_and_cookie, host, proto, ("origin", "https://127.0.0.1"))
    assert not await handshake(socket_path_and_cookie, host, proto, ("origin", "http://127.0.0.1"))


async def test_csrf_trusted_origins_are_accepted(socket_path_and_cookie, settings):
    """A proxy that rewrites the Host: the public origin comes from CSRF_TRUSTED_ORIGINS."""
    settings.ALLOWED_HOSTS = ["127.0.0.1", "chat.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com", "https://*.team.example"]
    internal = ("host", SITE)
    for origin in (
        "https://chat.example.com",
        "https://chat.example.com:443",
        "https://a.team.example",
    ):
        assert await handshake(socket_path_and_cookie, internal, ("origin", origin)), origin
    for origin in ("http://chat.example.com", "https://chat.example.com:8443", "https://team.evil"):
        assert not await handshake(socket_path_and_cookie, internal, ("origin", origin)), origin


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://127.0.0.1:8000", ("http", "127.0.0.1", 8000)),
        ("HTTPS://Chat.Example.com", ("https", "chat.example.com", 443)),
        ("http://[::1]:8000", ("http", "::1", 8000)),
        ("null", None),
        ("", None),
        ("ws://127.0.0.1:8000", None),
        ("http://127.0.0.1:99999", None),
        ("http://127.0.0.1:8000/path", None),
    ],
)
def test_parse_origin(text, expected):
    assert parse_origin(text) == expected
