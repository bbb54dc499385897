"""Calling the run loop from sync code.

Runs execute on the loop of the process's runtime (:mod:`core.runtime`): the ASGI
server's own loop in embedded mode, so the in-memory channel layer and the websocket
consumers share it; a Celery worker's run loop in team mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import async_to_sync

from core import runtime

T = TypeVar("T")

# A sync caller gives up after this long rather than hang if the run loop stalls.
CALL_TIMEOUT = 30.0


def call(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """``await fn(*args, **kwargs)`` from sync code (a view's thread, a database thread).

    On the run loop while one runs: objects bound to it (the in-memory channel layer's
    queues) must not be used from another loop, and ``async_to_sync`` in a thread the
    server did not start would run a throwaway loop. Elsewhere (a management command),
    ``async_to_sync``.
    """
    runs = runtime.primary_or_none()
    if runs is not None and runs.loop.is_running() and not _running_on(runs.loop):
        return runs.submit(fn(*args, **kwargs)).result(CALL_TIMEOUT)
    return async_to_sync(fn)(*args, **kwargs)


def _running_on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
