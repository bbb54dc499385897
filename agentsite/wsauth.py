"""Who a websocket belongs to: the Django session of its cookie, read-only.

channels' ``AuthMiddlewareStack`` wraps ``send`` in its session middleware so a response
that changed the session can save it and set the cookie; websockets carry no cookies back,
and the consumers here never change the session, yet the wrapper looks the session's state
up on every frame sent (a lazy object's attributes, twice). This stack gives the consumer
the same ``scope["session"]`` and ``scope["user"]`` and leaves ``send`` alone.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from channels.auth import AuthMiddleware
from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware
from django.conf import settings


class ReadOnlySessionMiddleware(BaseMiddleware):
    """``scope["session"]``: the store of the session cookie's key (loaded when read)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.session_store = import_module(settings.SESSION_ENGINE).SessionStore

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        key = scope["cookies"].get(settings.SESSION_COOKIE_NAME)
        return await self.inner(dict(scope, session=self.session_store(key)), receive, send)


def websocket_auth_stack(inner: Any) -> Any:
    """Cookies, then the session, then ``scope["user"]`` (channels' own middleware)."""
    return CookieMiddleware(ReadOnlySessionMiddleware(AuthMiddleware(inner)))
