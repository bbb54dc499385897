"""ASGI entry point: HTTP through Django, websockets through channels' auth stack.

Sync views (every page, form and JSON endpoint) run on Django's WSGI handler in a2wsgi's
thread pool: one thread hop per request, and the pooled threads keep their database
connections. Django's ASGI handler would hop between the loop and a new thread around
each middleware and open a database connection per request. Only the streaming endpoint
(an async view) needs the ASGI handler; :data:`ASYNC_ROUTES` lists it, and a test checks
that it lists every async view.
"""

from __future__ import annotations

import asyncio
import os
import sys

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
from conversations.runtime import start_for_server, stop_serving  # noqa: E402
from core import graceful, runtime  # noqa: E402
from core.checks import refuse_to_serve_without_key  # noqa: E402
from core.origins import OriginCheck  # noqa: E402
from core.tuning import tune_for_streaming, tune_garbage_collection, warm_up  # noqa: E402

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


def start_with_daphnes_reactor() -> None:
    """Under daphne (``agentsite-server`` or plain ``daphne``), which does not speak the
    lifespan protocol: the runtime starts when twisted's reactor starts, before its loop
    serves anything, and closes before the reactor shuts down. SIGTERM first stops the
    server gracefully (:func:`core.graceful.on_sigterm_under_daphne`: no new connections,
    runs finish, clients told to reconnect), then stops the reactor. Daphne imports this
    module before it runs the reactor; under another server nothing happens here."""
    if "daphne.server" not in sys.modules:  # daphne installs its reactor when imported
        return
    from twisted.internet import defer, reactor

    def start() -> None:
        loop = asyncio.get_event_loop_policy().get_event_loop()  # the reactor's, not running
        started = start_for_server(loop)
        reactor.addSystemEventTrigger(
            "before",
            "shutdown",
            lambda: defer.Deferred.fromFuture(loop.create_task(started.aclose())),
        )
        graceful.on_sigterm_under_daphne(loop, stop_serving)

    reactor.callWhenRunning(start)


start_with_daphnes_reactor()
warm_up()
tune_garbage_collection()  # last: the app is built


async def application(scope, receive, send):
    """Route a connection; the lifespan protocol starts and closes the process's runtime
    (daphne sends none: :func:`start_with_daphnes_reactor`)."""
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    await router(scope, receive, send)


async def lifespan(receive, send) -> None:
    """ASGI lifespan: the runtime on the server's loop from startup to shutdown."""
    started = None
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if runtime.primary_or_none() is None:
                started = start_for_server(asyncio.get_running_loop())
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if started is not None:
                await stop_serving(graceful.Deadline.from_now())
                await started.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
