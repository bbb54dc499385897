"""HTTP under daphne: sync views on Django's WSGI handler in a thread pool, async views on
Django's ASGI handler.

Django's ASGI handler runs a sync view in a thread of its own per request (asgiref's
``ThreadSensitiveContext``) and hops between the event loop and threads several times
on the way: through daphne, the login page took 14 ms this way and 8.5 ms as one hop
into a pooled thread running Django's WSGI handler (message POST 62 -> 36 ms, chat page
28 -> 17-22 ms, both modes measured on the same 2-core machine), and that thread hands
the loop the whole response at once (:mod:`agentsite.wsgibridge`). Pooled threads also
keep their database connections between requests, which per-request threads never
could. Every view of the site is sync except the streaming ones (the API's SSE event
stream): a request for an async view still goes to the ASGI handler, so it streams from
the event loop without holding a thread.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application
from django.urls import Resolver404, resolve

from agentsite.wsgibridge import BufferedWSGIMiddleware

Scope = dict[str, Any]


class DjangoHTTPApp:
    """Route each HTTP request to the handler its view is written for."""

    def __init__(self, *, threads: int | None = None) -> None:
        self.asgi_handler = get_asgi_application()
        threads = threads or int(getattr(settings, "AGENTSITE_HTTP_THREADS", 8))
        self.wsgi_handler = BufferedWSGIMiddleware(get_wsgi_application(), workers=threads)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        handler = self.asgi_handler if self.is_async_view(scope) else self.wsgi_handler
        await handler(scope, receive, send)

    @staticmethod
    def is_async_view(scope: Scope) -> bool:
        """Whether the URL resolves to a coroutine view (a 404 goes to the WSGI side)."""
        path: str = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        try:
            match = resolve(path)
        except Resolver404:
            return False
        return iscoroutinefunction(match.func)
