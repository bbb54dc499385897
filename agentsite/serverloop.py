"""The ASGI server's event loop, and how sync code reaches objects bound to it.

Views run in the HTTP thread pool (:mod:`agentsite.http`), not in asgiref's sync threads,
so ``async_to_sync`` there would start a throwaway event loop per call. Loop-bound
objects must not be used from one: the embedded in-memory channel layer's queues belong
to the server loop (a put from another loop wakes nobody), and team mode's batched Redis
publisher keeps one pipeline per loop (a throwaway loop means a new connection per call).
:func:`call` runs the coroutine on the server loop instead, as Django's own ASGI handler
did for its sync views.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import async_to_sync

from agentsite import eventloop

T = TypeVar("T")

logger = logging.getLogger(__name__)

# A sync caller gives up after this long rather than hang if the server loop stalls.
CALL_TIMEOUT = 30.0

_loop: asyncio.AbstractEventLoop | None = None


def bind(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Remember the server's loop (the ASGI entry point calls this for each connection)."""
    global _loop
    loop = loop or asyncio.get_running_loop()
    if loop is not _loop:
        logger.info("serving on %s", eventloop.name_of(loop))
        _loop = loop


def get() -> asyncio.AbstractEventLoop | None:
    """The bound server loop if it is still open (None in workers and commands)."""
    loop = _loop
    return loop if loop is not None and not loop.is_closed() else None


def call(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` awaited on the server loop, from a sync thread.

    Without a running server loop (a Celery worker, a management command) this is
    ``async_to_sync``, which also keeps asgiref's own rules inside its sync threads.
    """
    loop = get()
    if loop is None or not loop.is_running() or _on_a_loop():
        return async_to_sync(fn)(*args, **kwargs)
    return asyncio.run_coroutine_threadsafe(fn(*args, **kwargs), loop).result(CALL_TIMEOUT)


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
