"""ASGI entry point: HTTP through Django, websockets through channels' auth stack."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

# Set up Django (the app registry) before importing anything that touches models.
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from agentsite.runtime import tune_for_streaming, tune_garbage_collection, warm_up  # noqa: E402
from conversations.routing import websocket_urlpatterns  # noqa: E402
from conversations.runs import loops  # noqa: E402

tune_for_streaming()

router = ProtocolTypeRouter(
    {
        "http": django_application,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
warm_up()
tune_garbage_collection()  # last: the app is built


async def application(scope, receive, send):
    """Remember the server's loop (embedded runs execute on it), then route."""
    if scope["type"] != "lifespan":
        loops.bind_server_loop()
    await router(scope, receive, send)
