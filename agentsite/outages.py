"""Requests that meet an outage of the database, Redis or the broker answer 503 with a
message a user can act on, instead of a 500 error page: JSON on the API, the composer's
error line for htmx requests (the typed text stays), a short page otherwise."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

OUTAGES = (OperationalError, InterfaceError, RedisConnectionError, RedisTimeoutError, BrokerError)
MESSAGE = (
    "The service is briefly unavailable (its database or message queue is not answering). "
    "Nothing you typed was lost: try again in a moment."
)
RETRY_AFTER_SECONDS = "5"


class OutageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, *_view: object) -> HttpResponse | None:
        """Load the session's user here, ahead of the middleware that needs it
        (LoginRequiredMiddleware): an outage raised there would be a 500, as Django calls
        ``process_exception`` only for the view's own exceptions."""
        try:
            request.user.is_authenticated  # noqa: B018 - the lazy user is loaded once, here
        except OUTAGES as exception:
            return self.process_exception(request, exception)
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OUTAGES) or _is_integrity_problem(exception):
            return None
        logger.error("outage while serving %s %s", request.method, request.path, exc_info=True)
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse({"error": MESSAGE}, status=503)
        elif request.headers.get("HX-Request") == "true":
            html = render_to_string("conversations/partials.html#form-error", {"error": MESSAGE})
            response = HttpResponse(html, status=503)
            response["HX-Reswap"] = "none"
        else:
            response = HttpResponse(
                render_to_string("503.html", {"message": MESSAGE}, request), status=503
            )
        response["Retry-After"] = RETRY_AFTER_SECONDS
        return response


def _is_integrity_problem(exception: Exception) -> bool:
    """A bad query is a bug, not an outage (OperationalError covers both on SQLite)."""
    return isinstance(exception, DatabaseError) and "no such" in str(exception)
