"""The event loops runs execute on.

Embedded mode runs a run on the ASGI server's own loop, so the in-memory channel layer
and the websocket consumers share it; the ASGI entry point binds that loop. Without one
(a Celery worker, a management command, a test without a server) every run of the
process shares one background loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from asgiref.sync import async_to_sync

from core import eventloop

T = TypeVar("T")

logger = logging.getLogger(__name__)

# A sync caller gives up after this long rather than hang if the server's loop stalls.
CALL_TIMEOUT = 30.0

_server_loop: asyncio.AbstractEventLoop | None = None
_background_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def bind_server_loop() -> None:
    """Remember the running loop as the server's (called by the ASGI entry point)."""
    global _server_loop
    loop = asyncio.get_running_loop()
    if loop is not _server_loop:
        logger.info("serving on %s", eventloop.name_of(loop))
        _server_loop = loop


def run_loop() -> asyncio.AbstractEventLoop:
    """The loop this process runs its runs on: the server's if one is serving."""
    server = _server_loop
    if server is not None and server.is_running():
        return server
    return background_loop()


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background run loop, started on first use."""
    global _background_loop
    with _lock:
        if _background_loop is None or _background_loop.is_closed():
            _background_loop = eventloop.new_event_loop()
            logger.info("runs execute on %s", eventloop.name_of(_background_loop))
            threading.Thread(
                target=_background_loop.run_forever, name="agentsite-runs", daemon=True
            ).start()
        return _background_loop


def is_background_loop(loop: asyncio.AbstractEventLoop) -> bool:
    return loop is _background_loop


def submit(coroutine, loop: asyncio.AbstractEventLoop | None = None) -> Future:
    """Schedule ``coroutine`` on ``loop`` (default: :func:`run_loop`) from any thread."""
    return asyncio.run_coroutine_threadsafe(coroutine, loop or run_loop())


def call(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """``await fn(*args, **kwargs)`` from sync code (a view's thread, a database thread).

    On the server's loop while one serves: objects bound to it (the in-memory channel
    layer's queues) must not be used from another loop, and ``async_to_sync`` in a thread
    the server did not start would run a throwaway loop. Elsewhere (a worker, a command),
    ``async_to_sync``.
    """
    server = _server_loop
    if server is not None and server.is_running() and not _running_on(server):
        return asyncio.run_coroutine_threadsafe(fn(*args, **kwargs), server).result(CALL_TIMEOUT)
    return async_to_sync(fn)(*args, **kwargs)


def _running_on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
