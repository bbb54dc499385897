"""What a log line is about: the request, user, conversation, run and Celery task ids.

The ids live in :mod:`contextvars`, so they follow the code that sets them: a request's
sync view in a2wsgi's thread pool and an async view on the loop (both set by
:class:`RequestContextMiddleware` around ``get_response``), a websocket connection's task
(``conversations/live/consumers.py``), a run's task (``conversations/runs/execution.py``)
and the tasks those start (asyncio copies the context into a new task).
:class:`ContextFilter`, on the log handler in JSON mode (``AGENTSITE_LOG_FORMAT``,
``core/jsonlog.py``), copies them onto every record. The user and the conversation of a
request are read off the request when the line is written, never looked up for it: the
user once authentication loaded it, the conversation from the URL once it is resolved.

The request id is the ``X-Request-ID`` the site's trusted proxies sent
(``core/proxies.py``; nginx's ``$request_id``), else a fresh one; the response echoes it.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar, Token
from logging import Filter, LogRecord
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from django.utils.functional import LazyObject, empty

from core.proxies import through_trusted_proxy

FIELDS = ("request_id", "user_id", "conversation_id", "run_id", "task_id")
HEADER = "X-Request-ID"
# What a proxy's request id may look like (nginx's $request_id: 32 hex digits); anything
# else (too long, spaces, control characters) is replaced by a fresh id.
_VALID_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")

_ids: dict[str, ContextVar[Any]] = {
    name: ContextVar(f"agentsite_log_{name}", default=None) for name in FIELDS
}
_request: ContextVar[HttpRequest | None] = ContextVar("agentsite_log_request", default=None)


def bind(**ids: Any) -> list[Token[Any]]:
    """Set ids (names from :data:`FIELDS`) for the rest of the current context: a task
    or a thread's request. Returns the tokens :func:`unbind` takes to undo it."""
    return [_ids[name].set(value) for name, value in ids.items()]


def unbind(tokens: list[Token[Any]]) -> None:
    for token in reversed(tokens):
        token.var.reset(token)


@contextlib.contextmanager
def bound(**ids: Any) -> Iterator[None]:
    """The ids set within the block only."""
    tokens = bind(**ids)
    try:
        yield
    finally:
        unbind(tokens)


def current() -> dict[str, Any]:
    """The ids known here (the request's user and conversation included)."""
    return {name: value for name, value in _known(_request.get()).items() if value is not None}


def _known(request: Any) -> dict[str, Any]:
    ids = {name: var.get() for name, var in _ids.items()}
    if isinstance(request, HttpRequest):
        if ids["request_id"] is None:
            ids["request_id"] = getattr(request, "request_id", None)
        if ids["user_id"] is None:
            ids["user_id"] = _user_id(request)
        if ids["conversation_id"] is None:
            match = request.resolver_match
            if match is not None:
                ids["conversation_id"] = match.kwargs.get("conversation_id")
    return ids


def _user_id(request: HttpRequest) -> Any:
    """The request's user id if authentication has loaded an authenticated user (a lazy
    user not yet evaluated stays so: a log line makes no database query)."""
    user = request.__dict__.get("user")
    if user is None or (isinstance(user, LazyObject) and user._wrapped is empty):
        return None
    return user.pk if getattr(user, "is_authenticated", False) else None


class ContextFilter(Filter):
    """Copies the ids onto each record (``extra`` given to the call wins). A record about
    a request (Django's ``django.request`` lines, written after the middleware returned,
    carry it as ``record.request``) takes that request's ids."""

    def filter(self, record: LogRecord) -> bool:
        request = getattr(record, "request", None)
        if not isinstance(request, HttpRequest):
            request = _request.get()
        for name, value in _known(request).items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


def request_id_for(request: HttpRequest) -> str:
    """The trusted proxy's ``X-Request-ID``, else a fresh id."""
    sent = request.headers.get(HEADER, "")
    if sent and _VALID_ID.fullmatch(sent) and through_trusted_proxy(request):
        return sent
    return uuid.uuid4().hex


class RequestContextMiddleware:
    """First in ``MIDDLEWARE``: names the request (``request.request_id``), makes it the
    log context of everything below, and answers with its ``X-Request-ID``."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        request_id, tokens = self._enter(request)
        try:
            response = self.get_response(request)
        finally:
            unbind(tokens)
        return _echo(response, request_id)

    async def __acall__(self, request: HttpRequest) -> Any:
        request_id, tokens = self._enter(request)
        try:
            response = await self.get_response(request)
        finally:
            unbind(tokens)
        return _echo(response, request_id)

    @staticmethod
    def _enter(request: HttpRequest) -> tuple[str, list[Token[Any]]]:
        request_id = request_id_for(request)
        request.request_id = request_id  # type: ignore[attr-defined]
        tokens = bind(request_id=request_id)
        tokens.append(_request.set(request))
        return request_id, tokens


def _echo(response: HttpResponseBase, request_id: str) -> HttpResponseBase:
    response.headers[HEADER] = request_id
    return response
