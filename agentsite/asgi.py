"""ASGI entry point: HTTP through Django, websockets through channels' auth stack."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

# Initialise Django (app registry) before importing anything that touches models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from agentsite.runtime import tune_for_streaming  # noqa: E402
from conversations import launcher  # noqa: E402
from conversations.routing import websocket_urlpatterns  # noqa: E402

tune_for_streaming()

router = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)


async def application(scope, receive, send):
    """Bind this server's loop for embedded runs, then route."""
    if scope["type"] != "lifespan":
        launcher.bind_loop()
    await router(scope, receive, send)
