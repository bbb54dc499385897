"""ASGI entry point: HTTP through Django, websockets through channels' auth stack.

Sync views (every page, form and JSON endpoint) run on Django's WSGI handler in a2wsgi's
thread pool: one thread hop per request, and the pooled threads keep their database
connections. Django's ASGI handler would hop between the loop and a new thread around
each middleware and open a database connection per request. Only the streaming endpoint
(an async view) needs the ASGI handler; :data:`ASYNC_ROUTES` lists it, and a test checks
that it lists every async view.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

# Set up Django (the app registry) before importing anything that touches models.
django_application = get_asgi_application()

from a2wsgi import WSGIMiddleware  # noqa: E402
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from conversations.routing import websocket_urlpatterns  # noqa: E402
from conversations.runs import launcher, loops  # noqa: E402
from core.checks import refuse_to_serve_without_key  # noqa: E402
from core.origins import OriginCheck  # noqa: E402
from core.runtime import tune_for_streaming, tune_garbage_collection, warm_up  # noqa: E402

refuse_to_serve_without_key()
tune_for_streaming()

ASYNC_ROUTES = [
    path("api/conversations/<id:conversation_id>/events", django_application),
]
sync_views = WSGIMiddleware(get_wsgi_application(), workers=settings.AGENTSITE_HTTP_THREADS)

router = ProtocolTypeRouter(
    {
        "http": URLRouter([*ASYNC_ROUTES, re_path(r"", sync_views)]),
        # Scheme, host and port of the Origin, not only its host (core/origins.py).
        "websocket": OriginCheck(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
warm_up()
tune_garbage_collection()  # last: the app is built


async def application(scope, receive, send):
    """Remember the server's loop (embedded runs execute on it), then route."""
    if scope["type"] != "lifespan":
        loops.bind_server_loop()
        launcher.keep_sweeping()
    await router(scope, receive, send)
