"""ASGI entry point: HTTP through Django (:mod:`agentsite.http`), websockets through the
session of their cookie (:mod:`agentsite.wsauth`)."""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

# Initialise Django (app registry) before importing anything that touches models.
django.setup(set_prefix=False)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from agentsite import serverloop  # noqa: E402
from agentsite.http import DjangoHTTPApp  # noqa: E402
from agentsite.runtime import tune_for_streaming, tune_garbage_collection, warm_up  # noqa: E402
from agentsite.wsauth import websocket_auth_stack  # noqa: E402
from conversations.routing import websocket_urlpatterns  # noqa: E402

tune_for_streaming()

router = ProtocolTypeRouter(
    {
        "http": DjangoHTTPApp(),
        "websocket": AllowedHostsOriginValidator(
            websocket_auth_stack(URLRouter(websocket_urlpatterns))
        ),
    }
)
warm_up()
tune_garbage_collection()  # last: the app is built


async def application(scope, receive, send):
    """Bind this server's loop (embedded runs, sync callers of the channel layer), route."""
    if scope["type"] != "lifespan":
        serverloop.bind()
    await router(scope, receive, send)
