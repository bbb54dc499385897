"""Requests that meet an outage of the database, Redis or the broker answer 503 with a
message a user can act on, instead of a 500 error page: JSON on the API, the composer's
error line for htmx requests (the typed text stays), a short page otherwise."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.translation import gettext_lazy as _
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from core.episodes import OutageLog

logger = logging.getLogger(__name__)

OUTAGES = (OperationalError, InterfaceError, RedisConnectionError, RedisTimeoutError, BrokerError)
MESSAGE = _(
    "The service is briefly unavailable (its database or message queue is not answering). "
    "Nothing you typed was lost: try again in a moment."
)
DISK_FULL_MESSAGE = _(
    "The server's disk is full, so nothing new can be saved until an administrator frees "
    "space. Nothing you typed was lost: try again later."
)
# PostgreSQL's "could not extend file ... No space left on device" (SQLSTATE 53100) and
# SQLite's "database or disk is full".
DISK_FULL_WORDS = ("no space left on device", "disk is full", "disk full")
requests_failing = OutageLog("a dependency of the web requests (database, Redis or broker)")


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the database could not write because the disk is full."""
    cause = getattr(error, "__cause__", None)
    if getattr(cause, "sqlstate", None) == "53100":
        return True
    text = str(error).lower()
    return any(words in text for words in DISK_FULL_WORDS)


def outage_message(error: BaseException) -> str:
    """The sentence a user reads when a request met ``error`` (in the request's language)."""
    return str(DISK_FULL_MESSAGE if is_disk_full(error) else MESSAGE)


RETRY_AFTER_SECONDS = "5"


class OutageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 503:
            requests_failing.recovered()
        return response

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
        requests_failing.failed(exception, doing=f"{request.method} {request.path}")
        message = outage_message(exception)
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse({"error": message}, status=503)
        elif request.headers.get("HX-Request") == "true":
            html = render_to_string("conversations/partials.html#form-error", {"error": message})
            response = HttpResponse(html, status=503)
            response["HX-Reswap"] = "none"
        else:
            response = HttpResponse(
                render_to_string("503.html", {"message": message}, request), status=503
            )
        response["Retry-After"] = RETRY_AFTER_SECONDS
        return response


def _is_integrity_problem(exception: Exception) -> bool:
    """A bad query is a bug, not an outage (OperationalError covers both on SQLite)."""
    return isinstance(exception, DatabaseError) and "no such" in str(exception)
